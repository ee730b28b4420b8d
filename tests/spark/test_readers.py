"""Targets read by polars and delta-rs exactly as Spark reads them, after each DDL kind.

A target carries only the table features its upstream history needs: a table that is never
renamed, dropped or widened upstream stays readable by polars and delta-rs, its
`to_pyarrow_table` and `to_pandas` included (no deletion vectors unless asked); the first
RENAME/DROP COLUMN enables column mapping and the first widening MODIFY type widening (with
`enable`; the default `auto` does so only on large targets: test_readers_ddl.py), each in
its own commit (crash-safe: a run killed between that commit and the change resumes with the
change). The `table_features` setting keeps them off (the table is rewritten instead, or
blocked), drops them from existing targets and turns deletion vectors on and off again.
"""

from __future__ import annotations

import datetime as dt
import shutil
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from testkit.encode import RowChange
from tests.spark import readers as R
from tests.spark.engine_harness import load, make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from ticdc_sync.commands.cli import main as cli_main
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import ddl_commit
from ticdc_sync.warehouse.locations import legacy_path_segment, target_location, warehouse_path

pytestmark = pytest.mark.spark

# Every reader, and the ones that read a table with deletion vectors (delta-rs's pyarrow
# and pandas paths refuse them; its SQL path, polars and DuckDB read them).
ALL = ("polars", "delta-rs sql", "delta-rs pyarrow", "delta-rs pandas", *R.WITH_DUCKDB)
WITH_DV = ("polars", "delta-rs sql", *R.WITH_DUCKDB)
CM, TW, DV = "columnMapping", "typeWidening", "deletionVectors"


class Shop(Upstream):
    def delete(self, table: str, id: int) -> None:
        before = self._full(table, self.rows[table].pop(id))
        self.p.send_row(RowChange(self.tables[table], "D", before, None, self.ts()), 0)


def history() -> Shop:
    """k: every row change and an ADD COLUMN, never renamed, dropped or widened.
    r: RENAME and DROP COLUMN. w: a widening MODIFY. Rows before and after each DDL. The
    last watermark is before r's and w's DDL: the caller sends the one after them."""
    u = Shop("canal-json", partitions=1)
    u.ddl(
        "k",
        "CREATE TABLE shop.k (id INT PRIMARY KEY, v VARCHAR(10), amount DECIMAL(10,2), "
        "at DATETIME(3), seen TIMESTAMP(6) NULL)",
        3,
    )
    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123000)
    for i in range(1, 5):
        u.insert("k", id=i, v=f"v{i}", amount=Decimal(f"{i}.50"), at=at, seen=at)
    u.update("k", 2, v="two")
    u.delete("k", 3)
    u.ddl("k", "ALTER TABLE shop.k ADD COLUMN n INT NOT NULL DEFAULT 7", 5)
    u.insert("k", id=5, v="five", amount=Decimal("5.00"), at=at, n=1)
    u.ddl("r", "CREATE TABLE shop.r (id INT PRIMARY KEY, v VARCHAR(10), gone INT)", 3)
    u.insert("r", id=1, v="a", gone=1)
    u.insert("r", id=2, v="b", gone=2)
    u.ddl("w", "CREATE TABLE shop.w (id INT PRIMARY KEY, n INT)", 3)
    u.insert("w", id=1, n=1)
    u.watermark()
    u.ddl("r", "ALTER TABLE shop.r RENAME COLUMN v TO title", 12)
    u.update("r", 1, title="A")
    u.ddl("r", "ALTER TABLE shop.r DROP COLUMN gone", 6)
    u.insert("r", id=3, title="c")
    u.ddl("w", "ALTER TABLE shop.w MODIFY COLUMN n BIGINT", 13)
    u.insert("w", id=2, n=2**40)
    return u


TRUTH = {
    "r": [(1, "A"), (2, "b"), (3, "c")],
    "w": [(1, 1), (2, 2**40)],
}


def _project(root: Path, u: Upstream, features: str = "") -> Path:
    defaults = f"defaults:\n  table_features:\n{features}" if features else ""
    make_project(root, protocol="canal-json", topic="cdc", defaults=defaults)
    write_captures(root, "cdc", u.records())
    return root


def _set_features(root: Path, features: str) -> None:
    text = "name: test\nprofile: test\n"
    if features:
        text += f"defaults:\n  table_features:\n{features}"
    (root / "ticdc_sync.yml").write_text(text)


def _run(spark, root: Path) -> tuple[int, str]:
    lines: list[str] = []
    code = runner.run(load(root), spark=spark, out=lambda s: (lines.append(s), print(s)))
    return code, "\n".join(lines)


