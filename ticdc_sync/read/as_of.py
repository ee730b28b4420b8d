"""Reading the lake as of one TiDB TSO: which TSO a request means, which Delta version of each
target holds the state at or before it, and which planned steps bring it the rest of the way.

A request is a TSO, a wall-clock time (its TSO's physical part, ms << 18, codec facts 1.1)
or `latest` (the lowest resolved TSO over the sources involved: the source that holds it
back is named). A target's Delta commits carry its marker (`window.Marker`): a version
whose marker has `applied_ts <= T`, and no DDL after T or half done, holds the upstream
table as of its applied ts; the staged changes in (applied_ts, T] bring it to T. The steps
that apply them are the plan's own (`plan.steps.target_steps` over the target's plan with
its stop at T), so a read types and collapses rows exactly as an apply does. An ADD COLUMN
in that range is replayed in the read (existing rows get its backfill value, as the
apply's UPDATE gives them); any other DDL with a Delta change is refused, naming it; a DDL
that changes nothing in Delta (an index, a comment, ...) is passed over.

A target none of whose upstream tables existed at T (created or renamed in after it, dropped
or renamed away at or before it, as the source's DDL timeline tells: `absent_at`) is not
read at all: it is left out of the read and named with why (`Absent`), never a reason to
refuse the other targets. Only a target whose table did exist at T and that has no version
to read at T refuses (`no_version`). `newest_readable` (status's consistent read) makes the
same decision.

Pure: no I/O and no pyspark. `snapshot` reads the warehouse for it, `spark.as_of` reads rows.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ticdc_sync.core.durations import render_ms
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.window import Marker
from ticdc_sync.ddl.changes import AddColumn
from ticdc_sync.ddl.timeline import Existence, Timeline
from ticdc_sync.plan.maintenance import readable_from
from ticdc_sync.plan.model import (
    OP_BACKFILL,
    OP_RECORD,
    OP_SQL,
    Ddl,
    Features,
    Rows,
    Step,
    Stop,
    TargetDdl,
    TargetPlan,
)
from ticdc_sync.plan.policy import APPLY, NONE, SKIP
from ticdc_sync.plan.steps import segment, target_steps

LATEST = "latest"
# A TSO's physical part is milliseconds since the epoch, above 18 logical bits (codec facts 1.1).
PHYSICAL_SHIFT = 18

# Delta operations that never change a table's rows: a commit of one of them without a
# marker holds what the commit before it held (OPTIMIZE and VACUUM by a user or a job).
_KEEPS_ROWS = frozenset(
    {
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "REORG",
        "UPGRADE PROTOCOL",
        "DROP TABLE FEATURE",
        "ADD CONSTRAINT",
        "DROP CONSTRAINT",
        "CHECKPOINT",
    }
)
_CREATES = frozenset({"CREATE TABLE", "CREATE TABLE AS SELECT"})


def tso_of_time(when: dt.datetime) -> int:
    """The smallest TSO at wall-clock time `when` (a naive time is taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    ms = int(round(when.timestamp() * 1000))
    return ms << PHYSICAL_SHIFT


def time_of_tso(tso: int) -> dt.datetime:
    return dt.datetime.fromtimestamp((tso >> PHYSICAL_SHIFT) / 1000, tz=dt.timezone.utc)


def wall_text(tso: int) -> str:
    return time_of_tso(tso).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def parse_as_of(value: int | str | dt.datetime) -> int | str:
    """A TSO (int), or `LATEST`: from an int, a digit string, `latest`, an ISO-8601 time
    (`2026-11-26 22:45:00`, `2026-11-26T22:45:00+01:00`; UTC unless it says otherwise) or
    a datetime. The time of a TSO is its physical part (ms << 18)."""
    if isinstance(value, bool):
        raise UserError(f"as_of: {value!r} is not a TSO, a time or `latest`")
    if isinstance(value, int):
        if value < 0:
            raise UserError(f"as_of: {value} is not a TSO (hint: TSOs are positive)")
        return value
    if isinstance(value, dt.datetime):
        return tso_of_time(value)
    text = str(value).strip()
    if text.lower() == LATEST:
        return LATEST
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"as_of: {text!r} is neither a TSO, `latest` nor a time (hint: a TSO like "
            "455000000000000000, `latest`, or a time like 2026-11-26T22:45:00Z)"
        ) from None
    return tso_of_time(when)


