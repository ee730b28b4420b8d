"""Engine basics on hand-written Canal-JSON (TiDB extension): order, collapse, guard, resolve."""

from __future__ import annotations

import json

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.plan import build_plan
from ticdc_sync.spark import runner
from ticdc_sync.warehouse import read as warehouse

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10), n DECIMAL(10,2));\n"
MT = {"id": "int", "v": "varchar", "n": "decimal"}


def row(op: str, ts: int, data: dict, old: dict | None = None) -> bytes:
    return canal_row("shop", "t", op, ts, data, MT, ["id"], old)


def ddl(ts: int, sql: str) -> bytes:
    return json.dumps(
        {
            "id": 0,
            "database": "shop",
            "table": "t",
            "pkNames": None,
            "isDdl": True,
            "type": "ALTER",
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


def test_insert_update_delete_and_watermark_gating(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    recs0 = [
        (0, 0, None, row("INSERT", 100, {"id": "1", "v": "a", "n": "1.50"})),
        (0, 1, None, row("INSERT", 110, {"id": "2", "v": "b", "n": None})),
        (
            0,
            2,
            None,
            row(
                "UPDATE",
                120,
                {"id": "1", "v": "a2", "n": "2.00"},
                {"id": "1", "v": "a", "n": "1.50"},
            ),
        ),
        (0, 3, None, wm(120)),
        (0, 4, None, row("DELETE", 130, {"id": "2", "v": "b", "n": None})),
        (0, 5, None, ddl(135, "ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7")),
    ]
    recs1 = [
        # key move on partition 1: id 3 -> 4, at a ts below the watermark of partition 1
        (1, 0, None, row("INSERT", 105, {"id": "3", "v": "c", "n": "3.00"})),
        (
            1,
            1,
            None,
            row(
                "UPDATE",
                115,
                {"id": "4", "v": "c", "n": "3.00"},
                {"id": "3", "v": "c", "n": "3.00"},
            ),
        ),
        (1, 2, None, wm(125)),
    ]
    write_captures(root, "t", recs0 + recs1)
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    rows = read_target(spark, project, "t", "id")
    # resolved = min(120, 125) = 120: the DELETE at 130 waits.
    assert [
        (r["id"], r["v"], str(r["n"]) if r["n"] is not None else None, r["_commit_ts"])
        for r in rows
    ] == [(1, "a2", "2.00", 120), (2, "b", None, 110), (4, "c", "3.00", 115)]

    # The DDL beyond the resolved ts is pending for `plan` (read from the warehouse), waiting
    # for a watermark past it, with its Delta change.
    plan = build_plan(project, warehouse.read_state(project))
    (d,) = plan.target_plan("t").ddl
    assert (d.commit_ts, d.status) == (135, "waiting")
    assert [(s.decision.classification, s.decision.kind.value) for s in d.steps] == [
        ("additive", "add_column")
    ]

    # More records: the watermark passes the delete; a replay of an old insert is ignored.
    write_captures(
        root,
        "t",
        [
            (0, 6, None, wm(140)),
            (1, 3, None, row("INSERT", 105, {"id": "3", "v": "c", "n": "3.00"})),  # replay
            (1, 4, None, wm(140)),
        ],
    )
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    rows = read_target(spark, project, "t", "id")
    assert [(r["id"], r["v"]) for r in rows] == [(1, "a2"), (4, "c")]

    # Running again with nothing new changes nothing.
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert [(r["id"], r["v"]) for r in read_target(spark, project, "t", "id")] == [
        (1, "a2"),
        (4, "c"),
    ]


@pytest.mark.parametrize(
    "entry", ["", "    on_bad_message: quarantine\n", "    ignore_columns: [EXTRA]\n"]
)
def test_a_row_with_a_column_the_schema_lacks_is_never_applied_without_it(spark, tmp_path, entry):
    """A row that carries a column the upstream schema lacks (a DDL that added it was not
    applied) fails the target, is quarantined, or loses that column where the entry says
    `ignore_columns` (names compare case-insensitively). Deletes carry no values to lose."""
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        tables='  - upstream: "shop.*"\n    name: "{table}"\n' + entry,
    )
    extra = {"id": "3", "v": "c", "n": None, "Extra": "x"}
    write_captures(
        root,
        "t",
        [
            (0, 0, None, row("INSERT", 100, {"id": "1", "v": "a", "n": "1.00"})),
            (0, 1, None, row("INSERT", 105, {"id": "2", "v": "b", "n": None})),
            (
                0,
                2,
                None,
                canal_row("shop", "t", "INSERT", 110, extra, {**MT, "Extra": "varchar"}, ["id"]),
            ),  # fmt: skip
            (
                0,
                3,
                None,
                canal_row(
                    "shop",
                    "t",
                    "DELETE",
                    115,
                    {"id": "2", "v": "b", "n": None, "Extra": "y"},
                    {**MT, "Extra": "varchar"},
                    ["id"],
                ),
            ),  # fmt: skip
            (0, 4, None, wm(120)),
        ],
    )
    project = load(root)
    lines: list[str] = []
    code = runner.run(project, spark=spark, out=lines.append)
    said = "\n".join(lines)
    if not entry:
        assert code == 1
        assert "the row carries column Extra, which the schema of shop.t" in said
        assert "t/0/2 table shop.t commit_ts 110" in said
        assert read_target(spark, project, "t", "id") == []
        return
    assert code == 0, said
    ids = [r["id"] for r in read_target(spark, project, "t", "id")]
    if "quarantine" in entry:
        assert ids == [1]
        reasons = [
            r["reason"]
            for r in spark.read.format("delta")
            .load(str(root / "warehouse" / "_ticdc_sync" / "quarantine"))
            .collect()
        ]
        assert len(reasons) == 1 and "the row carries column Extra" in reasons[0]
    else:
        assert ids == [1, 3]
