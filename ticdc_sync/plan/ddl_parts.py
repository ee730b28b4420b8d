"""The Delta commits ("parts") that carry out one decided DDL change on a target: SQL,
rebuilds, creates, renames in and out, and the record of the DDL.

Decides nothing: the decision is given (`plan.policy`). Part lists must stay stable for a
given decision (a half-applied DDL resumes by part number). Never runs SQL.
"""

from __future__ import annotations

from ticdc_sync.core.sqlgen import sql_string
from ticdc_sync.ddl import changes as ch
from ticdc_sync.ddl.delta_sql import delta_sql
from ticdc_sync.ddl.timeline import DdlGroup, TableEffect
from ticdc_sync.plan import policy
from ticdc_sync.plan import table_features as tf
from ticdc_sync.plan.model import (
    OP_BACKFILL,
    OP_COPY_FROM,
    OP_CREATE,
    OP_REBUILD,
    OP_RECORD,
    OP_SQL,
    DeltaPart,
)

# The property a commit that only records a DDL sets (its marker is what counts).
LAST_DDL_TS = "ticdc_sync.last_ddl_ts"


def record_part(ref: str, ts: int) -> DeltaPart:
    return DeltaPart(
        "record the DDL",
        OP_RECORD,
        f"ALTER TABLE {ref} SET TBLPROPERTIES ('{LAST_DDL_TS}' = {sql_string(str(ts))})",
        properties=((LAST_DDL_TS, str(ts)),),
    )


def _rebuild(change: ch.DeltaChange, what: str, ref: str) -> list[DeltaPart]:
    """The table rewritten with the change, in one commit (no table feature needed)."""
    if isinstance(change, ch.ChangeColumnType):
        out = []
        if "TIMESTAMP_NTZ" in change.new_type.upper():
            # Delta wants this feature enabled by hand before such a column is written.
            out.append(
                DeltaPart(
                    "enable table feature timestampNtz",
                    OP_SQL,
                    f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')",
                )
            )
        return [*out, DeltaPart(what, OP_REBUILD, column=change.name, new_type=change.new_type)]
    if isinstance(change, ch.RenameColumn):
        return [DeltaPart(what, OP_REBUILD, column=change.old, new_name=change.new)]
    if isinstance(change, ch.DropColumn):
        return [DeltaPart(what, OP_REBUILD, column=change.name, drop_column=True)]
    raise AssertionError(f"no rebuild for {change!r}")  # policy.decide never asks for one


def change_parts(change: ch.DeltaChange, decision: policy.Decision, ref: str) -> list[DeltaPart]:
    """The Delta commits that carry out one decided change on the target `ref`."""
    what = decision.describe
    if decision.action in (policy.SKIP, policy.NONE, policy.BLOCK):
        return []
    if decision.action == policy.REBUILD:
        return _rebuild(change, what, ref)
    if isinstance(change, ch.CreateTarget):
        return [DeltaPart(what, OP_CREATE, schema=change.schema)]
    if isinstance(change, ch.DropTarget):
        # Rows go; the Delta table and its history stay (time travel; crash-safe).
        return [
            DeltaPart(what, OP_SQL, f"DELETE FROM {ref}"),
            DeltaPart(
                "mark dropped",
                OP_SQL,
                f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.dropped' = 'true')",
            ),
        ]
    statements = delta_sql(change, ref)
    out: list[DeltaPart] = []
    if decision.feature is not None:
        # Always planned, enabled or not, so that part numbers stay stable on resume; it is
        # idempotent. Its own commit, like every part, so a crash after it resumes with
        # the change.
        out.append(
            DeltaPart(
                f"enable table feature {decision.feature}",
                OP_SQL,
                tf.enable_sql(decision.feature, ref),
                feature=decision.feature,
            )
        )
    tolerate: tuple[str, ...] = ()
    if isinstance(change, ch.AddColumn):
        tolerate = ("already exists", "FIELDS_ALREADY_EXISTS")
    elif isinstance(change, ch.DropColumn):
        tolerate = ("does not exist", "cannot be resolved", "FIELD_NOT_FOUND", "Cannot drop")
    for i, sql in enumerate(statements):
        backfill = (
            isinstance(change, ch.AddColumn)
            and change.backfill_sql is not None
            and i == len(statements) - 1
        )
        if backfill:
            out.append(DeltaPart(what, OP_BACKFILL, sql))
        elif "timestampNtz" in sql:
            out.append(DeltaPart("enable table feature timestampNtz", OP_SQL, sql))
        else:
            added = change if isinstance(change, ch.AddColumn) and " ADD COLUMNS (" in sql else None
            out.append(DeltaPart(what, OP_SQL, sql, tolerate=tolerate, added=added))
    return out


def rename_in(
    decision: policy.Decision, e: TableEffect, old_target: str | None, ref: str, g: DdlGroup
) -> tuple[DeltaPart, ...]:
    """RENAME onto this target's upstream table from another target's: created from the
    renamed schema, then that target's rows as of just before the rename are copied in."""
    if decision.action != policy.APPLY or e.after is None:
        return ()
    assert e.old is not None
    parts = [
        DeltaPart(f"create target for renamed {e.old[0]}.{e.old[1]}", OP_CREATE, schema=e.after)
    ]
    if old_target:
        parts.append(
            DeltaPart(
                f"copy the rows of target {old_target} as of commit_ts {g.commit_ts - 1}",
                OP_COPY_FROM,
                source_target=old_target,
            )
        )
    parts.append(
        DeltaPart(
            "mark renamed",
            OP_SQL,
            f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.renamed_from' = "
            f"{sql_string(old_target or f'{e.old[0]}.{e.old[1]}')})",
        )
    )
    return tuple(parts)


def rename_out(decision: policy.Decision, renamed_to: str, ref: str) -> tuple[DeltaPart, ...]:
    """This target's upstream table was renamed to another target's (or to a table no entry
    routes): its rows leave with it."""
    if decision.action != policy.APPLY:
        return ()
    return (
        DeltaPart(f"rows moved to {renamed_to}", OP_SQL, f"DELETE FROM {ref}"),
        DeltaPart(
            "mark renamed",
            OP_SQL,
            f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.renamed_to' = "
            f"{sql_string(renamed_to)})",
        ),
    )


# --------------------------------------------------------------------------- project parts