@dataclass(frozen=True, slots=True)
class AsOf:
    """The TSO a read is at, what was asked, and (for `latest`) the source holding it back."""

    tso: int
    asked: str
    held_by: str | None = None

    @property
    def wall_time(self) -> str:
        return wall_text(self.tso)


def resolve(value: int | str | dt.datetime, resolved: Mapping[str, int | None]) -> AsOf:
    """The TSO of `value` over the sources involved (`resolved`: each one's resolved TSO,
    None or -1 when nothing is resolved). Refused when a source has nothing resolved or
    the TSO is newer than a source's resolved TSO (changes up to it may still arrive)."""
    if not resolved:
        raise UserError("as_of: no target selected (hint: check the target names)")
    for name, ts in sorted(resolved.items()):
        if ts is None or ts < 0:
            raise UserError(
                f"as_of: source {name} has no resolved TSO yet (no watermark on every "
                "partition): nothing of it can be read consistently (hint: run first)"
            )
    asked = parse_as_of(value)
    if asked == LATEST:
        name, ts = min(sorted(resolved.items()), key=lambda kv: kv[1] or 0)
        return AsOf(int(ts or 0), LATEST, name)
    assert isinstance(asked, int)
    for name, ts in sorted(resolved.items()):
        assert ts is not None
        if asked > ts:
            raise UserError(
                f"as_of: TSO {asked} ({wall_text(asked)}) is newer than source {name}'s "
                f"resolved TSO {ts} ({wall_text(ts)}): changes up to it may not have arrived "
                "yet (hint: use `latest`, or wait for TiCDC to resolve it)"
            )
    return AsOf(asked, str(value))


# --------------------------------------------------------------------------- absent targets


@dataclass(frozen=True, slots=True)
class Absent:
    """A target none of whose upstream tables existed at `tso`: a read leaves it out. `why`
    tells each table's story; `gone_ts`: the DDL at or before `tso` that took its last table
    away (None: it did not exist yet); `created_ts`: the first DDL after `tso` that brings
    one of its tables (back) (None: none staged)."""

    target: str
    tso: int
    why: str
    gone_ts: int | None = None
    created_ts: int | None = None

    def message(self) -> str:
        return (
            f"target {self.target} did not exist upstream at TSO {self.tso} "
            f"({wall_text(self.tso)}): {self.why}"
        )


def absent_at(t: TargetPlan, timeline: Timeline, tso: int) -> Absent | None:
    """Target `t` at `tso` when none of its upstream tables existed at it, as its source's
    DDL `timeline` tells (`Timeline.absent_at`: gone at or before `tso`, or a table nothing
    names at or before `tso` that the next DDL naming it creates or renames in), else None.
    A table the timeline says nothing about (known from a seed, an export or row metadata
    only) counts as existing: the read needs a version of the target, and refuses without
    one. The one decision of absence: reads, `snapshot` and `newest_readable` ask it here."""
    whys: list[str] = []
    gone: list[int] = []
    back: list[int] = []
    for db, tbl in t.upstreams:
        if not timeline.absent_at(db, tbl, tso):
            return None
        turns = timeline.existence(db, tbl)
        past = [x for x in turns if x.commit_ts <= tso]
        ahead = next((x for x in turns if x.commit_ts > tso), None)
        name = f"{db}.{tbl}"
        went = past[-1] if past and not past[-1].exists else None
        comes = ahead if ahead is not None and ahead.exists else None
        if comes is not None:
            back.append(comes.commit_ts)
        if went is not None:
            gone.append(went.commit_ts)
            text = f"{name} {_existence_text(went)}"
            if comes is not None:
                text += f" ({_existence_text(comes, again=True)})"
        elif comes is not None:
            text = f"{name} {_existence_text(comes)}"
        else:
            # Gone by its schema history alone (no staged DDL says how).
            text = f"{name} had been dropped or renamed away"
        whys.append(text)
    if not whys:
        return None  # no upstream table known: nothing says it is absent
    return Absent(
        t.name, tso, "; ".join(whys), max(gone) if gone else None, min(back) if back else None
    )


def _existence_text(x: Existence, again: bool = False) -> str:
    """`created at TSO X`, `renamed in from db.t at TSO X`, `dropped ...`, `renamed to ...`."""
    other = f"{x.other[0]}.{x.other[1]}" if x.other is not None else None
    if x.exists:
        how = "created" if other is None else f"renamed in from {other}"
    else:
        how = "dropped" if other is None else f"renamed to {other}"
    return f"{how}{' again' if again else ''} at TSO {x.commit_ts}"


