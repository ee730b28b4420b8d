"""What a target's mode (`mirror`, `soft_delete`, `history`) changes in its plan: its extra
columns, whether an existing table can be kept in it, and the DDL decisions that differ from
the mirror's (docs/ddl.md, a column per mode).

- soft_delete: a TRUNCATE marks every live row deleted at its commit_ts (a TRUNCATE/DROP
  PARTITION, the partition's).
- history: a TRUNCATE closes every open version at its commit_ts (a TRUNCATE/DROP
  PARTITION, the partition's); a DROP COLUMN keeps the
  column (old versions keep their values, newer ones hold NULL); an ADD COLUMN's default
  fills the versions open at it (as upstream, every row has it from then on), not the
  versions closed before it.

Pure: decides from the change and the decision `ddl.policy` made; never runs SQL.
"""

from __future__ import annotations

from dataclasses import replace

from ticdc_sync.core.model import Mode
from ticdc_sync.core.sqlgen import quote
from ticdc_sync.core.sqlgen_history import VALID_TO, mode_columns, mode_of_columns, truncate_sql
from ticdc_sync.ddl import changes as ch
from ticdc_sync.plan import policy
from ticdc_sync.plan.ddl_parts import change_parts
from ticdc_sync.plan.model import OP_BACKFILL, OP_SQL, DeltaPart


def extra_columns(mode: Mode) -> tuple[tuple[str, str], ...]:
    """The columns a target of `mode` has after `_commit_ts` (name, Delta type)."""
    return mode_columns(mode)


def mode_mismatch(mode: Mode, mode_from: str, columns: tuple[tuple[str, str], ...]) -> str | None:
    """Why an existing target (with `columns`) cannot be kept in `mode`, or None: a mode is
    chosen when the target is created (its columns and rows depend on it)."""
    have = mode_of_columns([n for n, _ in columns])
    if have is mode:
        return None
    return (
        f"the target was created in mode {have.value}, and its entry now says {mode.value} "
        f"({mode_from}): a target keeps the mode it was created with (hint: set `mode: "
        f"{have.value}` on the entry again, or route the table to a new target name for "
        f"{mode.value})"
    )


def mode_change(
    mode: Mode, change: ch.DeltaChange, decision: policy.Decision, ref: str, ts: int
) -> tuple[policy.Decision, list[DeltaPart]]:
    """The decision and Delta commits of `change` at commit_ts `ts` on a target of `mode`."""
    applies = decision.action in (policy.APPLY, policy.REBUILD)
    if mode is Mode.MIRROR or not applies:
        return decision, change_parts(change, decision, ref)
    if isinstance(change, ch.TruncateTarget):
        what = (
            f"truncate: mark every live row deleted at commit_ts {ts}"
            if mode is Mode.SOFT_DELETE
            else f"truncate: close every open version at commit_ts {ts}"
        )
        d = replace(decision, describe=what)
        return d, [DeltaPart(what, OP_SQL, truncate_sql(mode, ref, ts))]
    if isinstance(change, ch.DeletePartitionRows):
        names = ", ".join(change.partitions)
        what = (
            f"{change.action.lower()} partition {names}: mark its live rows deleted at commit_ts "
            f"{ts}, the rows where {change.predicate}"
            if mode is Mode.SOFT_DELETE
            else f"{change.action.lower()} partition {names}: close its open versions at "
            f"commit_ts {ts}, the rows where {change.predicate}"
        )
        d = replace(decision, describe=what)
        return d, [DeltaPart(what, OP_SQL, truncate_sql(mode, ref, ts, change.predicate))]
    if mode is not Mode.HISTORY:
        return decision, change_parts(change, decision, ref)
    if isinstance(change, ch.DropColumn):
        what = (
            f"drop column {change.name}: kept (a history table never forgets: older versions "
            "keep their values, newer versions hold NULL)"
        )
        return policy.Decision(
            policy.NONE, decision.kind, decision.classification, what, reason=None
        ), []
    if isinstance(change, ch.AddColumn) and change.backfill_sql is not None:
        # Upstream, every row has the default from the ADD on: so has each version open at
        # it (the row as of any later TSO); a version closed before it ended while the
        # column did not exist, and keeps NULL.
        what = (
            f"{change.describe()}; versions open at the ADD hold {change.backfill_sql}, "
            "versions closed before it hold NULL"
        )
        d = replace(decision, describe=what)
        parts = [
            replace(p, sql=f"{p.sql} WHERE {quote(VALID_TO)} IS NULL")
            if p.op == OP_BACKFILL and p.sql
            else p
            for p in change_parts(change, d, ref)
        ]
        return d, parts
    return decision, change_parts(change, decision, ref)


def keeps_fused_rows(mode: Mode, change: ch.DeltaChange) -> bool:
    """Whether rows before `change` may share a MERGE with rows after it in `mode`
    (`window.fuse_additive` types rows before an ADD COLUMN with its backfill, which a
    history target gives only the versions still open at the ADD)."""
    return not (mode is Mode.HISTORY and isinstance(change, ch.AddColumn) and change.backfill_sql)
