"""`python -m ticdc_sync.spark --fetch DIR` fills a jar folder a run can use alone.

The folder is filled from the Ivy cache (warm or not, TICDC_SYNC_JARS_DIR unset), then a
new process starts a session with only that folder (TICDC_SYNC_JARS_DIR, no Maven
resolution), writes and reads a Delta table and loads the Kafka source and the Kafka
token-provider classes.
"""

from __future__ import annotations

import sys

import pytest

from tests.runtime.helpers import child_env, run_child
from ticdc_sync.spark.runtime.session import DELTA_PACKAGE, KAFKA_PACKAGE, TOKEN_PROVIDER

pytestmark = pytest.mark.spark

USE_FOLDER = """
import sys
from ticdc_sync.spark.runtime.session import build_session

spark = build_session(None, kafka=True, extra_conf={
    "spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})
assert "spark.jars.packages" not in dict(spark.sparkContext.getConf().getAll())
path = sys.argv[1]
spark.range(3).selectExpr("id", "cast(id AS string) AS v").write.format("delta").save(path)
print("delta rows:", sorted(r.id for r in spark.read.format("delta").load(path).collect()))
jvm = spark._jvm
source = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
    "kafka", spark._jsparkSession.sessionState().conf())
print("kafka source:", source.getName())
token = jvm.org.apache.spark.util.Utils.classForName(
    "org.apache.spark.kafka010.KafkaTokenUtil", True, False)
print("token provider:", token.getName())
spark.stop()
"""


def test_fetched_folder_is_enough_for_a_session(tmp_path):
    jars = tmp_path / "jars"
    fetch = run_child(
        [sys.executable, "-m", "ticdc_sync.spark", "--fetch", str(jars)],
        env=child_env(TICDC_SYNC_JARS_DIR=None),
    )
    assert fetch.returncode == 0
    names = sorted(p.name for p in jars.glob("*.jar"))
    for coord in (DELTA_PACKAGE, KAFKA_PACKAGE):
        group, artifact, version = coord.split(":")
        assert f"{group}_{artifact}-{version}.jar" in names, names
    assert f"{TOKEN_PROVIDER[1]}-{TOKEN_PROVIDER[2]}.jar" in names, names
    assert fetch.stdout.split() == [str(jars / n) for n in names]

    use = run_child(
        [sys.executable, "-c", USE_FOLDER, str(tmp_path / "delta")],
        env=child_env(TICDC_SYNC_JARS_DIR=str(jars)),
    )
    assert use.returncode == 0, use.stderr[-3000:]
    assert "delta rows: [0, 1, 2]" in use.stdout
    assert "kafka source: org.apache.spark.sql.kafka010.KafkaSourceProvider" in use.stdout
    assert "token provider: org.apache.spark.kafka010.KafkaTokenUtil" in use.stdout