# --------------------------------------------------------------------------- versions


@dataclass(frozen=True, slots=True)
class Version:
    """One Delta version of a target as its log says: its marker (its own, or the one of
    the commit before when it changed no rows), None when the state it holds is unknown."""

    version: int
    timestamp_ms: int | None
    operation: str
    marker: Marker | None


def versions(commits: Iterable[Mapping]) -> list[Version]:
    """The target's versions, oldest first, from its commit infos (any order, each with
    `version`, `operation`, `timestamp`, `userMetadata`): a commit without a marker holds
    the state of the one before it when it changes no rows (`_KEEPS_ROWS`), an empty table
    before any change when it is the table's creation, else an unknown state."""
    out: list[Version] = []
    prev: Marker | None = None
    expected: int | None = None
    for c in sorted(commits, key=lambda c: int(c["version"])):
        v = int(c["version"])
        op = str(c.get("operation") or "")
        own = Marker.from_user_metadata(c.get("userMetadata"))
        if expected is not None and v != expected:
            prev = None  # a gap in the log: what lay between is unknown
        if own is not None:
            m: Marker | None = own
        elif op in _CREATES and v == 0:
            m = Marker()
        elif op in _KEEPS_ROWS:
            m = prev
        else:
            m = None
        out.append(Version(v, c.get("timestamp"), op, m))
        prev, expected = m, v + 1
    return out


def usable(m: Marker | None, tso: int) -> bool:
    """Whether a version with marker `m` holds the upstream state as of its applied ts, with
    nothing after `tso` in it: no row after it, no DDL after it (a DDL moved ahead of its
    rows, `fuse_additive`, commits before them) and no DDL half applied."""
    if m is None:
        return False
    if m.applied_ts > tso or m.ddl_ts > tso:
        return False
    return not (m.ddl_parts > 0 and m.ddl_part < m.ddl_parts - 1)


def version_at(vs: Sequence[Version], tso: int, readable_from: int = 0) -> Version | None:
    """The newest version usable at `tso` that time travel can still reach."""
    found = [v for v in vs if v.version >= readable_from and usable(v.marker, tso)]
    return found[-1] if found else None


def with_others(vs: Sequence[Version], v: Version) -> Version:
    """Version `v` with the commits others made on top of it (none of a run's markers: a
    user's UPDATE, DELETE, INSERT or MERGE, an OPTIMIZE) up to the next commit of a run: the
    newest of them, holding `v`'s marker. What a table holds at `v`'s TSO as its readers
    see it (`ticdc-sync verify` compares that); `v` itself when nothing follows it but
    runs' commits."""
    out = v
    for x in vs:
        if x.version <= v.version:
            continue
        if x.marker is not None and x.marker != v.marker:
            break  # a run's next commit: what follows is past v's TSO
        out = dataclasses.replace(x, marker=v.marker)
    return out


# --------------------------------------------------------------------------- read steps


@dataclass(frozen=True, slots=True)
class AddColumns:
    """An ADD COLUMN DDL in the read: the columns it adds (each with the value existing rows
    get, its `backfill_sql`), as the apply's ALTER TABLE and UPDATE would."""

    commit_ts: int
    sql: str
    columns: tuple[AddColumn, ...]


ReadStep = Rows | AddColumns


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """How one target is read at `tso`: Delta version `version` (its marker `marker`), then
    the row segments `steps` of the staged changes after it (none when it is exact)."""

    target: str
    source: str
    location: str
    tso: int
    version: int
    marker: Marker
    steps: tuple[ReadStep, ...]
    plan: TargetPlan  # the target's plan from `marker` with its stop at `tso`

    @property
    def exact(self) -> bool:
        return not self.steps