def _plan(root: Path, capsys) -> str:
    capsys.readouterr()
    assert cli_main(["plan", "--project", str(root)]) == 0
    return capsys.readouterr().out


def _loc(root: Path, name: str) -> str:
    return target_location(warehouse_path(load(root)), name)


def _rows(spark, loc: str) -> list[tuple]:
    return sorted(tuple(r)[:-1] for r in spark.read.format("delta").load(loc).collect())


# What every target did before `auto` became the default: the feature at the first DDL that
# needs it, whatever the size.
ENABLE = "    column_mapping: enable\n    type_widening: enable\n"
OFF = "    deletion_vectors: false\n    column_mapping: rebuild\n    type_widening: rebuild\n"


def test_only_what_the_history_needs_and_the_setting_in_both_directions(
    spark, tmp_path, capsys
) -> None:
    u = history()
    root = _project(tmp_path / "p", u, ENABLE)
    code, out = _run(spark, root)
    assert code == 0, out
    # r's and w's DDL are staged, beyond the resolved TSO: plan shows what they will add.
    shown = _plan(root, capsys)
    assert shown.count("adds table feature: columnMapping") == 1  # r's RENAME, not its DROP
    assert shown.count("adds table feature: typeWidening") == 1  # w's MODIFY
    # Column mapping comes with timestampNtz (reader version 3, for DuckDB): r has no
    # DATETIME column, so it gains both.
    assert "(+ columnMapping, + timestampNtz)" in shown and "(+ typeWidening)" in shown
    start = len(u.p.records)
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    code, out = _run(spark, root)
    assert code == 0, out
    k, r, w = (_loc(root, n) for n in "krw")
    assert R.reader_features(k) == {"timestampNtz"}  # no deletion vectors by default
    assert CM in R.reader_features(r) and TW not in R.reader_features(r)
    assert TW in R.reader_features(w) and CM not in R.reader_features(w)
    assert "allowColumnDefaults" not in R.features(spark, k)
    # k was never renamed, dropped or widened: polars and delta-rs read it as Spark does,
    # to_pyarrow_table and to_pandas too.
    R.assert_reads_as_spark(spark, k, ALL)
    assert _rows(spark, k)[1][1] == "two" and len(_rows(spark, k)) == 4
    assert [x[:2] for x in _rows(spark, r)] == TRUTH["r"] and _rows(spark, w) == TRUTH["w"]
    # Column mapping: delta-rs's SQL path and DuckDB read it; polars refuses (it says so, no
    # wrong data).
    R.assert_reads_as_spark(spark, r, ("delta-rs sql", *R.WITH_DUCKDB))
    with pytest.raises(Exception, match="column mapping|columnMapping"):
        pl.read_delta(r)
    with pytest.raises(Exception, match="typeWidening"):
        pl.read_delta(w)
    # Type widening: DuckDB reads it.
    R.assert_reads_as_spark(spark, w, R.WITH_DUCKDB)

    # Switched off: the next run drops the features from the existing targets.
    _set_features(root, OFF)
    shown = _plan(root, capsys)
    assert "drop table feature columnMapping" in shown and "- typeWidening" in shown
    code, out = _run(spark, root)
    assert code == 0, out
    for loc in (k, r, w):
        assert not R.reader_features(loc) & {CM, TW, DV}, loc
        R.assert_reads_as_spark(spark, loc, ALL)
    assert [x[:2] for x in _rows(spark, r)] == TRUTH["r"] and _rows(spark, w) == TRUTH["w"]
    assert "drop table feature" not in _plan(root, capsys)  # done: nothing left to drop

    # Asked for: deletion vectors come on; column mapping and widening wait for a DDL.
    _set_features(root, "    deletion_vectors: true\n" + ENABLE)
    assert "enable table feature deletionVectors" in _plan(root, capsys)
    code, out = _run(spark, root)
    assert code == 0, out
    start = len(u.p.records)
    u.update("k", 2, v="deux")  # a MERGE that marks the row it replaces
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    code, out = _run(spark, root)
    assert code == 0, out
    for loc in (k, r, w):
        assert DV in R.reader_features(loc) and not R.reader_features(loc) & {CM, TW}
        R.assert_reads_as_spark(spark, loc, WITH_DV)
    with pytest.raises(Exception, match="(?i)deletion ?vectors"):
        R.read("delta-rs pyarrow", k)

    # Back to the default: the targets that have them lose them again (under `auto`, small
    # ones lose column mapping and type widening too); every reader reads.
    _set_features(root, "")
    assert "drop table feature deletionVectors" in _plan(root, capsys)
    code, out = _run(spark, root)
    assert code == 0, out
    for loc in (k, r, w):
        assert not R.reader_features(loc) & {CM, TW, DV}, loc
        R.assert_reads_as_spark(spark, loc, ALL)
    assert _rows(spark, k)[1][1] == "deux"


