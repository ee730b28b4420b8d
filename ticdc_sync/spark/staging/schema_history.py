"""The schema history table `<warehouse>/_ticdc_sync/schema_history`: one row per upstream table
version (source, db, table, commit_ts, the DDL, the schema as JSON).

Written when a DDL is applied, before its Delta statements (a resumed run recomputes the same
statements from the version before it); read whole (it is small). Decides nothing.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from ticdc_sync.spark.runtime.conf import before_commit
from ticdc_sync.spark.staging.state_table import LazyTable
from ticdc_sync.warehouse.locations import state_location

SCHEMA_HISTORY_SCHEMA = (
    "db STRING, tbl STRING, commit_ts BIGINT, ddl STRING, schema_json STRING, `source` STRING"
)


class SchemaHistory:
    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        # Created by the first DDL or load it records: readers take a missing table as an
        # empty history (`warehouse.read_state`).
        self._table = LazyTable(
            spark, state_location(warehouse, "schema_history"), SCHEMA_HISTORY_SCHEMA
        )

    @property
    def path(self) -> str:
        """The table's location, the table created on first use."""
        return self._table.path()

    def append(self, rows: list[tuple[str, str, int, str, str, str]]) -> None:
        """Append versions: (db, table, commit_ts, ddl, schema JSON, source) each, in one
        commit. The history is read without a JVM (`warehouse.read_state`)."""
        before_commit("schema_history.append")
        self.spark.createDataFrame(rows, SCHEMA_HISTORY_SCHEMA).write.format("delta").mode(
            "append"
        ).save(self.path)
