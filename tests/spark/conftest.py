"""One local[2] SparkSession shared by every Spark test (small shuffles, UI off, no code
generation)."""

from __future__ import annotations

import os
import time

import pytest

# PySpark turns TIMESTAMP values into naive datetimes in the process's local zone:
# pin it so expected values are UTC wall clock on every machine.
os.environ["TZ"] = "UTC"
time.tzset()

from ticdc_sync.spark.runtime.session import build_session  # noqa: E402 (after the TZ pin)


@pytest.fixture(scope="session")
def spark():
    # This JVM takes the short-lived drivers' options too (tests/conftest.py), though it
    # lives for the whole run: its queries, each of a new shape on a few rows, kept the full
    # compiler (C2) busy compiling Spark's interpreted paths, about half of the JVM's CPU,
    # for little gain. C1 alone measured a third less CPU over files of Spark tests, and the
    # suite is bound by CPU (two workers on two cores).
    session = _build()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _build():
    return build_session(
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
            # Tests run thousands of small queries of ever-changing shapes (a schema per
            # test), each on a few rows: compiling the generated Java code of every query
            # (Janino) costs more than running it, about a fifth of the shared session's
            # CPU. Spark's interpreted execution gives the same results (its own suites
            # run both). The process-level tests (`ticdc-sync run` as a subprocess: the
            # crash, Kafka, S3, cluster and runtime tests) keep ticdc-sync's defaults.
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        },
    )
