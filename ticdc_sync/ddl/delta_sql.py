"""Each Delta change as the Spark SQL the engine executes on a path-based Delta target.

Pure Python (text only); no pyspark. Shared by `plan` (shown for review) and the Spark side
(executed), so reviewers read what runs.
"""

from __future__ import annotations

from ticdc_sync.core.datatypes import delta_type
from ticdc_sync.core.sqlgen import create_table_sql, quote, sql_string
from ticdc_sync.ddl.changes import (
    AddColumn,
    ChangeColumnType,
    CreateTarget,
    DeletePartitionRows,
    DeltaChange,
    DropColumn,
    MoveColumn,
    RenameColumn,
    TruncateTarget,
)

# -- Spark SQL --------------------------------------------------------------------------------


# A TIMESTAMP_NTZ column added to an existing table needs Delta's `timestampNtz` table feature
# enabled by hand (DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT, seen in tests/spark). Idempotent.
_ENABLE_NTZ = "ALTER TABLE {ref} SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')"


def delta_sql(
    change: DeltaChange, ref: str, *, column_types: dict[str, str] | None = None
) -> list[str]:
    """The Spark SQL statements (Delta) that carry out one change on the target `ref`.

    `column_types` (target column name -> Delta type) is accepted for callers that track the
    target's current types; it is not needed by any change today. Changes that the engine
    carries out itself return []: DropTarget (the engine removes or keeps the table folder,
    per policy), RenameTarget (routing), ChangeKey (the MERGE key), SetDefault (every row the
    sink writes names every column, so a Delta default is never used), NoOp, Unsupported.
    """
    del column_types
    if isinstance(change, CreateTarget):
        cols = [(c.name, delta_type(c)) for c in change.schema.columns]
        return [create_table_sql(ref, cols, change.schema.comment)]
    if isinstance(change, AddColumn):
        col = f"{quote(change.name)} {change.delta_type}"
        if change.comment:
            col += f" COMMENT {sql_string(change.comment)}"
        if change.position is not None:
            col += " " + change.position.sql()
        stmts = []
        if "TIMESTAMP_NTZ" in change.delta_type:
            stmts.append(_ENABLE_NTZ.format(ref=ref))
        stmts.append(f"ALTER TABLE {ref} ADD COLUMNS ({col})")
        if change.backfill_sql is not None:
            stmts.append(f"UPDATE {ref} SET {quote(change.name)} = {change.backfill_sql}")
        return stmts
    if isinstance(change, DropColumn):
        return [f"ALTER TABLE {ref} DROP COLUMN {quote(change.name)}"]
    if isinstance(change, RenameColumn):
        return [f"ALTER TABLE {ref} RENAME COLUMN {quote(change.old)} TO {quote(change.new)}"]
    if isinstance(change, ChangeColumnType):
        if change.change == "widen":
            pre = [_ENABLE_NTZ.format(ref=ref)] if "TIMESTAMP_NTZ" in change.new_type else []
            return pre + [
                f"ALTER TABLE {ref} ALTER COLUMN {quote(change.name)} TYPE {change.new_type}"
            ]
        return []  # same: nothing; narrow: the engine's `rebuild` policy rewrites the table
    if isinstance(change, MoveColumn):
        return [f"ALTER TABLE {ref} ALTER COLUMN {quote(change.name)} {change.position.sql()}"]
    if isinstance(change, TruncateTarget):
        return [f"DELETE FROM {ref}"]
    if isinstance(change, DeletePartitionRows):
        # One statement: a run killed around it finds it committed with the DDL's marker, or
        # not at all (and repeats it: the same rows match).
        return [f"DELETE FROM {ref} WHERE {change.predicate}"]
    return []
