"""A target's maintenance by the run that holds the lease: when it compacts and VACUUMs, with
which retention, and how far back the target can be read.

The settings (`core.model.Maintenance`, entry over defaults) are resolved into each target's
plan and shown by `plan`. The run loop asks the engine to look at a target between its
applies, at most every `check_every_ms`; the engine reads what the table holds
(`TableFacts`: files, bytes, when it was last compacted and vacuumed) and does what `due`
says. The retention is one setting (`maintenance.retain`) for everything a reader may ask
for: a version, a TSO (`as_of`), a sync point. It counts in TiDB time behind the source's
resolved TSO, which a commit's wall time never precedes while the run follows the stream, so
a VACUUM that keeps every file removed within the retention (wall time) keeps every version
a read inside it needs. The newest sync point of the target's source holds its version past
the retention (`vacuum_retain_ms`, `readable_from`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ticdc_sync.core.durations import render_ms
from ticdc_sync.core.model import SMALL_FILE_BYTES, Maintenance

# A TSO's physical part is milliseconds, above 18 logical bits (codec facts 1.1).
_SHIFT = 18
# The loop looks at a target at most this often, and at most every `vacuum_every`.
CHECK_EVERY_MS = 5 * 60 * 1000
# Delta's VACUUM counts its RETAIN in whole hours: `TimeUnit.HOURS.toMillis(math.round(h))`
# in its VacuumCommand, so `RETAIN 0.166667 HOURS` (10 minutes) keeps nothing. A VACUUM's
# retention is therefore rounded up to whole hours here, never down: a file a read inside
# the retention needs must stay, and an extra part of an hour only costs disk.
VACUUM_UNIT_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What a target's table holds now, as the engine read it."""

    files: int
    bytes: int
    # Wall ms of its last compaction and last VACUUM (or, none being known, of its
    # creation: nothing was removed before it); None: not known.
    last_compacted_ms: int | None = None
    last_vacuumed_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Due:
    """What a look at a target does now."""

    compact: bool
    vacuum: bool
    # The VACUUM's retention (wall time), whole hours (`vacuum_hours`): files removed
    # since then stay.
    retain_ms: int


def check_every_ms(m: Maintenance) -> int:
    """How often at most the run looks at a target (in `--follow`)."""
    return max(1000, min(CHECK_EVERY_MS, m.vacuum_every_ms))


def overdue_after_ms(m: Maintenance) -> int:
    """How late a look at a target may be before it goes ahead of the due applies: one
    check interval past its time. Applies that keep every worker busy would otherwise hold
    compaction and VACUUM off for as long as the load lasts, and the disk would grow."""
    return check_every_ms(m)


def compaction_due(m: Maintenance, files: int, size: int) -> bool:
    """Whether a table of `files` data files of `size` bytes in all is due a compaction:
    at least `compact_small_files` of them, averaging under `SMALL_FILE_BYTES`."""
    if not m.enabled or m.compact_small_files <= 0 or files < m.compact_small_files:
        return False
    return size < files * SMALL_FILE_BYTES


def vacuum_retain_ms(m: Maintenance, now_ms: int, held_tso: int | None) -> int:
    """The retention a VACUUM of the target keeps: `retain`, or longer, back to the wall
    time of the newest sync point of its source (`held_tso`), whose version it holds;
    rounded up to whole hours (`VACUUM_UNIT_MS`)."""
    keep = m.retain_ms
    if held_tso is not None and held_tso >= 0:
        keep = max(keep, now_ms - (held_tso >> _SHIFT))
    return vacuum_hours(keep) * VACUUM_UNIT_MS


def vacuum_hours(retain_ms: int) -> int:
    """`RETAIN n HOURS` of a VACUUM keeping at least `retain_ms`: whole hours, rounded up."""
    return -(-retain_ms // VACUUM_UNIT_MS)


def due(m: Maintenance, facts: TableFacts, now_ms: int, held_tso: int | None = None) -> Due:
    """What to do to a target now: compact when `compaction_due`, VACUUM when the last one
    (or its creation) is `vacuum_every` ago or more."""
    retain = vacuum_retain_ms(m, now_ms, held_tso)
    if not m.enabled:
        return Due(False, False, retain)
    last = facts.last_vacuumed_ms
    vacuum = last is None or now_ms - last >= m.vacuum_every_ms
    return Due(compaction_due(m, facts.files, facts.bytes), vacuum, retain)


def readable_from(m: Maintenance, resolved: int | None, held_tso: int | None) -> int | None:
    """The oldest TSO a read of the target is allowed at: `retain` behind its source's
    resolved TSO, or its source's newest sync point if that is older (None: anything)."""
    if resolved is None or resolved < 0:
        return None
    cut = resolved - (m.retain_ms << _SHIFT)
    if held_tso is not None and 0 <= held_tso < cut:
        cut = held_tso
    return cut if cut > 0 else None


# Delta's default `delta.logRetentionDuration`: log entries older than this go at a
# checkpoint, and the versions they describe with them.
DELTA_LOG_RETENTION_MS = 30 * 86_400_000


def notes(m: Maintenance) -> list[str]:
    """What `plan` says of a target's maintenance settings."""
    said = []
    if m.enabled and m.retain_ms % VACUUM_UNIT_MS:
        kept = vacuum_retain_ms(m, 0, None)
        said.append(
            f"maintenance.retain {render_ms(m.retain_ms)} ({m.retain_from}) is not whole hours: "
            f"Delta's VACUUM counts whole hours, so removed files stay {render_ms(kept)} "
            "(reads are still refused past the retention)"
        )
    if m.retain_ms <= DELTA_LOG_RETENTION_MS:
        return said
    return [
        *said,
        f"maintenance.retain {render_ms(m.retain_ms)} ({m.retain_from}) is longer than Delta's "
        "default log retention (30 days): versions older than that lose their log entries at "
        "a checkpoint; set `delta.logRetentionDuration` to at least the retention in the "
        "table entry's `properties`",
    ]


def describe(m: Maintenance) -> dict[str, Any]:
    """The target's maintenance as `plan` shows it (JSON)."""
    return {
        "enabled": m.enabled,
        "compact_small_files": m.compact_small_files,
        "retain": render_ms(m.retain_ms),
        "retain_from": m.retain_from,
        "vacuum_every": render_ms(m.vacuum_every_ms),
        "from": m.origin,
    }


def text(d: dict[str, Any]) -> str:
    """One line of `plan`'s text from `describe`'s dict."""
    if not d["enabled"]:
        return f"off; readable back {d['retain']}  ({d['from']})"
    compact = (
        f"compact at {d['compact_small_files']} small files"
        if d["compact_small_files"]
        else "no compaction"
    )
    return (
        f"{compact}, VACUUM every {d['vacuum_every']}, readable back {d['retain']}  ({d['from']})"
    )