def test_rebuild_keeps_every_target_readable_and_fail_blocks(spark, tmp_path, capsys) -> None:
    u = history()
    u.watermark()
    root = _project(
        tmp_path / "p",
        u,
        "    deletion_vectors: false\n    column_mapping: fail\n    type_widening: enable\n",
    )
    code, out = _run(spark, root)
    assert code == 1
    assert "target r is blocked" in out and "needs the Delta table feature columnMapping" in out
    assert "table_features.column_mapping: rebuild" in out
    assert [x[:2] for x in _rows(spark, _loc(root, "r"))] == [(1, "a"), (2, "b")]
    # w widened by type widening; k as always.
    assert TW in R.reader_features(_loc(root, "w"))

    _set_features(root, OFF)
    code, out = _run(spark, root)
    assert code == 0, out
    for name in "krw":
        loc = _loc(root, name)
        assert not R.reader_features(loc) & {CM, TW, DV}, name
        R.assert_reads_as_spark(spark, loc, ALL)
    r = _loc(root, "r")
    assert [x[:2] for x in _rows(spark, r)] == TRUTH["r"]
    assert [f.name for f in spark.read.format("delta").load(r).schema] == [
        "id",
        "title",
        "_commit_ts",
    ]
    assert _rows(spark, _loc(root, "w")) == TRUTH["w"]


def test_a_crash_between_enabling_the_feature_and_the_change_resumes(
    spark, tmp_path, capsys, monkeypatch
) -> None:
    u = Shop("canal-json", partitions=1)
    # A target name with a space: its folder must be readable by polars (no %20 in it).
    u.ddl("r", "CREATE TABLE shop.r (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("r", id=1, v="a")
    u.ddl("r", "ALTER TABLE shop.r RENAME COLUMN v TO title", 12)
    u.insert("r", id=2, title="b")
    u.watermark()
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        tables='  - upstream: "shop.*"\n    name: "my {table}"\n',
        defaults=f"defaults:\n  table_features:\n{ENABLE}",
    )
    write_captures(root, "cdc", u.records())
    loc = _loc(root, "my r")
    assert loc.endswith("/tables/my~20r")

    real = ddl_commit._execute

    def crash_after_enabling(w, part, m, ts):
        real(w, part, m, ts)
        if part.feature:
            raise KeyboardInterrupt("killed after the enable commit")

    monkeypatch.setattr(ddl_commit, "_execute", crash_after_enabling)
    with pytest.raises(KeyboardInterrupt):
        _run(spark, root)
    monkeypatch.undo()
    # The feature is on, the column not renamed yet; plan resumes at the change.
    assert CM in R.reader_features(loc)
    assert [f.name for f in spark.read.format("delta").load(loc).schema][:2] == ["id", "v"]
    shown = _plan(root, capsys)
    assert "(resumes at part 2 of 2)" in shown
    code, out = _run(spark, root)
    assert code == 0, out
    assert _rows(spark, loc) == [(1, "a"), (2, "b")]
    R.assert_reads_as_spark(spark, loc, ("delta-rs sql",))


def test_a_target_at_its_old_folder_name_stays_there(spark, tmp_path) -> None:
    u = Shop("canal-json", partitions=1)
    u.ddl("k", "CREATE TABLE shop.k (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("k", id=1, v="a")
    u.watermark()
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        tables='  - upstream: "shop.*"\n    name: "my {table}"\n',
    )
    write_captures(root, "cdc", u.records())
    code, out = _run(spark, root)
    assert code == 0, out
    new = _loc(root, "my k")
    R.assert_reads_as_spark(spark, new, ALL)
    # As an earlier version left it: the same table under the %-escaped folder name.
    old = f"{warehouse_path(load(root))}/tables/{legacy_path_segment('my k')}"
    assert old.endswith("/tables/my%20k")
    shutil.move(new, old)
    start = len(u.p.records)
    u.insert("k", id=2, v="b")
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    code, out = _run(spark, root)
    assert code == 0, out
    assert not Path(new).exists()
    assert _rows(spark, old) == [(1, "a"), (2, "b")]
