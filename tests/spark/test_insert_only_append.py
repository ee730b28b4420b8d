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
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import rows
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

MODES = ("mirror", "soft_delete", "history")
# One upstream table per mode, each with the same changes: one project has all three.
SCHEMA = "".join(f"CREATE TABLE shop.{m} (id INT PRIMARY KEY, v VARCHAR(10));\n" for m in MODES)
TABLES = "".join(f'  - upstream: "shop.{m}"\n    name: {m}\n    mode: {m}\n' for m in MODES)
MT = {"id": "int", "v": "varchar"}


def _row(op: str, ts: int, i: int, v: str, old: dict | None = None) -> list[bytes]:
    return [canal_row("shop", m, op, ts, {"id": str(i), "v": v}, MT, ["id"], old) for m in MODES]


# Each run's records, and the statement that lands them in each target.
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
]


def _run_all(spark, root) -> dict[str, list[tuple[str, list[dict]]]]:
    """Per target (mode), each run's statement (its newest commit's operation) and rows."""
    # The MERGE path (`rewrite_below: 0`): appends are its shortcut. A small target's
    # rewrite lands the same rows (tests/spark/test_rewrite.py).
    make_project(
        root,
        protocol="canal-json",
        schema_sql=SCHEMA,
        tables=TABLES,
        defaults="defaults:\n  rewrite_below: 0\n",
    )
    out: dict[str, list] = {m: [] for m in MODES}
    offset = 0
    for i, (changes, _) in enumerate(RUNS):
        recs = [*(r for per_mode in changes for r in per_mode), wm(100 * (i + 1) + 90)]
        write_captures(root, "t", [(0, offset + j, None, r) for j, r in enumerate(recs)])
        offset += len(recs)
        project = load(root)
        lines: list[str] = []
        assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
        for m in MODES:
            loc = target_location(warehouse_path(project), m)
            newest = spark.sql(f"DESCRIBE HISTORY delta.`{loc}` LIMIT 1").collect()[0]
            order = "id, _valid_from" if m == "history" else "id"
            out[m].append((newest["operation"], read_target(spark, project, m, order)))
    return out


def test_segments_that_grow_a_target_are_appended_and_land_what_a_merge_does(
    spark, tmp_path, monkeypatch
):
    small = _run_all(spark, tmp_path / "small")
    # Every populated target takes the large targets' path (a key range, then the
    # statement), whatever its size.
    monkeypatch.setattr(rows, "SMALL_TARGET", -1)
    large = _run_all(spark, tmp_path / "large")
    monkeypatch.setattr(rows.TargetWriter, "_appends", lambda *a, **k: False)
    merged = _run_all(spark, tmp_path / "merge")
    for mode in MODES:
        for size, got in (("small", small), ("large", large)):
            for i, ((op, table), (_, want)) in enumerate(zip(got[mode], merged[mode], strict=True)):
                what = f"{mode}, {size}, run {i + 1}"
                assert table == want, what
                assert op == RUNS[i][1], f"{what}: {op}"
        # Appends off: every populated target merged.
        assert [op for op, _ in merged[mode]] == ["WRITE", "MERGE", "MERGE", "MERGE"]
        live = [
            r
            for r in small[mode][-1][1]
            if not r.get("_is_deleted") and ("_valid_from" not in r or r["_valid_to"] is None)
        ]
        assert sorted(r["id"] for r in live) == [*range(1, 32)], mode
        values = {r["id"]: r["v"] for r in live}
        assert (values[3], values[21], values[22]) == ("again", "upd", "b22+"), mode
