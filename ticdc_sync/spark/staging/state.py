"""The state tables of one warehouse, opened together: staging, quarantine, schema history.

Project state lives in Delta tables under `<warehouse>/_ticdc_sync/` (`staging`,
`quarantine`, `schema_history`); a target's progress is the marker in its own commits
(`delta_log`). This module only opens them; each table's module says what it holds.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from ticdc_sync.spark.staging.quarantine import Quarantine
from ticdc_sync.spark.staging.schema_history import SchemaHistory
from ticdc_sync.spark.staging.table import Staging


class State:
    """The state tables of the warehouse at `warehouse`: staging created if missing, the
    quarantine and the schema history at their first use."""

    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.staging = Staging(spark, warehouse)
        self.quarantine = Quarantine(spark, self.staging)
        self.history = SchemaHistory(spark, warehouse)
