"""Running tallies of what has been staged, per source: the bookkeeping a run starts from.

Per partition: the last staged offset, the highest watermark (or, for sources without a
commit_ts, the highest approximate ts), and the first staged bad record. Per upstream
table: row and DDL event counts (for routing and the "skipped" report), and the lowest and
highest commit_ts of its row changes (what the run loop starts its pending ranges from,
`engine.Started`). Each staging
commit carries in its Delta `userMetadata` the tallies of everything staged up to and
including its own events (`Carried.complete`), aggregated from the batch before it is
written: a reader of the table's newest commit knows what is staged, resolved and readable
without a job and without waiting for anything written after the commit. Commits written
by earlier versions carried only what came before them; for those, what was staged since
is found by offset (`offset > last_offset` per partition) and folded in. Pure Python: the
aggregate query itself lives in `spark/staging/table.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

STAGED_KEY = "ticdc_sync_staged"
FORMAT_VERSION = 1
# Set in a commit's tallies when they count the commit's own events. Absent in commits of
# earlier versions, whose tallies end before them; a reader of those that ignores the key
# (an older ticdc-sync) folds in the events after them, of which there are then none, so
# both versions read both kinds of commit right.
OWN_EVENTS_KEY = "own_events"

# Columns of one increment row, as `spark/staging/table.py` aggregates them per
# (topic, partition, db, tbl) over newly staged events.
INCREMENT_FIELDS = (
    "topic",
    "partition",
    "db",
    "tbl",
    "last_offset",
    "watermark",
    "inexact_ts",
    "first_bad",
    "bad",
    "rows",
    "ddls",
    "events",
    "row_lo",
    "row_hi",
)


@dataclass(frozen=True)
class PartitionTally:
    topic: str
    partition: int
    last_offset: int
    watermark: int | None = None  # highest TIDB_WATERMARK / resolved commit_ts staged
    inexact_ts: int | None = None  # highest approximate ts of row/DDL events (no commit_ts)
    first_bad: int | None = None  # offset of the first bad record ever staged
    bad: int = 0  # bad records staged

    @property
    def progress_ts(self) -> int | None:
        """Exact sources advance by watermark; inexact ones by their highest event ts."""
        return self.watermark if self.watermark is not None else self.inexact_ts


@dataclass
class SourceTally:
    partitions: dict[tuple[str, int], PartitionTally] = field(default_factory=dict)
    tables: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # rows, ddls
    # Lowest and highest commit_ts of each table's row changes ever staged (None in a tally
    # written before they were kept: unknown).
    spans: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # The highest commit_ts a trim deletes row and watermark events up to (None: none
    # recorded): staged changes above it are all still there (`as_of` reads them), those at
    # or below it may be gone. A commit carries it before the DELETE runs (beside the
    # polls, in a commit of its own), so no reader of the tallies misses a deletion.
    trimmed: int | None = None

    @property
    def bad(self) -> int:
        return sum(p.bad for p in self.partitions.values())

    @property
    def ddls(self) -> int:
        return sum(d for _, d in self.tables.values())

    def consumed(self) -> dict[tuple[str, int], int]:
        return {k: p.last_offset for k, p in self.partitions.items()}

    def fold(self, increments: Iterable[Mapping]) -> int:
        """Add aggregate rows of newly staged events (INCREMENT_FIELDS); return their count."""
        total = 0
        for r in increments:
            total += int(r["events"])
            key = (r["topic"], int(r["partition"]))
            old = self.partitions.get(key)
            if old is None:
                old = PartitionTally(key[0], key[1], int(r["last_offset"]))
            self.partitions[key] = replace(
                old,
                last_offset=max(old.last_offset, int(r["last_offset"])),
                watermark=_max(old.watermark, r["watermark"]),
                inexact_ts=_max(old.inexact_ts, r["inexact_ts"]),
                # Increments lie after everything already tallied: an older first bad wins.
                first_bad=old.first_bad if old.first_bad is not None else r["first_bad"],
                bad=old.bad + int(r["bad"]),
            )
            if int(r["rows"]) or int(r["ddls"]):
                tkey = (r["db"] or "", r["tbl"] or "")
                rows, ddls = self.tables.get(tkey, (0, 0))
                self.tables[tkey] = (rows + int(r["rows"]), ddls + int(r["ddls"]))
            lo, hi = r["row_lo"], r["row_hi"]
            if lo is not None and hi is not None:
                tkey = (r["db"] or "", r["tbl"] or "")
                old_span = self.spans.get(tkey)
                if old_span is not None:
                    lo, hi = min(old_span[0], int(lo)), max(old_span[1], int(hi))
                self.spans[tkey] = (int(lo), int(hi))
        return total

    def to_dict(self) -> dict:
        out = {
            "partitions": [
                [p.topic, p.partition, p.last_offset, p.watermark, p.inexact_ts, p.first_bad, p.bad]
                for _, p in sorted(self.partitions.items())
            ],
            "tables": [
                [db, tbl, rows, ddls] for (db, tbl), (rows, ddls) in sorted(self.tables.items())
            ],
            "spans": [[db, tbl, lo, hi] for (db, tbl), (lo, hi) in sorted(self.spans.items())],
        }
        if self.trimmed is not None:
            out["trimmed"] = self.trimmed
        return out

    @staticmethod
    def from_dict(d: Mapping) -> SourceTally:
        t = SourceTally()
        for topic, part, last, wm, ix, first_bad, bad in d.get("partitions", []):
            t.partitions[(topic, part)] = PartitionTally(topic, part, last, wm, ix, first_bad, bad)
        for db, tbl, rows, ddls in d.get("tables", []):
            t.tables[(db, tbl)] = (rows, ddls)
        for db, tbl, lo, hi in d.get("spans", []):
            t.spans[(db, tbl)] = (lo, hi)
        trimmed = d.get("trimmed")
        t.trimmed = None if trimmed is None else int(trimmed)
        return t

    def copy(self) -> SourceTally:
        return SourceTally(dict(self.partitions), dict(self.tables), dict(self.spans), self.trimmed)


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return None if b is None else int(b)
    return a if b is None else max(a, int(b))


@dataclass(frozen=True)
class Carried:
    """The tallies one staging commit carries."""

    sources: dict[str, SourceTally]
    # True: they count the commit's own events (a poll's stage, the commit after a catch-up
    # batch's write, one of a trim's bound); False: they end just before them (that write;
    # every stage of earlier versions), and the events staged after them must be
    # aggregated and folded in.
    complete: bool


def to_user_metadata(tallies: Mapping[str, SourceTally], *, own_events: bool = True) -> str:
    """The userMetadata of a staging commit carrying `tallies`; `own_events`: they count the
    commit's own events (False: they end before them, as a catch-up batch's write, which
    an empty commit with them follows)."""
    body: dict = {
        "v": FORMAT_VERSION,
        "sources": {s: t.to_dict() for s, t in sorted(tallies.items())},
    }
    if own_events:
        body[OWN_EVENTS_KEY] = True
    return json.dumps({STAGED_KEY: body}, sort_keys=True, separators=(",", ":"))


def read_carried(text: str | None) -> Carried | None:
    """The tallies a staging commit carries, or None if it carries none (or a newer format)."""
    if not text:
        return None
    try:
        body = json.loads(text)[STAGED_KEY]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(body, dict) or body.get("v") != FORMAT_VERSION:
        return None
    sources = {s: SourceTally.from_dict(d) for s, d in body.get("sources", {}).items()}
    return Carried(sources, body.get(OWN_EVENTS_KEY) is True)


def from_user_metadata(text: str | None) -> dict[str, SourceTally] | None:
    """`read_carried`'s tallies alone, for readers that only look at what they hold."""
    carried = read_carried(text)
    return None if carried is None else carried.sources
