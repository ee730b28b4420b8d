"""A segment that grows the target (no DELETE, no more UPDATEs than INSERTs) whose keys are
not in the target is appended, not merged (`TargetWriter._appends`); one with a DELETE, or
a key the target has already, is merged. Every mode, small targets and large ones: each
run leaves the target exactly as the MERGE of every segment does (the same project run
with appends turned off), and the appends are plain writes in the target's log.
"""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.locations import target_location, warehouse_path
from ticdc_sync.spark import rows, runner

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));\n"
MT = {"id": "int", "v": "varchar"}


def _row(op: str, ts: int, i: int, v: str, old: dict | None = None) -> bytes:
    return canal_row("shop", "t", op, ts, {"id": str(i), "v": v}, MT, ["id"], old)


# Each run's records, and the statement that lands them in the target.
RUNS = [
    # Into the empty target: an append, as before.
    ([_row("INSERT", 100 + i, i, f"a{i}") for i in range(1, 21)], "WRITE"),
    # New keys, one of them updated after its insert: every key new, appended.
    (
        [
            *[_row("INSERT", 200 + i, i, f"b{i}") for i in range(21, 30)],
            _row("UPDATE", 250, 22, "b22+", {"v": "b22"}),
        ],
        "WRITE",
    ),
    # INSERTs only, but key 3 is in the target (two upstream rows with one key, as a
    # table routed from shards can have): merged, so the later one wins as in a MERGE.
    ([_row("INSERT", 300, 3, "again"), _row("INSERT", 301, 30, "c30")], "MERGE"),
    # As many UPDATEs as INSERTs, the update of a key in the target: merged.
    ([_row("INSERT", 400, 31, "d31"), _row("UPDATE", 410, 21, "upd", {"v": "b21"})], "MERGE"),
    # A DELETE (of a new key inserted before it): merged without asking (a mirror's MERGE
    # changes nothing then, and the marker gets a commit of its own).
    ([_row("INSERT", 500, 40, "gone"), _row("DELETE", 510, 40, "gone")], "MERGE"),
]


def _run_all(spark, root, *, mode: str) -> list[tuple[str, list[dict]]]:
    """Each run's statement (the operation of the target's newest commit) and rows."""
    tables = f'  - upstream: "shop.t"\n    name: t\n    mode: {mode}\n'
    make_project(root, protocol="canal-json", schema_sql=SCHEMA, tables=tables)
    out, offset = [], 0
    for i, (records, _) in enumerate(RUNS):
        recs = [*records, wm(100 * (i + 1) + 90)]
        write_captures(root, "t", [(0, offset + j, None, r) for j, r in enumerate(recs)])
        offset += len(recs)
        project = load(root)
        lines: list[str] = []
        assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
        loc = target_location(warehouse_path(project), "t")
        newest = spark.sql(f"DESCRIBE HISTORY delta.`{loc}` LIMIT 1").collect()[0]
        order = "id, _valid_from" if mode == "history" else "id"
        out.append((newest["operation"], read_target(spark, project, "t", order)))
    return out


@pytest.mark.parametrize(
    ("mode", "size"),
    [("mirror", "small"), ("mirror", "large"), ("soft_delete", "small"), ("history", "large")],
)
def test_insert_only_segments_are_appended_and_land_what_a_merge_does(
    spark, tmp_path, monkeypatch, mode, size
):
    if size == "large":
        # Every populated target takes the large targets' path (a key range, then the
        # statement), whatever its size.
        monkeypatch.setattr(rows, "SMALL_TARGET", -1)
    got = _run_all(spark, tmp_path / "append", mode=mode)
    monkeypatch.setattr(rows.TargetWriter, "_appends", lambda *a, **k: False)
    merged = _run_all(spark, tmp_path / "merge", mode=mode)
    for i, ((op, table), (_, want)) in enumerate(zip(got, merged, strict=True)):
        assert table == want, f"run {i + 1}"
        want_op = RUNS[i][1]
        if i == len(RUNS) - 1 and mode == "mirror":
            want_op = "SET TBLPROPERTIES"
        assert op == want_op, f"run {i + 1}: {op}"
    # The MERGE-only runs merged every populated target.
    assert [op for op, _ in merged][:4] == ["WRITE", "MERGE", "MERGE", "MERGE"]
    live = [
        r
        for r in got[-1][1]
        if not r.get("_is_deleted") and ("_valid_from" not in r or r["_valid_to"] is None)
    ]
    assert sorted(r["id"] for r in live) == [*range(1, 32)]
    values = {r["id"]: r["v"] for r in live}
    assert (values[3], values[21], values[22]) == ("again", "upd", "b22+")
