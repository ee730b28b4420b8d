"""Engine semantics: MERGE guard, bad messages (fail / quarantine), bad values, unrouted
tables, awkward identifiers, and the run lease."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from tests.spark.engine_harness import canal_row as canal
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from ticdc_sync.core.sqlgen import create_table_sql, merge_sql, table_ref
from ticdc_sync.spark import runner
from ticdc_sync.warehouse import lease as lease_mod
from ticdc_sync.warehouse.lease import LeaseHeld, LeaseLost, RunLease
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark


MT = {"id": "int", "v": "varchar"}


def test_merge_never_regresses_a_row_to_an_older_commit(spark, tmp_path):
    ref = table_ref(str(tmp_path / "t"))
    spark.sql(create_table_sql(ref, [("id", "INT"), ("v", "STRING")]))
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'new', 200), (2, 'old', 100)")
    # Older changes arriving late: an update and a delete below the rows' commit_ts, and a
    # newer update for key 2.
    spark.createDataFrame(
        [(1, "stale", 150, "U"), (1, None, 199, "D"), (2, "newer", 300, "U")],
        "id INT, v STRING, _commit_ts BIGINT, __op STRING",
    ).createOrReplaceTempView("src")
    # One source row per key (what the collapse produces): take each key's last change.
    spark.sql(
        "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY _commit_ts DESC) n "
        "FROM src) WHERE n = 1"
    ).drop("n").createOrReplaceTempView("src1")
    spark.sql(merge_sql(ref, "src1", ["id"], ["id", "v"]))
    rows = sorted((r.id, r.v, r._commit_ts) for r in spark.sql(f"SELECT * FROM {ref}").collect())
    assert rows == [(1, "new", 200), (2, "newer", 300)]


def test_bad_message_fail_then_quarantine(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql="CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));",
    )
    write_captures(
        root,
        "t",
        [
            (0, 0, None, canal("shop", "t", "INSERT", 100, {"id": "1", "v": "a"}, MT, ["id"])),
            (0, 1, None, wm(100)),
            (0, 2, None, b"{not json"),
            (0, 3, None, canal("shop", "t", "INSERT", 110, {"id": "2", "v": "b"}, MT, ["id"])),
            (0, 4, None, wm(120)),
            # values that do not fit their column (not integers)
            (0, 5, None, canal("shop", "t", "INSERT", 130, {"id": "3.5", "v": "x"}, MT, ["id"])),
            (0, 6, None, canal("shop", "t", "INSERT", 131, {"id": "nope", "v": "c"}, MT, ["id"])),
            (0, 7, None, wm(140)),
        ],
    )
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    assert "t/0/2:" in text, text  # topic/partition/offset of the bad record
    # Nothing past the bad record is applied.
    assert [(r["id"], r["v"]) for r in read_target(spark, project, "t", "id")] == [(1, "a")]

    # Quarantine: the bad record is kept with its bytes; the rows behind it go on, except
    # the value that does not fit, which is quarantined with its position too.
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  on_bad_message: quarantine\n"
    )
    project = load(root)
    lines.clear()
    assert runner.run(project, spark=spark, out=lines.append) == 0, lines
    assert [(r["id"], r["v"]) for r in read_target(spark, project, "t", "id")] == [
        (1, "a"),
        (2, "b"),
    ]
    q = (
        spark.read.format("delta")
        .load(str(Path(warehouse_path(project)) / "_ticdc_sync" / "quarantine"))
        .orderBy("offset")
        .collect()
    )
    assert [(r.topic, r.partition, r.offset) for r in q] == [("t", 0, 2), ("t", 0, 5), ("t", 0, 6)]
    assert bytes(q[0].raw_value) == b"{not json"
    assert "does not fit" in q[2].reason and "id" in q[2].reason


def test_bad_value_fails_naming_position_table_and_commit_ts(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql="CREATE TABLE shop.t (id INT PRIMARY KEY, v TINYINT);",
    )
    write_captures(
        root,
        "t",
        [
            (
                0,
                0,
                None,
                canal(
                    "shop",
                    "t",
                    "INSERT",
                    100,
                    {"id": "1", "v": "1000"},
                    {"id": "int", "v": "tinyint"},
                    ["id"],
                ),
            ),
            (0, 1, None, wm(100)),
        ],
    )
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    assert (
        "t/0/0" in text and "shop.t" in text and "commit_ts 100" in text and "v = 1000" in text
    ), text


def test_unrouted_tables_are_skipped_and_counted_and_odd_names_work(spark, tmp_path):
    odd_db, odd_tbl = "we ird", "or`d.ers ü"
    cols = {"id": "int", "select": "varchar", "a b.c": "varchar", "ünï`x": "int"}
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables='  - upstream: "we ird.*"\n    name: "../{table}"\n',
    )
    write_captures(
        root,
        "t",
        [
            (
                0,
                0,
                None,
                canal(
                    odd_db,
                    odd_tbl,
                    "INSERT",
                    100,
                    {"id": "1", "select": "s", "a b.c": "d", "ünï`x": "5"},
                    cols,
                    ["id"],
                ),
            ),
            (0, 1, None, canal("other", "x", "INSERT", 101, {"id": "1"}, {"id": "int"}, ["id"])),
            (0, 2, None, wm(200)),
        ],
    )
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, lines
    assert any("skipped 1 row change(s) of unrouted tables other.x" in ln for ln in lines), lines
    wh = warehouse_path(project)
    loc = target_location(wh, "../" + odd_tbl)
    assert os.path.realpath(loc).startswith(os.path.realpath(wh) + os.sep)
    rows = read_target(spark, project, "../" + odd_tbl, "id")
    assert rows == [{"id": 1, "select": "s", "a b.c": "d", "ünï`x": 5, "_commit_ts": 100}]


def test_a_run_is_refused_while_another_holds_the_lease_before_it_starts_anything(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json")
    write_captures(root, "t", [(0, 0, None, wm(100))])
    project = load(root)
    wh = warehouse_path(project)
    other = RunLease(wh, out=lambda s: None)
    held = f"in use by another `ticdc-sync run`: {other.holder}"
    with other, pytest.raises(LeaseHeld, match=held):
        runner.run(project, spark=spark, out=lambda s: None)
    # Refused before anything: no state table was made, no lock file beside them.
    assert sorted(p.name for p in (Path(wh) / "_ticdc_sync").iterdir()) == ["run_lease"]


def test_a_run_that_cannot_renew_its_lease_stops_before_its_next_commit(spark, tmp_path):
    """A run that could not renew its lease for half its ttl (paused, or cut off from the
    warehouse) commits nothing more: it stops with the reason, and the next run takes the
    expired lease over and finishes the work."""
    root = make_project(tmp_path / "p", protocol="canal-json")
    row = canal("shop", "t", "INSERT", 100, {"id": "1", "v": "a"}, MT, ["id"])
    write_captures(root, "t", [(0, 0, None, row), (0, 1, None, wm(100))])
    project = load(root)
    short = dataclasses.replace(
        project, output=dataclasses.replace(project.output, run_lease_ttl=2.0)
    )
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if line.startswith("read+decode"):
            # Staged. Now the run goes silent, as a paused one would: no renewals for the
            # whole ttl.
            lease = lease_mod._ACTIVE
            assert lease is not None
            lease._stop_renewing()
            time.sleep(lease.ttl)

    with pytest.raises(LeaseLost, match="could not be renewed for [0-9]+s"):
        runner.run(short, spark=spark, out=out)
    wh = warehouse_path(project)
    assert not os.path.exists(target_location(wh, "t")), lines
    lines.clear()
    assert runner.run(short, spark=spark, out=lines.append, wait=60) == 0, lines
    assert any(ln.startswith("took over the run lease of ") for ln in lines), lines
    assert read_target(spark, project, "t", "id") == [{"id": 1, "v": "a", "_commit_ts": 100}]
