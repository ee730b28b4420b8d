"""One local[2] SparkSession shared by every Spark test (small shuffles, UI off)."""

from __future__ import annotations

import os
import time

import pytest

# PySpark turns TIMESTAMP values into naive datetimes in the process's local zone:
# pin it so expected values are UTC wall clock on every machine.
os.environ["TZ"] = "UTC"
time.tzset()

from ticdc_sync.spark.session import build_session  # noqa: E402 (after the TZ pin)


@pytest.fixture(scope="session")
def spark():
    session = build_session(
        None,
        app_name="ticdc-sync-tests",
        kafka=True,
        extra_conf={
            "spark.master": "local[2]",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.databricks.delta.snapshotPartitions": "1",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "2g",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
