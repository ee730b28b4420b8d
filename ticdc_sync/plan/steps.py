"""One target's run as steps: create, load, row segments split at its DDL, the DDL, or a stop
(a target that cannot start at all: one `Halt`).

Rows before a DDL are merged with the old schema, then the DDL, then the rows after it
(DESIGN.md §2); a blocked DDL ends the steps just before it. Purely additive DDL (ADD
COLUMN, no Delta change) moves ahead of the rows before it, so the segments on both sides
become one MERGE (`fuse_additive`). Pure: made from the plan only, never from rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.plan.model import BLOCKED, READY, DeltaPart, Load, TargetDdl, TargetPlan
from ticdc_sync.upstream import TableSchema


@dataclass(frozen=True, slots=True)
class Create:
    """Create the target from a known schema (seed, history, inferred)."""

    schema: TableSchema


@dataclass(frozen=True, slots=True)
class Features:
    """Bring an existing target's table features to its `table_features` setting (DROP
    FEATURE, or enable deletion vectors again): commits that keep the marker as it is."""

    parts: tuple[DeltaPart, ...]


@dataclass(frozen=True)
class LoadRows:
    """Load the target from a Dumpling export (`Load`): one commit, at its snapshot TSO."""

    load: Load


@dataclass(frozen=True, slots=True)
class Rows:
    """Apply the row changes with lo < commit_ts <= hi in one MERGE."""

    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class Ddl:
    """Apply one DDL. `ahead`: moved before the rows that precede it (`fuse_additive`); its
    commits then keep the marker's applied_ts, since those rows are not in the table yet."""

    ddl: TargetDdl
    ahead: bool = False

    @property
    def commit_ts(self) -> int:
        return self.ddl.commit_ts


@dataclass(frozen=True, slots=True)
class Stop:
    """The target is blocked at this DDL."""

    ddl: TargetDdl


@dataclass(frozen=True, slots=True)
class Halt:
    """The target cannot start at all (`TargetPlan.refused`): nothing is created, loaded
    or applied, and the run fails it with `reason`."""

    reason: str


Step = Create | Features | LoadRows | Rows | Ddl | Stop | Halt


def end_ts(step: Step) -> int:
    """The commit_ts a step brings its target to (-1 for a creation)."""
    if isinstance(step, Rows):
        return step.hi
    if isinstance(step, LoadRows):
        return step.load.snapshot_ts
    if isinstance(step, (Ddl, Stop)):
        return step.ddl.commit_ts
    return -1  # Create, Features, Halt: before anything else


def target_steps(t: TargetPlan) -> list[Step]:
    """The steps that bring target `t` from its marker to its `stop_ts`."""
    if t.refused is not None:
        return [Halt(t.refused)]
    steps: list[Step] = []
    if t.create is not None:
        steps.append(Create(t.create))
    if t.feature_parts:
        # First, between MERGEs like any DDL: a dropped feature rewrites files (DESIGN §3).
        steps.append(Features(t.feature_parts))
    if t.load is not None:
        steps.append(LoadRows(t.load))
    if t.stop_ts is None:
        return steps
    lo = t.start.applied_ts
    for d in t.ddl:
        if d.status == BLOCKED and d.commit_ts - 1 <= t.stop_ts:
            if d.commit_ts - 1 > lo:
                steps.append(Rows(lo, d.commit_ts - 1))
            steps.append(Stop(d))
            return fuse_additive(steps)
        if d.status != READY or d.commit_ts > t.stop_ts:
            continue
        if d.commit_ts - 1 > lo:
            steps.append(Rows(lo, d.commit_ts - 1))
            lo = d.commit_ts - 1
        steps.append(Ddl(d))
        lo = max(lo, d.commit_ts)
    if t.stop_ts > lo:
        steps.append(Rows(lo, t.stop_ts))
    return fuse_additive(steps)


def fuse_additive(steps: list[Step]) -> list[Step]:
    """Fewer MERGEs: move each purely additive DDL (`TargetDdl.additive`: ADD COLUMN or no
    Delta change) ahead of the row segment before it, so the segments on both sides become
    one.

    The merged segment types each row with the schema in force at its commit_ts and gives
    an added column, for rows older than the ADD, the value the ADD's backfill would have
    written; the result is the table the unfused steps produce. A moved DDL commits with
    the old `applied_ts`, so a run killed between it and the MERGE redoes the whole segment.
    Any other DDL stays a barrier between segments.
    """
    out: list[Step] = []
    pending: Rows | None = None
    moved: list[TargetDdl] = []  # additive DDL after the start of `pending`

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        # Only a DDL that rows after it join ahead of: a segment that ends before the
        # DDL (the stop is at its commit_ts, or a barrier follows) is typed without it,
        # so its rows would miss the ADD's backfill; the DDL then stays after them.
        hi = pending.hi
        out.extend(Ddl(d, ahead=True) for d in moved if d.commit_ts <= hi)
        out.append(pending)
        out.extend(Ddl(d) for d in moved if d.commit_ts > hi)
        pending = None
        moved.clear()

    for step in steps:
        if isinstance(step, Rows):
            pending = step if pending is None else Rows(pending.lo, step.hi)
        elif pending is not None and isinstance(step, Ddl) and step.ddl.additive:
            moved.append(step.ddl)
        else:
            flush()
            out.append(step)
    flush()
    return out
