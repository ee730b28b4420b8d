"""Upstream DDL: grammar, statements, schema evolution and the Delta changes.

Modules, from text to Delta:
- `tokens`: DDL text into tokens and statements, and the parser cursor (sqlglot's tokenizer).
- `columns`, `create_table`, `grammar`: the grammar; `statements`: what it produces.
- `protocol`: one DDL message, cross-checked with its protocol's hint (`parse_ddl`).
- `schema_files`: `schema/*.sql` seeds; `debezium`: Debezium table descriptions.
- `evolution`: a statement applied to an upstream schema, and the `changes` it causes.
- `partitioning`, `partition_expr`, `partition_rows`: a table's PARTITION BY, kept in the
  schema history, and the rows a partition holds (for TRUNCATE/DROP/EXCHANGE PARTITION).
- `delta_sql`: each change as Spark SQL text.

The names below are the public API; the rest of the project imports from here. Pure Python;
never imports pyspark.
"""

from ticdc_sync.ddl.changes import (
    AddColumn,
    ChangeColumnType,
    ChangeKey,
    CreateTarget,
    DeletePartitionRows,
    DeltaChange,
    DropColumn,
    DropTarget,
    ExchangePartition,
    MoveColumn,
    NoOp,
    RenameColumn,
    RenameTarget,
    SetDefault,
    TruncateTarget,
    Unsupported,
)
from ticdc_sync.ddl.debezium import schema_from_debezium_table
from ticdc_sync.ddl.defaults import backfill_sql
from ticdc_sync.ddl.delta_sql import delta_sql
from ticdc_sync.ddl.evolution import apply_statement, diff_schemas
from ticdc_sync.ddl.protocol import CANAL_DDL_TYPES, open_protocol_action, parse_ddl
from ticdc_sync.ddl.schema_files import parse_schema_sql

__all__ = [
    "CANAL_DDL_TYPES",
    "AddColumn",
    "ChangeColumnType",
    "ChangeKey",
    "CreateTarget",
    "DeletePartitionRows",
    "DeltaChange",
    "DropColumn",
    "DropTarget",
    "ExchangePartition",
    "MoveColumn",
    "NoOp",
    "RenameColumn",
    "RenameTarget",
    "SetDefault",
    "TruncateTarget",
    "Unsupported",
    "apply_statement",
    "backfill_sql",
    "delta_sql",
    "diff_schemas",
    "open_protocol_action",
    "parse_ddl",
    "parse_schema_sql",
    "schema_from_debezium_table",
]