def read_steps(t: TargetPlan, timeline: Timeline, tso: int) -> tuple[ReadStep, ...]:
    """The steps that bring target plan `t` (made from the read version's marker) to `tso`:
    its row segments and ADD COLUMN DDL, or a refusal naming what stands in the way: any
    other DDL with a Delta change (a read does not replay it), a DDL that blocks the
    target, a load."""
    if t.refused is not None:
        raise UserError(f"as_of: target {t.name} cannot be read: {t.refused}")
    if t.load is not None:
        raise UserError(
            f"as_of: target {t.name} is not loaded from its export yet (hint: run first)"
        )
    if t.stop_ts is None or t.stop_ts < tso:
        why = t.blocked or "its source has nothing resolved up to it"
        raise UserError(f"as_of: target {t.name} cannot reach TSO {tso}: {why}")
    t = dataclasses.replace(t, stop_ts=tso, feature_parts=(), relayout=None)
    steps: list[Step] = list(target_steps(t, timeline))
    out: list[ReadStep] = []
    for s in steps:
        if isinstance(s, Rows):
            out.append(s)
        elif isinstance(s, Ddl):
            added = _added_columns(s.ddl)
            if added is not None:
                if added:
                    out.append(AddColumns(s.ddl.commit_ts, s.ddl.sql, added))
                continue
            raise UserError(
                f"as_of: target {t.name}: the DDL `{s.ddl.sql}` at commit_ts "
                f"{s.ddl.commit_ts} ({s.ddl.where}) lies between its newest version at or "
                f"before TSO {tso} (applied ts {t.marker.applied_ts}) and that TSO; a read "
                "replays ADD COLUMN only, not this schema change (hint: read at a TSO before "
                f"{s.ddl.commit_ts}, or after the next run has applied it)"
            )
        elif isinstance(s, Stop):
            raise UserError(
                f"as_of: target {t.name} is blocked at commit_ts {s.ddl.commit_ts} by DDL "
                f"`{s.ddl.sql}`: {s.ddl.reason}"
            )
        elif not isinstance(s, Features):
            raise UserError(f"as_of: target {t.name} cannot be read at TSO {tso}: step {s}")
    return _joined(out, t, timeline)


def _added_columns(d: TargetDdl) -> tuple[AddColumn, ...] | None:
    """The columns DDL `d` adds when adding columns is all its Delta commits do (enabling
    timestampNtz for one included); () when it changes nothing in Delta; None otherwise."""
    if all(p.op == OP_RECORD for p in d.parts):
        return ()
    if any(c.decision.action not in (APPLY, SKIP, NONE) for c in d.steps):
        return None
    changes = [c.change for c in d.steps if c.decision.action == APPLY]
    if not changes or not all(isinstance(c, AddColumn) for c in changes):
        return None
    if any(p.op not in (OP_SQL, OP_BACKFILL, OP_RECORD) for p in d.parts):
        return None
    return tuple(c for c in changes if isinstance(c, AddColumn))


def _joined(steps: list[ReadStep], t: TargetPlan, timeline: Timeline) -> tuple[ReadStep, ...]:
    """Adjacent row segments split only by DDL without a Delta change, as one (its schema
    spans and keys planned as any segment's)."""
    out: list[ReadStep] = []
    for r in steps:
        last = out[-1] if out else None
        # (a, d-1] and (d, b] around a DDL at d: no row change shares a DDL's commit_ts.
        if isinstance(r, Rows) and isinstance(last, Rows) and last.hi >= r.lo - 1:
            out[-1] = segment(t, timeline, last.lo, max(last.hi, r.hi))
        else:
            out.append(r)
    return tuple(out)


def staging_floor_check(target: str, source: str, applied_ts: int, floor: int, tso: int) -> None:
    """Refuse a read that needs staged changes trimmed away: those in (applied_ts, tso] of
    a version whose applied ts lies below `floor` (the highest commit_ts trimmed)."""
    if applied_ts < floor and tso > applied_ts:
        raise UserError(
            f"as_of: TSO {tso} ({wall_text(tso)}) is older than what is still readable for "
            f"target {target}: its newest version at or before it holds applied ts "
            f"{applied_ts}, and source {source}'s staged changes up to {floor} were trimmed "
            "(hint: read at a newer TSO, or keep more with `staging.retention`)"
        )


def retention_check(t: TargetPlan, tso: int, resolved: int | None, held: int | None) -> None:
    """Refuse a read of `t` at `tso` older than its `maintenance.retain` allows
    (`plan.maintenance.readable_from`: behind its source's resolved TSO, or back to the
    newest sync point `held`): VACUUM may have deleted what it needs."""
    start = readable_from(t.maintenance, resolved, held)
    if start is None or tso >= start:
        return
    m = t.maintenance
    raise UserError(
        f"as_of: TSO {tso} ({wall_text(tso)}) is older than target {t.name} can be read: "
        f"`maintenance.retain` is {render_ms(m.retain_ms)} ({m.retain_from}) behind source "
        f"{t.source}'s resolved TSO {resolved}, so it is readable from TSO {start} "
        f"({wall_text(start)}) (hint: read at a newer TSO or at the newest sync point, or "
        "keep more with `maintenance.retain`)"
    )


