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

Pure: no I/O and no pyspark. `snapshot` reads the warehouse for it, `spark.as_of` reads rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Mode
from ticdc_sync.core.window import Marker
from ticdc_sync.ddl.changes import AddColumn
from ticdc_sync.ddl.timeline import Timeline
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
    t = dataclasses.replace(t, stop_ts=tso, feature_parts=())
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


def mode_check(t: TargetPlan, tso: int) -> None:
    """A read merges staged changes as a mirror's MERGE does: a soft_delete or history
    target is read only at a version that holds TSO `tso` exactly."""
    if t.mode is not Mode.MIRROR:
        raise UserError(
            f"as_of: target {t.name} is a {t.mode.value} target with staged changes between "
            f"its newest version at or before TSO {tso} and that TSO; a read merges staged "
            "changes for mirror targets only (hint: read it after the next run, or query its "
            "newest version with the filters in docs/history.md)"
        )


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


def no_version(target: str, tso: int, oldest: Version | None) -> UserError:
    """Why target `target` has no readable version at `tso`."""
    if oldest is None:
        return UserError(f"as_of: target {target} has no Delta version yet (hint: run first)")
    return UserError(
        f"as_of: TSO {tso} ({wall_text(tso)}) is older than every readable version of "
        f"target {target} (the oldest one reachable, {oldest.version}, holds applied ts "
        f"{oldest.marker.applied_ts if oldest.marker else 'unknown'}; older log entries or "
        "files are gone, or the target did not exist yet) (hint: read at a newer TSO)"
    )


# --------------------------------------------------------------------------- status


def newest_readable(
    resolved: Mapping[str, int | None], targets: Iterable[TargetPlan]
) -> tuple[int | None, str]:
    """The newest TSO a read as of one TSO over every target can reach now, and what holds it
    there: the lowest resolved TSO of the sources (`resolved`), or just before a DDL with a
    Delta change that a target has not applied yet (a read does not replay it)."""
    if not resolved:
        return None, "no source"
    for name, ts in sorted(resolved.items()):
        if ts is None or ts < 0:
            return None, f"source {name} has nothing resolved"
    name, low = min(sorted(resolved.items()), key=lambda kv: kv[1] or 0)
    best, why = int(low or 0), f"source {name}'s resolved TSO"
    for t in targets:
        if not t.exists:
            continue
        for d in t.pending:
            if d.commit_ts - 1 < best and any(p.op != OP_RECORD for p in d.parts):
                best = d.commit_ts - 1
                why = f"target {t.name}: DDL at commit_ts {d.commit_ts} not applied yet"
    return best, why
