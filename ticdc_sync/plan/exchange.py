"""EXCHANGE PARTITION on one target: which target the other side's rows come from, and the Delta
commits that swap them (docs/ddl.md, "EXCHANGE PARTITION").

Upstream, the partition's rows and the other table's rows trade places, with no row events.
Each side's target does its half at the DDL: its own leaving rows go (the partition's, or
every row of the other table), then the other side's target's rows as of just before the
DDL come in (Delta time travel, as a RENAME TABLE between targets copies them, so the order
in which the two targets apply the DDL does not matter). A side whose other table no entry
routes blocks: those rows are unknown here, and a target that went on would hold rows its
table no longer has. Decides and renders text only; never runs SQL.
"""

from __future__ import annotations

from dataclasses import replace

from ticdc_sync.core.model import Mode, Project
from ticdc_sync.core.sqlgen import COMMIT_TS, quote
from ticdc_sync.core.sqlgen_history import (
    DELETED_AT,
    DELETED_TS,
    IS_DELETED,
    VALID_FROM,
    VALID_FROM_AT,
    VALID_TO,
    VALID_TO_AT,
    truncate_sql,
    wall_time,
)
from ticdc_sync.ddl import changes as ch
from ticdc_sync.plan import policy
from ticdc_sync.plan.model import COPY_SOURCE, OP_COPY_FROM, OP_SQL, DeltaPart
from ticdc_sync.project import routing


def other_target(
    project: Project, source: str, target: str, change: ch.ExchangePartition, d: policy.Decision
) -> tuple[policy.Decision, str | None, Mode | None]:
    """The decision on this side, the target the other side's rows come from and its mode."""
    if d.action != policy.APPLY:
        return d, None, None
    other = f"{change.other[0]}.{change.other[1]}"
    r = routing.route(project, source, *change.other)
    if r is None:
        return (
            replace(
                d,
                action=policy.BLOCK,
                reason=f"{d.describe}: no table entry routes {other}, so the rows it trades "
                "are unknown here; going on would leave this target with rows its table no "
                "longer has",
                setting=f"a table entry that routes {other} (its staged changes then land in a "
                "target of their own, as long as `staging.retention` has kept them), or "
                "`partition: skip` on this entry to keep the target as it is",
            ),
            None,
            None,
        )
    if r.target == target:
        return (
            replace(
                d,
                action=policy.NONE,
                describe=f"{d.describe} (both tables land in this "
                "target: its rows stay as they are)",
            ),
            None,
            None,
        )
    return d, r.target, project.mode(r.entry)[0]


def exchange_parts(
    mode: Mode,
    ref: str,
    ts: int,
    change: ch.ExchangePartition,
    columns: tuple[str, ...],
    keys: tuple[str, ...],
    source_target: str,
    source_mode: Mode,
) -> list[DeltaPart]:
    """This side's two commits: its leaving rows go, then the other side's come in."""
    leaving = change.predicate if change.partitioned else None
    if mode is Mode.MIRROR:
        out_sql = f"DELETE FROM {ref}" + (f" WHERE {leaving}" if leaving else "")
    else:
        out_sql = truncate_sql(mode, ref, ts, leaving)
    what = (
        f"the rows of partition {change.partition} leave"
        if change.partitioned
        else "every row leaves (to the partition)"
    )
    coming = f"the rows of target {source_target} as of commit_ts {ts - 1}" + (
        f" in partition {change.partition}" if not change.partitioned else ""
    )
    return [
        DeltaPart(what, OP_SQL, out_sql),
        DeltaPart(
            f"{coming} come in",
            OP_COPY_FROM,
            _copy_in(mode, ref, ts, change, columns, keys, source_mode),
            source_target=source_target,
        ),
    ]


def _copy_in(
    mode: Mode,
    ref: str,
    ts: int,
    change: ch.ExchangePartition,
    columns: tuple[str, ...],
    keys: tuple[str, ...],
    source_mode: Mode,
) -> str:
    """The statement that brings the other side's live rows in, from `COPY_SOURCE` (the
    other target as of its version just before the DDL, put in by the engine)."""
    cols = [*columns, COMMIT_TS]
    where = [f"{quote(COMMIT_TS)} < {ts}"]
    if source_mode is Mode.SOFT_DELETE:
        where.append(f"NOT coalesce({quote(IS_DELETED)}, false)")
    elif source_mode is Mode.HISTORY:
        where.append(f"{quote(VALID_TO)} IS NULL")
    if not change.partitioned:
        where.append(f"({change.predicate})")
    select = ", ".join(quote(c) for c in cols)
    rows = f"SELECT {select} FROM {COPY_SOURCE} WHERE {' AND '.join(where)}"
    # The rows arrive live: a soft-delete row not deleted, a history version open from the
    # exchange on.
    extra: dict[str, str] = {}
    if mode is Mode.SOFT_DELETE:
        extra = {IS_DELETED: "false", DELETED_TS: "NULL", DELETED_AT: "NULL"}
    elif mode is Mode.HISTORY:
        extra = {
            VALID_FROM: str(ts),
            VALID_TO: "NULL",
            VALID_FROM_AT: wall_time(str(ts)),
            VALID_TO_AT: "NULL",
        }
    names = ", ".join(quote(c) for c in [*cols, *extra])
    if mode is Mode.HISTORY or not keys:
        vals = ", ".join([*(quote(c) for c in cols), *extra.values()])
        return f"INSERT INTO {ref} ({names}) SELECT {vals} FROM ({rows})"
    # A key the target still holds (a soft-deleted row, or a row the partition's validation
    # let through) takes the incoming row's values.
    on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
    sets = ", ".join(
        [
            *(f"t.{quote(c)} = s.{quote(c)}" for c in cols),
            *(f"t.{quote(k)} = {v}" for k, v in extra.items()),
        ]
    )
    vals = ", ".join([*(f"s.{quote(c)}" for c in cols), *extra.values()])
    return (
        f"MERGE INTO {ref} t USING ({rows}) s ON {on} "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({vals})"
    )
