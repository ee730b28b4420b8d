"""The schema history table `<warehouse>/_ticdc_sync/schema_history`: one row per upstream table
version (source, db, table, commit_ts, the DDL, the schema as JSON).

Written when a DDL is applied, before its Delta statements (a resumed run recomputes the same
statements from the version before it); read whole (it is small). Decides nothing.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from ticdc_sync.locations import state_location
from ticdc_sync.spark.staging import ensure_table
from ticdc_sync.upstream import TableSchema

SCHEMA_HISTORY_SCHEMA = (
    "db STRING, tbl STRING, commit_ts BIGINT, ddl STRING, schema_json STRING, `source` STRING"
)


class SchemaHistory:
    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        self.path = state_location(warehouse, "schema_history")
        ensure_table(spark, self.path, SCHEMA_HISTORY_SCHEMA)

    def schema_versions(self) -> dict[tuple[str, str], list[tuple[int, TableSchema]]]:
        rows = self.spark.read.format("delta").load(self.path).collect()
        out: dict[tuple[str, str], dict[int, TableSchema]] = {}
        for r in rows:
            out.setdefault((r["db"], r["tbl"]), {})[r["commit_ts"]] = TableSchema.from_json(
                r["schema_json"]
            )
        return {k: sorted(v.items()) for k, v in out.items()}

    def record_schema(self, source: str, schema: TableSchema, commit_ts: int, ddl: str) -> None:
        self.spark.createDataFrame(
            [(schema.db, schema.table, commit_ts, ddl, schema.to_json(), source)],
            SCHEMA_HISTORY_SCHEMA,
        ).write.format("delta").mode("append").save(self.path)
