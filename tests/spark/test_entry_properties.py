"""A table entry's `properties` and `comment` on real Delta tables (`plan.properties`): a
target created with them (and the record of the keys the entry sets), then the YAML changed:
the plan shows the step and counts it pending, the run (stopped at its crash point and
resumed) sets the new keys (before delta-rs lands the target's rows), unsets the one the
entry dropped, keeps one set by hand, and changes the description; polars and delta-rs still read the table, and the next plan has
nothing left. A target whose entry accepts a reader-losing property (row tracking) takes the
MERGE, and its rows are exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.spark import readers as R
from tests.spark.crash_harness import run_resuming
from tests.spark.engine_harness import load, make_project, write_captures
from tests.spark.test_layout import Shop
from ticdc_sync.commands.cli import main as cli_main
from ticdc_sync.core.table_properties import ENTRY_PROPERTIES
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

R_ALL = ("polars", "delta-rs sql", "delta-rs pyarrow", *R.WITH_DUCKDB)

B = (
    '  - upstream: "shop.b"\n    name: b\n    accept_reader_loss: true\n'
    "    properties:\n      delta.enableRowTracking: true\n"
)


def _tables(root: Path, a: str) -> None:
    (root / "tables" / "t.yml").write_text(f'tables:\n  - upstream: "shop.a"\n    name: a\n{a}{B}')


def _send(root: Path, u: Shop, start: int) -> int:
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    return len(u.p.records)


def _run(spark, root: Path) -> None:
    lines: list[str] = []
    assert runner.run(load(root), spark=spark, out=lines.append) == 0, "\n".join(lines)


def _detail(spark, loc: str):
    return spark.sql(f"DESCRIBE DETAIL delta.`{loc}`").first()


def _rows(spark, loc: str) -> list[tuple]:
    return sorted(
        tuple(r) for r in spark.read.format("delta").load(loc).select("id", "n").collect()
    )


def _truth(u: Shop, table: str) -> list[tuple]:
    return sorted((r["id"], r["n"]) for r in u.rows[table].values())


def _plan(root: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(["plan", "--project", str(root), "--detailed-exitcode"])
    return code, capsys.readouterr().out


def test_properties_and_comment_changed_in_the_yaml(spark, tmp_path, capsys) -> None:
    u = Shop("canal-json", partitions=1)
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc")
    _tables(
        root,
        "    comment: A v1\n    properties:\n      team: data\n      delta.checkpointInterval: 20\n",
    )
    for t in ("a", "b"):
        u.ddl(t, f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, n INT)", 3)
        for i in range(1, 4):
            u.insert(t, id=i, n=i)
    sent = _send(root, u, 0)
    _run(spark, root)
    wh = warehouse_path(load(root))
    a, b = target_location(wh, "a"), target_location(wh, "b")
    d = _detail(spark, a)
    assert d["description"] == "A v1"
    assert d["properties"]["team"] == "data"
    assert d["properties"]["delta.checkpointInterval"] == "20"
    assert json.loads(d["properties"][ENTRY_PROPERTIES]) == ["delta.checkpointInterval", "team"]
    assert "rowTracking" in DeltaTable(b).protocol().writer_features

    # Changed in the YAML; a property set by hand beside them.
    spark.sql(f"ALTER TABLE delta.`{a}` SET TBLPROPERTIES ('by_hand' = 'x')")
    _tables(root, "    comment: A v2\n    properties:\n      team: sales\n      tier: 2\n")
    code, shown = _plan(root, capsys)
    assert code == 2
    assert "properties: set team=sales, tier=2; unset delta.checkpointInterval; comment 'A v2'" in (
        shown
    )
    # Updates and a delete for the row-tracking target: the MERGE, never delta-rs's commits;
    # an update of `a`, landed by delta-rs (not the MERGE) after its properties step.
    u.update("a", 1, n=10)
    u.update("b", 1, n=10)
    u.delete("b", 2)
    u.insert("b", id=4, n=4)
    _send(root, u, sent)
    play = run_resuming(spark, root, "layout.properties", target="a")
    assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes

    d = _detail(spark, a)
    props = d["properties"]
    assert d["description"] == "A v2"
    assert props["team"] == "sales" and props["tier"] == "2" and props["by_hand"] == "x"
    assert "delta.checkpointInterval" not in props
    assert json.loads(props[ENTRY_PROPERTIES]) == ["team", "tier"]
    assert DeltaTable(a).metadata().description == "A v2"
    R.assert_reads_as_spark(spark, a, R_ALL)
    assert _rows(spark, a) == _truth(u, "a")
    assert DeltaTable(a).history(1)[0]["operation"] != "MERGE"

    assert DeltaTable(b).history(1)[0]["operation"] == "MERGE"
    assert _rows(spark, b) == _truth(u, "b")
    assert "rowTracking" in DeltaTable(b).protocol().writer_features

    code, shown = _plan(root, capsys)
    assert code == 0, shown
    assert "properties:" not in shown
