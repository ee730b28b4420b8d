"""A run on a machine whose zone is not UTC (TZ=Asia/Shanghai, where many TiDB clusters
run): its driver JVM runs in UTC, so a commit to a small table costs the jobs it costs under
UTC (Delta verifies a small table's file list at every commit when the JVM's zone is not
UTC), and the target is exact."""

from __future__ import annotations

import json
import os
import sys

import pytest
from deltalake import DeltaTable

from tests.runtime.helpers import ROWS, canal_project, child_env, cli, run_child

pytestmark = pytest.mark.slow

ZONE = "Asia/Shanghai"

# In a child (its own JVM, started under the zone given): the JVM's default zone and the
# Spark jobs each of a few INSERTs into a small Delta table runs, in ticdc-sync's session.
PROBE = """
import json, sys, tempfile
from ticdc_sync.spark.runtime.session import build_session
spark = build_session(None, kafka=False, extra_conf={
    "spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})
sc = spark.sparkContext
path = tempfile.mkdtemp() + "/t"
spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta")
jobs = []
for i in range(4):
    sc.setJobGroup(f"g{i}", f"g{i}")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ({i})")
    jobs.append(len(sc.statusTracker().getJobIdsForGroup(f"g{i}")))
zone = spark._jvm.java.util.TimeZone.getDefault().getID()
print(json.dumps({"zone": zone, "jobs": jobs}))
spark.stop()
"""


def _opts(zone: str | None = None) -> str:
    """The test session's options for short-lived JVMs (tests/conftest.py: quicker to start,
    the same execution), without a zone of the developer's own, plus `zone` if given."""
    kept = [o for o in os.environ.get("SPARK_SUBMIT_OPTS", "").split() if "user.timezone" not in o]
    return " ".join([*kept, *([f"-Duser.timezone={zone}"] if zone else [])])


def _probe(**env: str | None) -> dict:
    proc = run_child([sys.executable, "-c", PROBE], env=child_env(**env))
    assert proc.returncode == 0
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_commit_costs_the_same_jobs_outside_utc():
    shanghai = _probe(TZ=ZONE, SPARK_SUBMIT_OPTS=_opts())
    utc = _probe(TZ="UTC", SPARK_SUBMIT_OPTS=_opts())
    assert shanghai["zone"] == "UTC"
    # The first INSERT creates the table's first data file; compare the steady ones.
    assert shanghai["jobs"][1:] == utc["jobs"][1:] == [1, 1, 1]


def test_a_zone_given_to_the_jvm_is_kept():
    given = _probe(TZ="UTC", SPARK_SUBMIT_OPTS=_opts(ZONE))
    assert given["zone"] == ZONE


def test_a_target_is_exact_under_a_non_utc_zone(tmp_path):
    root = canal_project(tmp_path / "p")
    proc = run_child(cli("run", "--project", str(root)), env=child_env(TZ=ZONE), cwd=root)
    assert proc.returncode == 0
    rows = DeltaTable(str(root / "warehouse" / "tables" / "t")).to_pyarrow_table(
        columns=["id", "v"]
    )
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == ROWS
