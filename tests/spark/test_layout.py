"""Targets laid out by their table entry (`partition_by`, `cluster_by`): created partitioned
or clustered on every create path (an upstream CREATE TABLE, an initial load's), and exact on
every apply path that lands their rows (the first INSERT into an empty target, the MERGE
with updates that move a row to another partition and deletes, the insert-only append, the
load), every row compared with upstream's. The plan keeps them off the rewrite and the round
(delta-rs's commits do not keep a layout). polars and delta-rs read them as Spark does, and
the targets' maintenance clusters a clustered one. A layout changed in the YAML: clustering
in place, a new partitioning rebuilt, each stopped at its crash point and resumed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from testkit.dumpling import write_export
from testkit.encode import RowChange
from tests.spark import readers as R
from tests.spark.crash_harness import run_resuming
from tests.spark.engine_harness import canal_watermark, load, make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from tests.spark.test_initial_load import S, T, ts
from tests.spark.test_initial_load import row as load_row
from ticdc_sync.commands.cli import main as cli_main
from ticdc_sync.core.model import Maintenance
from ticdc_sync.run.engine import MaintainJob
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply.maintain import Memory, maintain
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

# Every reader but Spark (DuckDB where its Delta extension is installed).
R_ALL = ("polars", "delta-rs sql", "delta-rs pyarrow", "delta-rs pandas", *R.WITH_DUCKDB)

TABLES = (
    '  - upstream: "shop.p"\n    name: p\n    partition_by: [region]\n'
    '  - upstream: "shop.c"\n    name: c\n    cluster_by: [region]\n'
)


class Shop(Upstream):
    def delete(self, table: str, id: int) -> None:
        before = self._full(table, self.rows[table].pop(id))
        self.p.send_row(RowChange(self.tables[table], "D", before, None, self.ts()), 0)


def _run(spark, root: Path) -> str:
    lines: list[str] = []
    code = runner.run(load(root), spark=spark, out=lines.append)
    assert code == 0, "\n".join(lines)
    return "\n".join(lines)


def _loc(root: Path, name: str) -> str:
    return target_location(warehouse_path(load(root)), name)


def _rows(spark, loc: str) -> list[tuple]:
    df = spark.read.format("delta").load(loc).select("id", "region", "n")
    return sorted(tuple(r) for r in df.collect())


def _truth(u: Shop, table: str) -> list[tuple]:
    return sorted((r["id"], r["region"], r["n"]) for r in u.rows[table].values())


def _last_operation(loc: str) -> str:
    return DeltaTable(loc).history(1)[0]["operation"]


def _folders(loc: str) -> set[str]:
    """The partition folders the live files are in."""
    adds = DeltaTable(loc).get_add_actions(flatten=True).column("path").to_pylist()
    return {path.split("/")[0] for path in adds}


def _send(root: Path, u: Shop, start: int) -> int:
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    return len(u.p.records)


def test_partitioned_and_clustered_targets_on_every_row_path(spark, tmp_path) -> None:
    u = Shop("canal-json", partitions=1)
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc", tables=TABLES)
    for t in ("p", "c"):
        u.ddl(t, f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, region VARCHAR(8), n INT, x INT)", 3)
        for i in range(1, 5):
            u.insert(t, id=i, region="eu" if i % 2 else "us", n=i, x=i)
    sent = _send(root, u, 0)
    _run(spark, root)  # created, then its rows INSERTed into the empty target
    p, c = _loc(root, "p"), _loc(root, "c")
    assert DeltaTable(p).metadata().partition_columns == ["region"]
    assert spark.sql(f"DESCRIBE DETAIL delta.`{c}`").first()["clusteringColumns"] == ["region"]
    assert {"clustering", "domainMetadata"} <= set(DeltaTable(c).protocol().writer_features)
    for t in ("p", "c"):
        assert _rows(spark, _loc(root, t)) == _truth(u, t)

    # Updates that move rows to another partition (one to NULL's), a delete, an insert: the
    # MERGE (a target this small would take the round or the rewrite without its layout).
    for t in ("p", "c"):
        u.update(t, 1, region="us")
        u.update(t, 3, region=None, n=30)
        u.update(t, 4, n=40)
        u.delete(t, 2)
        u.insert(t, id=5, region="ap", n=5)
    sent = _send(root, u, sent)
    _run(spark, root)
    for t in ("p", "c"):
        assert _last_operation(_loc(root, t)) == "MERGE", t
        assert _rows(spark, _loc(root, t)) == _truth(u, t), t
    # One folder per partition value: none left live for `eu`, whose rows all moved away.
    assert _folders(p) == {"region=us", "region=ap", "region=__HIVE_DEFAULT_PARTITION__"}

    # A DROP COLUMN of another column (a small target: rewritten without it, keeping its
    # layout), then new keys only: appended (the insert-only path), still laid out.
    for t in ("p", "c"):
        u.ddl(t, f"ALTER TABLE shop.{t} DROP COLUMN x", 6)
        u.insert(t, id=6, region="eu", n=6)
        u.insert(t, id=7, region="sa", n=7)
    _send(root, u, sent)
    _run(spark, root)
    assert DeltaTable(p).metadata().partition_columns == ["region"]
    assert spark.sql(f"DESCRIBE DETAIL delta.`{c}`").first()["clusteringColumns"] == ["region"]
    for t in ("p", "c"):
        assert "x" not in spark.read.format("delta").load(_loc(root, t)).columns
        assert _last_operation(_loc(root, t)) == "WRITE", t
        assert _rows(spark, _loc(root, t)) == _truth(u, t), t
        R.assert_reads_as_spark(spark, _loc(root, t), R_ALL)
    assert "region=sa" in _folders(p)

    # The targets' maintenance compacts the clustered one by clustering it (its OPTIMIZE).
    job = MaintainJob("c", c, Maintenance(compact_small_files=2, vacuum_every_ms=10**12))
    assert maintain(spark, job, Memory()).compacted
    done = DeltaTable(c).history(1)[0]
    assert done["operation"] == "OPTIMIZE"
    assert json.loads(done["operationParameters"]["clusterBy"]) == ["region"]
    assert _rows(spark, c) == _truth(u, "c")


def test_a_partitioned_target_loaded_from_an_export_then_moved(spark, tmp_path) -> None:
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables='  - upstream: "shop.t"\n    name: t\n    partition_by: [v]\n'
        '  - upstream: "shop.u"\n    name: u\n    cluster_by: [v]\n',
    )
    exported = [
        {"id": 1, "v": "a", "n": Decimal("1.50")},
        {"id": 2, "v": "b", "n": None},
        {"id": 3, "v": "a", "n": Decimal("3.00")},
    ]
    write_export(root / "export", [(T, exported), (replace(T, table="u"), exported)], S)
    src = (root / "sources" / "s.yml").read_text() + "    initial_load:\n      dumpling: export\n"
    (root / "sources" / "s.yml").write_text(src)
    recs = [
        load_row("UPDATE", ts(11), {"id": "1", "v": "b", "n": "1.50"}, {"v": "a"}),
        load_row("DELETE", ts(12), {"id": "3", "v": "a", "n": "3.00"}),
        load_row("INSERT", ts(13), {"id": "4", "v": "c", "n": None}),
        canal_watermark(ts(14)),
    ]
    write_captures(root, "t", [(0, i, None, r) for i, r in enumerate(recs)])
    _run(spark, root)
    loc = _loc(root, "t")
    assert DeltaTable(loc).metadata().partition_columns == ["v"]
    got = sorted(tuple(r) for r in spark.read.format("delta").load(loc).select("id", "v").collect())
    assert got == [(1, "b"), (2, "b"), (4, "c")]
    assert _folders(loc) == {"v=b", "v=c"}  # no file of `a` left live
    # Clustered, and loaded: its clustering kept by the load's write.
    u = _loc(root, "u")
    assert spark.sql(f"DESCRIBE DETAIL delta.`{u}`").first()["clusteringColumns"] == ["v"]
    assert sorted(r["id"] for r in spark.read.format("delta").load(u).collect()) == [1, 2, 3]
    ops = [h["operation"] for h in DeltaTable(u).history()]
    # (Delta's overwrite cleared it: put back right after, not by a later plan.)
    assert ops[-3:] == ["CLUSTER BY", "WRITE", "CREATE TABLE"], ops


def _tables(root: Path, layout: str) -> None:
    (root / "tables" / "t.yml").write_text(
        f'tables:\n  - upstream: "shop.q"\n    name: q\n{layout}'
    )


def _plan_text(root: Path, capsys) -> str:
    capsys.readouterr()
    assert cli_main(["plan", "--project", str(root)]) in (0, 2)
    return capsys.readouterr().out


@pytest.mark.e2e
def test_a_layout_changed_in_the_yaml_stopped_and_resumed(spark, tmp_path, capsys) -> None:
    u = Shop("canal-json", partitions=1)
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc")
    _tables(root, "")
    u.ddl("q", "CREATE TABLE shop.q (id INT PRIMARY KEY, region VARCHAR(8), n INT)", 3)
    for i in range(1, 5):
        u.insert("q", id=i, region="eu" if i % 2 else "us", n=i)
    sent = _send(root, u, 0)
    _run(spark, root)
    q = _loc(root, "q")
    assert DeltaTable(q).metadata().partition_columns == []

    # Clustered: in place, its ALTER stopped as by a kill and resumed; rows still exact.
    _tables(root, "    cluster_by: [region]\n")
    assert "(in place: ALTER TABLE ... CLUSTER BY)" in _plan_text(root, capsys)
    u.update("q", 1, region="us")
    u.delete("q", 2)
    sent = _send(root, u, sent)
    play = run_resuming(spark, root, "layout.cluster", target="q")
    assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
    assert spark.sql(f"DESCRIBE DETAIL delta.`{q}`").first()["clusteringColumns"] == ["region"]
    assert _rows(spark, q) == _truth(u, "q")

    # Partitioned instead: a rebuild, stopped before its commit and resumed.
    _tables(root, "    partition_by: [region]\n")
    shown = _plan_text(root, capsys)
    assert "layout: partitioned by (region)  (was clustered by (region); " in shown
    assert "(rebuild: its rows rewritten in one commit)" in shown
    u.update("q", 3, region=None)
    u.insert("q", id=5, region="ap", n=5)
    sent = _send(root, u, sent)
    play = run_resuming(spark, root, "layout.rebuild", target="q")
    assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
    assert DeltaTable(q).metadata().partition_columns == ["region"]
    assert _rows(spark, q) == _truth(u, "q")
    assert _folders(q) == {"region=us", "region=ap", "region=__HIVE_DEFAULT_PARTITION__"}
    assert "was " not in _plan_text(root, capsys).split("q <-")[1]  # nothing left to change

    # Dropped and created again upstream: replaced by an empty table, partitioned still.
    u.ddl("q", "DROP TABLE shop.q", 4)
    u.rows["q"] = {}
    u.ddl("q", "CREATE TABLE shop.q (id INT PRIMARY KEY, region VARCHAR(8), n INT)", 3)
    u.insert("q", id=9, region="eu", n=9)
    _send(root, u, sent)
    _run(spark, root)
    assert DeltaTable(q).metadata().partition_columns == ["region"]
    assert _rows(spark, q) == _truth(u, "q") == [(9, "eu", 9)]
