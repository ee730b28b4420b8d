"""A target's marker reaches the end of what it applied even when its segment has no rows,
and a target with nothing pending costs nothing yet is reported current.

Delta commits nothing for a MERGE or INSERT without rows; the marker of a target applied
with no (new) rows must still be committed, or `status` and readers see it behind though
the run reported it applied. A target with nothing pending at all is not applied (no
commit: many idle tables must cost nothing), and `status` says it is current as of the
resolved TSO all the same.
"""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.commands import status
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

SCHEMA = (
    "CREATE TABLE shop.busy (id INT PRIMARY KEY, v VARCHAR(10));\n"
    "CREATE TABLE shop.idle (id INT PRIMARY KEY, v VARCHAR(10));\n"
)
MT = {"id": "int", "v": "varchar"}


def applied(project) -> dict[str, int | None]:
    return {t["name"]: t["applied_ts"] for t in status.report(project)["targets"]}


def test_marker_of_a_target_without_new_rows_is_committed(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    row = canal_row("shop", "busy", "INSERT", 100, {"id": "1", "v": "a"}, MT, ["id"])
    write_captures(root, "t", [(0, 0, None, row), (0, 1, None, wm(200))])
    project = load(root)
    results: list[str] = []
    assert runner.run(project, spark=spark, out=results.append) == 0
    # `idle` was created and got no rows (an INSERT of nothing into an empty table).
    assert "apply idle: +0 ~0 -0 in 1 merge(s), 0 DDL, applied ts 200 " in "\n".join(results)
    assert applied(project) == {"busy": 200, "idle": 200}

    # A later watermark with no rows: nothing is pending, so nothing is applied and no
    # commit is made; both are current as of 300 all the same, and stay so.
    versions = {t: _version(spark, root, t) for t in ("busy", "idle")}
    write_captures(root, "t", [(0, 2, None, wm(300))])
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert applied(project) == {"busy": 200, "idle": 200}
    assert current(project) == {"busy": 300, "idle": 300}
    assert {t: _version(spark, root, t) for t in ("busy", "idle")} == versions
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert {t: _version(spark, root, t) for t in ("busy", "idle")} == versions

    # A row of `idle` after it: `idle` is current just before it until applied.
    row2 = canal_row("shop", "idle", "INSERT", 350, {"id": "2", "v": "b"}, MT, ["id"])
    write_captures(root, "t", [(0, 3, None, row2), (0, 4, None, wm(400))])
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert applied(project) == {"busy": 200, "idle": 400}
    assert current(project) == {"busy": 400, "idle": 400}


def current(project) -> dict[str, int | None]:
    return {t["name"]: t["current_ts"] for t in status.report(project)["targets"]}


def _version(spark, root, name: str) -> int:
    loc = root / "warehouse" / "tables" / name
    return spark.sql(f"DESCRIBE HISTORY delta.`{loc}` LIMIT 1").collect()[0]["version"]
