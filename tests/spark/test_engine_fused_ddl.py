"""Rows on both sides of ADD COLUMN DDLs go into one MERGE (window.fuse_additive).

The DDL is committed first with the old `applied_ts`; rows older than the ADD get its
backfill value, newer rows their own. Checked against the values the unfused steps give,
on a populated target (MERGE) and an empty one (INSERT), and across a failed MERGE that is
resumed after the DDL already committed.
"""

from __future__ import annotations

import json

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.test_engine_canal_basic import ddl
from ticdc_sync.core.window import Marker
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));\n"
MT0 = {"id": "int", "v": "varchar"}
MT1 = {**MT0, "extra": "int"}
MT2 = {**MT1, "note": "varchar"}


def row(op: str, ts: int, data: dict, mt: dict, old: dict | None = None) -> bytes:
    return canal_row("shop", "t", op, ts, data, mt, ["id"], old)


def before_ddl() -> list[bytes]:
    return [
        row("INSERT", 100, {"id": "1", "v": "a"}, MT0),
        row("INSERT", 101, {"id": "2", "v": "b"}, MT0),
        row("INSERT", 102, {"id": "3", "v": "c"}, MT0),
    ]


def across_ddl(bad_extra: bool = False) -> list[bytes]:
    return [
        row("UPDATE", 106, {"id": "1", "v": "a1"}, MT0, {"id": "1", "v": "a"}),
        ddl(110, "ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7"),
        row(
            "UPDATE",
            120,
            {"id": "2", "v": "b2", "extra": "9"},
            MT1,
            {"id": "2", "v": "b", "extra": "7"},
        ),
        row("INSERT", 121, {"id": "4", "v": "d", "extra": "x" if bad_extra else "1"}, MT1),
        row("DELETE", 122, {"id": "3", "v": "c", "extra": "7"}, MT1),
        ddl(130, "ALTER TABLE t ADD COLUMN note VARCHAR(5)"),
        row("INSERT", 140, {"id": "5", "v": "e", "extra": "2", "note": "n"}, MT2),
    ]


def _records(start: int, values: list[bytes]) -> list[tuple]:
    return [(0, start + i, None, v) for i, v in enumerate(values)]


def _rows(spark, project) -> list[tuple]:
    return [
        (r["id"], r["v"], r.get("extra"), r.get("note"), r["_commit_ts"])
        for r in read_target(spark, project, "t", "id")
    ]


def _markers(spark, project) -> list[tuple[str, Marker | None]]:
    loc = target_location(warehouse_path(project), "t")
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{loc}`").orderBy("version").collect()
    return [(h["operation"], Marker.from_user_metadata(h["userMetadata"])) for h in hist]


def _merges(root) -> int:
    results = json.loads((root / "target" / "run_results.json").read_text())
    return results["targets"]["t"]["merges"]


def test_segments_across_add_column_are_one_merge(spark, tmp_path):
    # The MERGE path (`rewrite_below: 0`): its commits are named in the history below. A
    # small target's rewrite lands the same rows (tests/spark/test_rewrite.py).
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        defaults="defaults:\n  rewrite_below: 0\n",
    )
    first = before_ddl() + [wm(105)]
    write_captures(root, "t", _records(0, first))
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert [r[:2] for r in _rows(spark, project)] == [(1, "a"), (2, "b"), (3, "c")]

    write_captures(root, "t", _records(len(first), [*across_ddl(), wm(150)]))
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    # What the unfused steps give: id 1 was last changed before the ADD (backfill 7), id 2
    # after it (its own 9); id 3 deleted; the later ADD leaves older rows NULL.
    assert _rows(spark, project) == [
        (1, "a1", 7, None, 106),
        (2, "b2", 9, None, 120),
        (4, "d", 1, None, 121),
        (5, "e", 2, "n", 140),
    ]
    assert _merges(root) == 1
    # The ADD COLUMN commits ran first and kept applied_ts at the first run's 105.
    ops = _markers(spark, project)
    merge_at = max(i for i, (op, _) in enumerate(ops) if op == "MERGE")
    ddl_markers = [m for op, m in ops[:merge_at] if op in ("ADD COLUMNS", "UPDATE")]
    assert ddl_markers and all(m is not None and m.applied_ts == 105 for m in ddl_markers)
    assert ops[merge_at][1] == Marker(150, 130, 0, 1)


def test_failed_fused_merge_resumes_after_the_ddl(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    write_captures(root, "t", _records(0, [*before_ddl(), *across_ddl(bad_extra=True), wm(150)]))
    project = load(root)
    # Empty target: the fused segment is an INSERT, and it fails on the value "x".
    assert runner.run(project, spark=spark, out=lambda s: None) == 1
    loc = target_location(warehouse_path(project), "t")
    columns = spark.read.format("delta").load(loc).columns
    assert {"extra", "note"} <= set(columns)  # the DDL went ahead
    assert spark.read.format("delta").load(loc).count() == 0
    ops = _markers(spark, project)
    assert ops[-1][1] is not None and ops[-1][1].applied_ts == -1

    # The user opts into quarantine; the next run applies the whole segment after the DDL.
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  on_bad_message: quarantine\n"
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert _rows(spark, project) == [
        (1, "a1", 7, None, 106),
        (2, "b2", 9, None, 120),
        (5, "e", 2, "n", 140),
    ]
    assert _merges(root) == 1
