"""A table without DDL or seed schema is inferred from its first row change in commit order.

Several tables first seen in one staged batch, each with messages whose protocol metadata
differ (column types and column order), the earliest commit not first in partition or
offset order: each target's columns are those of its earliest change's metadata
(`staged_batch.new_table_metadata`), whatever order the batch holds them in.
"""

from __future__ import annotations

import json

import pytest

from tests.spark.engine_harness import (
    canal_row,
    load,
    make_project,
    read_target,
    target_schema,
    write_captures,
)
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

EARLY = {"id": "int", "v": "varchar"}
LATE = {"v": "text", "id": "bigint"}  # other types, other column order


def _run(spark, root, recs):
    """The project at `root` with `recs` captured on topic `t`, after one run."""
    write_captures(root, "t", recs)
    lines: list[str] = []
    project = load(root)
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    return project


def _upstream_columns(spark, project, name: str) -> list[tuple[str, str]]:
    """Target `name`'s columns (name, type) without ticdc-sync's own `_` columns."""
    return [c for c in target_schema(spark, project, name) if not c[0].startswith("_")]


def test_each_new_table_takes_its_earliest_change_metadata(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json")
    recs = [
        # Partition 0 holds the later commits first: a's at 300, b's at 250.
        (0, 0, None, canal_row("shop", "a", "INSERT", 300, {"v": "x", "id": "2"}, LATE, ["id"])),
        (0, 1, None, canal_row("shop", "b", "INSERT", 250, {"v": "y", "id": "20"}, LATE, ["id"])),
        (0, 2, None, wm(400)),
        # Partition 1 holds each table's earliest commit, at higher offsets.
        (1, 7, None, canal_row("shop", "b", "INSERT", 200, {"id": "10", "v": "q"}, EARLY, ["id"])),
        (1, 8, None, canal_row("shop", "a", "INSERT", 100, {"id": "1", "v": "p"}, EARLY, ["id"])),
        (1, 9, None, wm(400)),
    ]
    project = _run(spark, root, recs)
    for name, rows in (("a", [(1, "p"), (2, "x")]), ("b", [(10, "q"), (20, "y")])):
        assert _upstream_columns(spark, project, name) == [("id", "int"), ("v", "string")], name
        got = [(r["id"], r["v"]) for r in read_target(spark, project, name, "id")]
        assert got == rows, name


def test_a_table_whose_first_change_has_no_metadata_takes_the_next_one(spark, tmp_path):
    """The lookup reads the rows at each new table's first commit_ts first; a table whose
    rows there carry no protocol metadata (a Canal-JSON message without `mysqlType`) takes
    it from its next change that has it, as a lookup over the whole batch would."""
    root = make_project(tmp_path / "p", protocol="canal-json")
    bare = json.loads(canal_row("shop", "c", "INSERT", 100, {"id": "1", "v": "p"}, EARLY, ["id"]))
    bare["mysqlType"] = None
    recs = [
        (0, 0, None, json.dumps(bare).encode()),
        (0, 1, None, canal_row("shop", "c", "INSERT", 200, {"v": "x", "id": "2"}, LATE, ["id"])),
        (0, 2, None, wm(400)),
    ]
    project = _run(spark, root, recs)
    assert _upstream_columns(spark, project, "c") == [("v", "string"), ("id", "bigint")]
    got = [(r["id"], r["v"]) for r in read_target(spark, project, "c", "id")]
    assert got == [(1, "p"), (2, "x")]


def test_hundreds_of_new_tables_in_one_batch_each_take_their_first_metadata(spark, tmp_path):
    """A changefeed's first poll over a database of many tables: 300 tables first seen in
    one batch, each with a later change of other metadata staged before its first (and 30
    whose first change carries no metadata), all found in the lookup's two queries."""
    from ticdc_sync.core.events import EVENT_SCHEMA, KIND_ROW
    from ticdc_sync.spark.staging.staged_batch import new_table_metadata
    from ticdc_sync.spark.staging.table import Staging

    def row(offset, tbl, ts, meta):
        cols = [None] * 23
        cols[:10] = ["t", 0, offset, 0, KIND_ROW, ts, True, "shop", tbl, "c"]
        cols[11] = {"id": str(offset)}
        cols[12] = meta
        cols[13] = ["id"]
        return tuple(cols)

    rows, offset = [], 0
    for i in range(300):
        tbl = f"t{i:03d}"
        late = {"v": "text", "id": "bigint"}
        early = None if i % 10 == 7 else {"id": "int", "v": "varchar"}
        rows.append(row(offset, tbl, 2000 + i, late))  # staged first, committed later
        rows.append(row(offset + 1, tbl, 1000 + i, early))
        offset += 2
    staging = Staging(spark, str(tmp_path / "wh"))
    staging.stage("src", spark.createDataFrame(rows, EVENT_SCHEMA))
    found = new_table_metadata(staging, staging.last_batch["src"])
    assert len(found) == 300
    for i in range(300):
        meta, pk = found[("shop", f"t{i:03d}")]
        # t007, t017, ...: their first change has none: their next change's, in commit order.
        want = {"v": "text", "id": "bigint"} if i % 10 == 7 else {"id": "int", "v": "varchar"}
        assert meta == want and pk == ("id",), (i, meta)
