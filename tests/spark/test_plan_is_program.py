"""`run` executes the plan `plan` shows, and both read the engine's state from the warehouse.

One small Canal-JSON history: `orders` (whose table entry quarantines bad records while the
project default fails) gets an undecodable record; `items` is blocked by a narrowing MODIFY.
Then: `plan` made from a copy that has only the warehouse (no `target/`) shows the same
pending DDL; `run --select orders` does not make `plan` forget `items`; a selection that
matches nothing is an error; a saved plan runs only while it is what a plan made now does
(an edited plan, or one made before the project changed, is refused), and running it
applies what it showed.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.errors import UserError
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.spark import runner
from ticdc_sync.warehouse import read as warehouse

pytestmark = pytest.mark.spark

TABLES = (
    '  - upstream: "shop.orders"\n    name: orders\n    on_bad_message: quarantine\n'
    '  - upstream: "shop.items"\n    name: items\n'
)
MT = {"id": "int", "v": "varchar"}


def ddl(table: str, ts: int, sql: str, kind: str) -> bytes:
    return json.dumps(
        {
            "id": 0,
            "database": "shop",
            "table": table,
            "pkNames": None,
            "isDdl": True,
            "type": kind,
            "es": ts >> 18,
            "ts": 0,
            "sql": sql,
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"commitTs": ts},
        }
    ).encode()


def not_an_object(table: str, ts: int) -> bytes:
    """A row message whose row image is not a JSON object: undecodable, table known."""
    msg = json.loads(canal_row("shop", table, "INSERT", ts, {"id": "9", "v": "x"}, MT, ["id"]))
    msg["data"] = [5]
    return json.dumps(msg).encode()


def history() -> list[tuple]:
    msgs = [
        ddl(
            "orders", 100, "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE"
        ),
        ddl("items", 110, "CREATE TABLE shop.items (id INT PRIMARY KEY, v BIGINT)", "CREATE"),
        canal_row("shop", "orders", "INSERT", 200, {"id": "1", "v": "o1"}, MT, ["id"]),
        canal_row("shop", "items", "INSERT", 210, {"id": "1", "v": "10"}, MT, ["id"]),
        not_an_object("orders", 220),
        ddl("items", 300, "ALTER TABLE shop.items MODIFY COLUMN v INT", "ALTER"),
        canal_row("shop", "orders", "INSERT", 310, {"id": "2", "v": "o2"}, MT, ["id"]),
        canal_row("shop", "items", "INSERT", 320, {"id": "2", "v": "20"}, MT, ["id"]),
        wm(400),
    ]
    return [(0, i, None, m) for i, m in enumerate(msgs)]


def ids(spark, project, name: str) -> list[int]:
    return [r["id"] for r in read_target(spark, project, name, "id")]


def test_run_executes_the_plan_from_the_warehouse(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables=TABLES,
        defaults="defaults:\n  on_bad_message: fail\n",
    )
    write_captures(root, "t", history())
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    # The table's own on_bad_message applies to its undecodable record.
    assert "1 undecodable record(s) quarantined" in text
    assert ids(spark, project, "orders") == [1, 2]
    # items stops before its narrowing MODIFY; nothing after it is lost.
    assert ids(spark, project, "items") == [1]
    results = json.loads((root / "target" / "run_results.json").read_text())
    assert [e for e in results["errors"] if "target items is blocked at commit_ts 300" in e]
    assert len(results["errors"]) == 1 and results["outcome"] != "ok"

    # plan from a copy holding only the project files and the warehouse: the same plan.
    here = render_text(build_plan(project, warehouse.read_state(project)))
    clone = tmp_path / "clone"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns("target"))
    there = render_text(build_plan(load(clone), warehouse.read_state(load(clone))))
    assert there == here
    assert "DDL at 300 on shop.items" in here and ": BLOCKED" in here

    # A run of one target does not make plan forget the others.
    assert runner.run(project, spark=spark, select=("orders",), out=lines.append) == 0
    after = render_text(build_plan(project, warehouse.read_state(project)))
    assert after == here
    with pytest.raises(UserError, match="--select nope matches no target"):
        runner.run(project, spark=spark, select=("nope",), out=lines.append)

    # A saved plan: refused once edited, or once the project changed since it was made.
    saved = render_json(build_plan(project, warehouse.read_state(project)))
    edited = json.loads(saved)
    edited["targets"][0]["keys"] = ["v"]
    with pytest.raises(UserError, match="was edited after it was made"):
        runner.run(
            project, spark=spark, out=lines.append, saved_plan=(json.dumps(edited), "p.json")
        )
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  on_bad_message: fail\n  ddl:\n"
        "    narrow_column: rebuild\n"
    )
    project = load(root)
    with pytest.raises(UserError, match="project files changed since the plan was made"):
        runner.run(project, spark=spark, out=lines.append, saved_plan=(saved, "p.json"))
    assert ids(spark, project, "items") == [1]  # nothing was run

    # The plan made now shows the rebuild; running it applies exactly that.
    fresh = build_plan(project, warehouse.read_state(project))
    assert "ready" in render_text(fresh) and "narrow column v" in render_text(fresh)
    lines.clear()
    code = runner.run(
        project, spark=spark, out=lines.append, saved_plan=(render_json(fresh), "p.json")
    )
    assert code == 0, "\n".join(lines)
    assert [(r["id"], r["v"]) for r in read_target(spark, project, "items", "id")] == [
        (1, 10),
        (2, 20),
    ]
