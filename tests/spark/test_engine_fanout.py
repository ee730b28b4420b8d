"""Targets applied side by side (`spark.fanout`, `run.apply_workers`) land exactly what
one-at-a-time lands.

The same upstream history goes into two projects: one applies its targets side by side
(the default), the other one at a time. Every target must end with the same rows and the
same Delta commits, each carrying that target's own marker: the marker travels in a
session conf, so a shared session would stamp one target's progress on another. A target
blocked by its DDL policy stops alone while the others land.
"""

from __future__ import annotations

import json

import pytest

from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.spark import runner
from ticdc_sync.spark.runtime.conf import MARKER_COMMIT_CONF
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

TABLES = ("a", "b", "c", "d")


def history() -> tuple[Upstream, int]:
    u = Upstream("canal-json")
    for t in TABLES:
        u.ddl(t, f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v BIGINT)", 3)
    for i in range(1, 9):
        for t in TABLES:
            u.insert(t, id=i, v=i * 10)
    u.ddl("b", "ALTER TABLE shop.b ADD COLUMN w INT NOT NULL DEFAULT 7", 5)
    u.update("a", 2, v=21)
    u.update("b", 3, v=31, w=8)
    # Narrowing: blocked by the default policy (`narrow_column: fail`), for `c` alone.
    narrow = u.ddl("c", "ALTER TABLE shop.c MODIFY COLUMN v INT", 12)
    u.update("c", 1, v=11)
    u.update("d", 4, v=41)
    u.watermark()
    return u, narrow


def commits(spark, project, name: str) -> list[tuple[str, str | None]]:
    ref = table_ref(target_location(warehouse_path(project), name))
    rows = spark.sql(f"DESCRIBE HISTORY {ref}").orderBy("version").collect()
    return [(r["operation"], r["userMetadata"]) for r in rows]


def land(
    spark, tmp_path, name: str, lines: list[str], workers: int | None = None, defaults: str = ""
):
    root = make_project(tmp_path / name, protocol="canal-json", topic="cdc", defaults=defaults)
    if workers is not None:
        profiles = root / "profiles.yml"
        profiles.write_text(profiles.read_text() + f"      run: {{apply_workers: {workers}}}\n")
    u, narrow = history()
    write_captures(root, "cdc", u.records())
    project = load(root)
    code = runner.run(project, spark=spark, out=lines.append)
    return project, code, narrow


def test_side_by_side_lands_what_one_at_a_time_lands(spark, tmp_path):
    together: list[str] = []
    p1, code1, narrow = land(spark, tmp_path, "together", together)
    # The run's own session never carries a target's marker or MERGE setting.
    assert spark.conf.get(MARKER_COMMIT_CONF, None) is None

    alone: list[str] = []
    p2, code2, _ = land(spark, tmp_path, "alone", alone, workers=1)

    assert code1 == code2 == 1  # `c` is blocked in both
    for name in TABLES:
        assert read_target(spark, p1, name, "id") == read_target(spark, p2, name, "id"), name
        assert commits(spark, p1, name) == commits(spark, p2, name), name
    assert {r["id"]: r["v"] for r in read_target(spark, p1, "a", "id")}[2] == 21
    assert {r["id"]: (r["v"], r["w"]) for r in read_target(spark, p1, "b", "id")}[3] == (31, 8)
    assert {r["id"]: r["v"] for r in read_target(spark, p1, "d", "id")}[4] == 41
    # `c` stopped before its MODIFY: the update after it waits, nothing after it is lost.
    assert {r["id"]: r["v"] for r in read_target(spark, p1, "c", "id")}[1] == 10
    results = json.loads((p1.root / "target" / "run_results.json").read_text())
    blocked = results["targets"]["c"]["blocked"]["message"]
    assert f"commit_ts {narrow}" in blocked and "narrow_column" in blocked
    assert [e for e in results["errors"] if "target c " in e] == results["errors"]

    # Each target's lines stay together: the next target's lines start after its summary.
    for lines in (together, alone):
        applied = [line.split()[0:2] for line in lines if line.startswith(("apply ", "  "))]
        order = [w[1].rstrip(":") for w in applied if w[0] == "apply"]
        assert sorted(order) == list(TABLES)
        for name in TABLES:
            mine = [i for i, line in enumerate(lines) if line.startswith(f"  {name}:")]
            summary = next(i for i, line in enumerate(lines) if line.startswith(f"apply {name}:"))
            others = [
                i
                for i, line in enumerate(lines)
                if line.startswith("apply ") and not line.startswith(f"apply {name}:")
            ]
            first = min(mine, default=summary)
            assert not any(first < i < summary for i in others), (name, lines)
