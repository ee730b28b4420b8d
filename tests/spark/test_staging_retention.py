"""Staging retention: applied events older than the retention are deleted, nothing else moves.

With `staging.retention: 0s` every event all targets have applied is deleted after the
run; DDL stays. The next batch continues from the same positions (the trim commit carries
the tallies), the targets stay exact, and `plan` reads the same state. A target that has
not applied the events (blocked) holds them back.
"""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.test_plan_is_program import MT, ddl
from ticdc_sync.plan import build_plan
from ticdc_sync.spark import runner
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse import read as warehouse
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = pytest.mark.spark


def kinds(spark, project) -> list[str]:
    ev = Staging(spark, warehouse_path(project)).events()
    return sorted(r["kind"] for r in ev.select("kind").collect())


def test_applied_events_are_trimmed_and_runs_go_on(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables='  - upstream: "shop.*"\n    name: "{table}"\n',
        defaults="staging:\n  retention: 0s\n",
    )
    first = [
        ddl(
            "orders", 100, "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE"
        ),
        canal_row("shop", "orders", "INSERT", 200, {"id": "1", "v": "a"}, MT, ["id"]),
        canal_row("shop", "orders", "INSERT", 210, {"id": "2", "v": "b"}, MT, ["id"]),
        wm(300),
    ]
    write_captures(root, "t", [(0, i, None, m) for i, m in enumerate(first)])
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert "applied event(s) older than the retention deleted" in "\n".join(lines)
    assert kinds(spark, project) == ["ddl"]  # rows and the watermark are gone
    before = build_plan(project, warehouse.read_state(project))
    assert before.source_plan("src").resolved_ts == 300
    assert not before.has_pending

    more = [
        canal_row(
            "shop",
            "orders",
            "UPDATE",
            400,
            {"id": "1", "v": "a2"},
            MT,
            ["id"],
            {"id": "1", "v": "a"},
        ),
        canal_row("shop", "orders", "INSERT", 410, {"id": "3", "v": "c"}, MT, ["id"]),
        wm(500),
    ]
    write_captures(root, "t", [(0, len(first) + i, None, m) for i, m in enumerate(more)])
    lines.clear()
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert "3 new event(s) staged" in "\n".join(lines)  # nothing read twice
    rows = [(r["id"], r["v"]) for r in read_target(spark, project, "orders", "id")]
    assert rows == [(1, "a2"), (2, "b"), (3, "c")]
    assert kinds(spark, project) == ["ddl"]
