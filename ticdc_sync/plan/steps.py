"""One target's run as steps: create, load, row segments split at its DDL, the DDL, or a stop
(a target that cannot start at all: one `Halt`).

Rows before a DDL are merged with the old schema, then the DDL, then the rows after it
(DESIGN.md §2); a blocked DDL ends the steps just before it. Purely additive DDL (ADD
COLUMN, no Delta change) moves ahead of the rows before it, so the segments on both sides
become one MERGE (`fuse_additive`). Each row segment carries everything its MERGE acts on:
per upstream table the schema in force over each commit_ts span (and the backfill of a
column added later in a fused segment), and the merge keys (`routing.merge_keys`), so a
key-changing DDL inside a window gives two segments with their own keys. The engine runs
these steps as they are and decides none of this again. Pure: made from the plan and the
DDL timeline only, never from rows.
"""

from __future__ import annotations

from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl.defaults import backfill_sql
from ticdc_sync.ddl.timeline import Timeline
from ticdc_sync.plan.model import (
    BLOCKED,
    READY,
    Create,
    Ddl,
    Features,
    Halt,
    LoadRows,
    Properties,
    Rows,
    RowTable,
    SchemaSpan,
    Step,
    Stop,
    TargetDdl,
    TargetPlan,
)
from ticdc_sync.plan.write_path import with_writes
from ticdc_sync.project import routing


def target_steps(
    t: TargetPlan, timeline: Timeline, properties: Properties = ()
) -> tuple[Step, ...]:
    """The steps that bring target `t` from its marker to its `stop_ts`; `properties`: the
    TBLPROPERTIES it is created with."""
    steps = _steps(t, properties)
    return with_writes(
        t,
        [
            segment(t, timeline, s.lo, s.hi) if isinstance(s, Rows) else s
            for s in fuse_additive(steps)
        ],
    )


def _steps(t: TargetPlan, properties: Properties) -> list[Step]:
    if t.refused is not None:
        return [Halt(t.refused)]
    steps: list[Step] = []
    if t.create is not None:
        steps.append(Create(t.create, properties, t.partition_by, t.cluster_by))
    if t.feature_parts:
        # First, between MERGEs like any DDL: a dropped feature rewrites files (DESIGN §3).
        steps.append(Features(t.feature_parts))
    if t.relayout is not None:
        steps.append(t.relayout)
    if t.reprops is not None:
        steps.append(t.reprops)
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
            return steps
        if d.status != READY or d.commit_ts > t.stop_ts:
            continue
        if d.commit_ts - 1 > lo:
            steps.append(Rows(lo, d.commit_ts - 1))
            lo = d.commit_ts - 1
        steps.append(Ddl(d))
        lo = max(lo, d.commit_ts)
    if t.stop_ts > lo:
        steps.append(Rows(lo, t.stop_ts))
    return steps


def segment(t: TargetPlan, timeline: Timeline, lo: int, hi: int) -> Rows:
    """The row segment (lo, hi] of target `t`: each upstream table's schema spans, and the
    merge keys from the schema in force at its end (the same for every span of it: a DDL
    that changes the key is never fused into a segment, `plan.target_ddl`)."""
    tables: list[RowTable] = []
    keys: tuple[str, ...] | None = None
    keys_from = "none"
    error: str | None = None
    entry = t.entry
    for db, tbl in t.upstreams:
        cut = timeline.spans(db, tbl, lo, hi)
        schema = cut[-1][2] or next((s for *_, s in reversed(cut) if s is not None), None)
        if schema is None:
            continue  # no schema known: the table has no rows to type yet
        tkeys, tfrom = routing.merge_keys(entry, schema)
        if not tkeys:
            error = error or routing.no_keys_message(entry, t.name, schema)
        elif keys is None:
            keys, keys_from = tuple(tkeys), tfrom
        elif tuple(k.lower() for k in tkeys) != tuple(k.lower() for k in keys):
            error = error or (
                f"{entry.origin.render()}: shards of target {t.name} have different keys "
                f"({', '.join(keys)} vs {', '.join(tkeys)} in {schema.qualified}) (hint: set "
                "`keys:` on the table entry)"
            )
        spans = tuple(
            SchemaSpan(s_lo, s_hi, s, added_later(s, [x for *_, x in cut[i + 1 :]]))
            for i, (s_lo, s_hi, s) in enumerate(cut)
            if s is not None
        )
        for span in spans:
            missing = next((k for k in tkeys if span.schema.column(k) is None), None)
            if missing is not None:
                error = error or (
                    f"{entry.origin.render()}: key column {missing} is not a column of "
                    f"{span.schema.qualified} (hint: fix `keys:` for target {t.name})"
                )
        tables.append(RowTable(db, tbl, spans))
    return Rows(lo, hi, keys or (), keys_from, tuple(tables), error)


def added_later(schema: TableSchema, later: list[TableSchema | None]) -> Properties:
    """Backfill literals (lowercased name -> SQL) of the columns that a later schema in a
    fused segment adds to `schema`, from the version that adds each (`ddl.backfill_sql`)."""
    fill: dict[str, str] = {}
    for version in later:
        if version is None:
            continue
        for col in version.columns:
            key = col.name.lower()
            if key in fill or schema.column(col.name) is not None:
                continue
            value = backfill_sql(col)
            fill[key] = value if value is not None else "NULL"
    return tuple(fill.items())


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