def no_version(target: str, tso: int, oldest: Version | None) -> UserError:
    """Why target `target`, whose upstream table existed at `tso` (`absent_at` said so),
    has no readable version at it."""
    if oldest is None:
        return UserError(f"as_of: target {target} has no Delta version yet (hint: run first)")
    held = oldest.marker.applied_ts if oldest.marker else None
    return UserError(
        f"as_of: TSO {tso} ({wall_text(tso)}) is older than every readable version of "
        f"target {target}, although its upstream table existed then: the oldest version "
        f"reachable, {oldest.version}, holds applied ts {held if held is not None else 'unknown'}"
        "; the versions before it are gone (Delta log entries expired, or files vacuumed), or "
        "the target started later (added to the project after that TSO, or loaded from an "
        "export at a later snapshot) (hint: read at a TSO at or after "
        f"{held if held is not None else 'its oldest version'}; to read further back, keep "
        "more with `delta.logRetentionDuration` and `delta.deletedFileRetentionDuration`)"
    )


# --------------------------------------------------------------------------- status


def newest_readable(
    resolved: Mapping[str, int | None],
    targets: Iterable[TargetPlan],
    timelines: Mapping[str, Timeline],
) -> tuple[int | None, str]:
    """The newest TSO a read as of one TSO over every target can reach now, and what holds it
    there: the lowest resolved TSO of the sources (`resolved`), or just before the first TSO
    at which a target it must read cannot be read: a DDL with a Delta change the target has
    not applied yet (a read does not replay it), or the DDL that brings the table of a target
    not created yet. A target absent at a TSO (`absent_at`, over its source's timeline in
    `timelines`) is left out of a read there, so it holds nothing there."""
    if not resolved:
        return None, "no source"
    for name, ts in sorted(resolved.items()):
        if ts is None or ts < 0:
            return None, f"source {name} has nothing resolved"
    name, lowest = min(sorted(resolved.items()), key=lambda kv: kv[1] or 0)
    low = int(lowest or 0)
    chosen = list(targets)
    empty = Timeline()

    def timeline(t: TargetPlan) -> Timeline:
        return timelines.get(t.source, empty)

    # What a read can do changes only at a DDL a target has not applied (one that brings the
    # table of a target not created yet among them): the candidates are the lowest resolved
    # TSO and just before each of them, newest first.
    cuts = {low} | {d.commit_ts - 1 for t in chosen for d in t.pending}
    holds = [_Holds(t, timeline(t)) for t in chosen]
    why = f"source {name}'s resolved TSO"
    for tso in sorted((c for c in cuts if 0 <= c <= low), reverse=True):
        held = next((h for x in holds if (h := x.at(tso)) is not None), None)
        if held is None:
            return tso, why
        why = held  # what holds the read back from every TSO above the next one tried
    return None, why


class _Holds:
    """`_holds` of one target at any TSO, asked once per stretch between the DDL that can
    change it (its pending DDL, its tables coming or going): status over hundreds of targets
    not created yet tries as many TSOs."""

    def __init__(self, t: TargetPlan, timeline: Timeline) -> None:
        self.t, self.timeline = t, timeline
        points = {d.commit_ts for d in t.pending}
        for db, tbl in t.upstreams:
            points |= {x.commit_ts for x in timeline.existence(db, tbl)}
        self.points = sorted(points)
        self.known: dict[int, str | None] = {}

    def at(self, tso: int) -> str | None:
        stretch = bisect.bisect_right(self.points, tso)
        if stretch not in self.known:
            self.known[stretch] = _holds(self.t, self.timeline, tso)
        return self.known[stretch]


def _holds(t: TargetPlan, timeline: Timeline, tso: int) -> str | None:
    """Why a read at `tso` cannot show target `t`, or None (it can, or leaves it out)."""
    if absent_at(t, timeline, tso) is not None:
        return None
    if not t.exists:
        return f"target {t.name}: not created yet (a run creates it)"
    for d in t.pending:
        if d.commit_ts <= tso and any(p.op != OP_RECORD for p in d.parts):
            return f"target {t.name}: DDL at commit_ts {d.commit_ts} not applied yet"
    return None
