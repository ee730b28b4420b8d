"""A run executes the steps `plan` shows, keys included, with a key-changing DDL in the window.

One Canal-JSON history of `shop.t`: created with key `id`, two rows, then the primary key
moves to `code` (after which ids may repeat), a row with an id that is already there, an
ADD COLUMN, one more row. The plan made from the staged events shows the row segments
merged on `id` and then on `code`; the engine's apply of that plan runs exactly those steps
(the same objects, keys and schema spans included) and the table is the upstream one: a
MERGE on `id` after the key change would have overwritten the first row with the
repeated id.
"""

from __future__ import annotations

import json

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import Ddl, Rows
from ticdc_sync.run.engine import ApplyJob
from ticdc_sync.spark.engine import SparkEngine
from ticdc_sync.spark.staging.state import State
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = pytest.mark.spark

TABLES = '  - upstream: "shop.t"\n    name: t\n'
MT = {"id": "int", "code": "varchar", "v": "int"}
MTW = {**MT, "w": "int"}


def ddl(ts: int, sql: str, kind: str) -> bytes:
    return json.dumps(
        {
            "id": 0,
            "database": "shop",
            "table": "t",
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


def history() -> list[tuple]:
    msgs = [
        ddl(
            100,
            "CREATE TABLE shop.t (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL, v INT)",
            "CREATE",
        ),
        canal_row("shop", "t", "INSERT", 200, {"id": "1", "code": "a", "v": "1"}, MT, ["id"]),
        canal_row("shop", "t", "INSERT", 210, {"id": "2", "code": "b", "v": "2"}, MT, ["id"]),
        ddl(300, "ALTER TABLE shop.t DROP PRIMARY KEY, ADD PRIMARY KEY (code)", "ALTER"),
        # id 1 again: a second row under the new key.
        canal_row("shop", "t", "INSERT", 310, {"id": "1", "code": "c", "v": "3"}, MT, ["code"]),
        canal_row(
            "shop",
            "t",
            "UPDATE",
            320,
            {"id": "2", "code": "b", "v": "20"},
            MT,
            ["code"],
            old={"v": "2"},
        ),
        ddl(400, "ALTER TABLE shop.t ADD COLUMN w INT DEFAULT 7", "ALTER"),
        canal_row(
            "shop", "t", "INSERT", 410, {"id": "1", "code": "d", "v": "4", "w": "9"}, MTW, ["code"]
        ),
        wm(500),
    ]
    return [(0, i, None, m) for i, m in enumerate(msgs)]


def test_the_run_executes_the_planned_segments_and_keys(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", tables=TABLES)
    write_captures(root, "t", history())
    project = load(root)
    lines: list[str] = []
    state = State(spark, warehouse_path(project))
    engine = SparkEngine(project, spark, state, out=lines.append, side_by_side=False)
    (source,) = project.sources
    staged = engine.stage(source)
    assert staged.staged > 0 and not staged.errors, lines

    plan = build_plan(project, engine.read_state().state)
    t = plan.target_plan("t")
    assert t is not None
    rows = [s for s in t.steps if isinstance(s, Rows)]
    # Before the CREATE nothing is known (no table, no keys); then a segment per DDL, but
    # the ADD COLUMN moves ahead of the rows before it (the CREATE before it in this window
    # made the target: the rows on both sides share one segment, typed with its backfill).
    assert [(s.lo, s.hi, s.keys, len(s.tables)) for s in rows] == [
        (-1, 99, (), 0),
        (100, 299, ("id",), 1),
        (300, 500, ("code",), 1),
    ]
    assert [c.name for c in rows[2].tables[0].spans[-1].schema.columns] == ["id", "code", "v", "w"]
    assert [(s.commit_ts, s.ahead) for s in t.steps if isinstance(s, Ddl)] == [
        (100, False),
        (300, False),
        (400, True),
    ]
    text = render_text(plan)
    assert "rows 100 < commit_ts <= 299: round on id (primary key; target 0 B <" in text
    assert "rows 300 < commit_ts <= 500: round on code (primary key; target 0 B <" in text
    shown = next(x for x in json.loads(render_json(plan))["targets"] if x["name"] == "t")
    assert [(s["step"], s.get("keys")) for s in shown["steps"]] == [
        ("rows", []),
        ("ddl", None),
        ("rows", ["id"]),
        ("ddl", None),
        ("ddl", None),
        ("rows", ["code"]),
    ]

    sp = plan.source_plan(t.source)
    assert sp is not None
    outcome = engine.apply(ApplyJob(t, sp), lambda: False)
    assert outcome.error is None and outcome.blocked is None, lines
    # What ran is what the plan holds and shows: the same steps, in order.
    assert outcome.ran == t.steps
    assert outcome.reached == 500 and outcome.merges == 2

    got = [(r["id"], r["code"], r["v"], r["w"]) for r in read_target(spark, project, "t", "code")]
    assert got == [(1, "a", 1, 7), (2, "b", 20, 7), (1, "c", 3, 7), (1, "d", 4, 9)]
