"""Every reader reads every target after any DDL, under the default `table_features`.

By default (`column_mapping: auto`, `type_widening: auto`) a target smaller than
`table_features.rebuild_below` (1 GiB) is rewritten by the DDL that would need column mapping
or type widening, so polars, delta-rs's SQL path and its `to_pyarrow_table` / `to_pandas`
keep reading it: after each DDL kind, each of them returns exactly Spark's columns and rows,
and Spark's rows are upstream's. Above the threshold (set to 0 here) the feature is enabled
instead, and `plan` says which a DDL does and why.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from tests.spark import readers as R
from tests.spark.engine_harness import make_project, write_captures
from tests.spark.test_readers import ALL, CM, DV, TW, Shop, _loc, _plan, _rows, _run

pytestmark = pytest.mark.spark

# Every table the history below ends with, and its rows upstream (without `_commit_ts`).
TRUTH = {
    "addc": [(1, "a", 7), (2, "b", 9)],
    "dropc": [(1, "a"), (2, "b")],
    "ren": [(1, "A"), (2, "b")],
    "wint": [(1, 1), (2, 2**40)],
    "wvar": [(1, "a"), (2, "a-longer-value")],
    "wdec": [(1, Decimal("1.50")), (2, Decimal("123456789012.34"))],
    "multi": [(1, 5, "one", Decimal("1.50")), (2, 2**40, "a-longer-value", Decimal("1e11"))],
    "nar": [(1, 7), (2, 8)],
    "b2": [(1, "b1 new"), (2, "b2"), (3, "b3")],
    "tr": [(3, "kept")],
    "pk": [(1, "a", 1), (2, "b", 20), (3, "c", 3)],
}
GONE = ("b",)  # renamed away: emptied


def created() -> Shop:
    """One table per DDL kind, with rows: what the first run applies."""
    u = Shop("canal-json", partitions=1)
    u.ddl("addc", "CREATE TABLE shop.addc (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("addc", id=1, v="a")
    u.ddl("dropc", "CREATE TABLE shop.dropc (id INT PRIMARY KEY, v VARCHAR(10), gone INT)", 3)
    u.insert("dropc", id=1, v="a", gone=1)
    u.ddl("ren", "CREATE TABLE shop.ren (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("ren", id=1, v="a")
    u.ddl("wint", "CREATE TABLE shop.wint (id INT PRIMARY KEY, n INT)", 3)
    u.insert("wint", id=1, n=1)
    u.ddl("wvar", "CREATE TABLE shop.wvar (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("wvar", id=1, v="a")
    u.ddl("wdec", "CREATE TABLE shop.wdec (id INT PRIMARY KEY, d DECIMAL(10,2))", 3)
    u.insert("wdec", id=1, d=Decimal("1.50"))
    u.ddl(
        "multi",
        "CREATE TABLE shop.multi (id INT PRIMARY KEY, c INT, w VARCHAR(10), d DECIMAL(10,2))",
        3,
    )
    u.insert("multi", id=1, c=5, w="one", d=Decimal("1.50"))
    u.ddl("nar", "CREATE TABLE shop.nar (id INT PRIMARY KEY, n BIGINT)", 3)
    u.insert("nar", id=1, n=7)
    u.ddl("b", "CREATE TABLE shop.b (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("b", id=1, v="b1")
    u.insert("b", id=2, v="b2")
    u.ddl("tr", "CREATE TABLE shop.tr (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("tr", id=1, v="gone")
    u.ddl("pk", "CREATE TABLE shop.pk (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL, v INT)", 3)
    u.insert("pk", id=1, code="a", v=1)
    u.insert("pk", id=2, code="b", v=2)
    u.watermark()
    return u


def changed(u: Shop) -> None:
    """Each table's DDL, with rows after it; no watermark after them yet (the caller sends
    it), so that a run stages them and `plan` shows them pending."""
    u.ddl("addc", "ALTER TABLE shop.addc ADD COLUMN n INT NOT NULL DEFAULT 7", 5)
    u.insert("addc", id=2, v="b", n=9)
    u.ddl("dropc", "ALTER TABLE shop.dropc DROP COLUMN gone", 6)
    u.insert("dropc", id=2, v="b")
    u.ddl("ren", "ALTER TABLE shop.ren RENAME COLUMN v TO title", 12)
    u.update("ren", 1, title="A")
    u.insert("ren", id=2, title="b")
    u.ddl("wint", "ALTER TABLE shop.wint MODIFY COLUMN n BIGINT", 13)
    u.insert("wint", id=2, n=2**40)
    u.ddl("wvar", "ALTER TABLE shop.wvar MODIFY COLUMN v VARCHAR(20)", 13)
    u.insert("wvar", id=2, v="a-longer-value")
    u.ddl("wdec", "ALTER TABLE shop.wdec MODIFY COLUMN d DECIMAL(14,2)", 13)
    u.insert("wdec", id=2, d=Decimal("123456789012.34"))
    # Several changes in one ALTER: one rewrite each, each its own commit.
    u.ddl(
        "multi",
        "ALTER TABLE shop.multi MODIFY COLUMN c BIGINT, MODIFY COLUMN d DECIMAL(14,2), "
        "MODIFY COLUMN w VARCHAR(20)",
        61,
    )
    u.insert("multi", id=2, c=2**40, w="a-longer-value", d=Decimal("1e11"))
    # Narrowing: `narrow_column: rebuild` (a DDL policy; fail by default) rewrites it.
    u.ddl("nar", "ALTER TABLE shop.nar MODIFY COLUMN n INT", 12)
    u.insert("nar", id=2, n=8)
    u.ddl("b2", "RENAME TABLE shop.b TO shop.b2", 14, old="b")
    u.insert("b2", id=3, v="b3")
    u.update("b2", 1, v="b1 new")
    u.ddl("tr", "TRUNCATE TABLE shop.tr", 11)
    u.insert("tr", id=3, v="kept")
    # A key change (TiDB's multi-schema change, action 61).
    u.ddl("pk", "ALTER TABLE shop.pk DROP PRIMARY KEY, ADD PRIMARY KEY (code)", 61)
    u.insert("pk", id=3, code="c", v=3)
    u.update("pk", 2, v=20)


def _project(root: Path, u: Shop, features: str = "") -> Path:
    defaults = "defaults:\n  ddl:\n    narrow_column: rebuild\n"
    if features:
        defaults += f"  table_features:\n{features}"
    make_project(root, protocol="canal-json", topic="cdc", defaults=defaults)
    write_captures(root, "cdc", u.records())
    return root


def test_every_reader_reads_every_target_after_each_ddl_kind_by_default(
    spark, tmp_path, capsys
) -> None:
    u = created()
    changed(u)
    root = _project(tmp_path / "p", u)
    code, out = _run(spark, root)
    assert code == 0, out
    # Each DDL that would need a feature rewrites its small target instead; plan says why,
    # with the target's size as its Delta log gives it.
    shown = _plan(root, capsys)
    why = re.findall(r"\(rewrites the table: target ([0-9.]+ (?:B|KiB)) < "
                     r"table_features\.rebuild_below 1 GiB, keeps every reader\)  \[", shown)  # fmt: skip
    # dropc, ren, wint, wdec, multi (c and d: w stays a STRING); nar's narrowing is a
    # rewrite by its own policy.
    assert len(why) == 6, shown
    assert all(size != "0 B" for size in why), why
    assert "adds table feature" not in shown
    start = len(u.p.records)
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    code, out = _run(spark, root)
    assert code == 0, out
    for name, rows in TRUTH.items():
        loc = _loc(root, name)
        assert not R.reader_features(loc) & {CM, TW, DV}, name
        assert _rows(spark, loc) == rows, name
        # polars, delta-rs SQL, to_pyarrow_table and to_pandas: Spark's columns and rows.
        R.assert_reads_as_spark(spark, loc, ALL)
    for name in GONE:
        assert _rows(spark, _loc(root, name)) == []
    names = lambda n: [f.name for f in spark.read.format("delta").load(_loc(root, n)).schema]  # noqa: E731
    assert names("ren") == ["id", "title", "_commit_ts"]
    assert names("dropc") == ["id", "v", "_commit_ts"]
    types = dict(spark.read.format("delta").load(_loc(root, "multi")).dtypes)
    assert (types["c"], types["d"], types["w"]) == ("bigint", "decimal(14,2)", "string")


def test_above_rebuild_below_the_feature_is_enabled_and_plan_says_why(
    spark, tmp_path, capsys
) -> None:
    u = Shop("canal-json", partitions=1)
    u.ddl("r", "CREATE TABLE shop.r (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("r", id=1, v="a")
    u.ddl("w", "CREATE TABLE shop.w (id INT PRIMARY KEY, n INT)", 3)
    u.insert("w", id=1, n=1)
    u.watermark()
    u.ddl("r", "ALTER TABLE shop.r RENAME COLUMN v TO title", 12)
    u.insert("r", id=2, title="b")
    u.ddl("w", "ALTER TABLE shop.w MODIFY COLUMN n BIGINT", 13)
    u.insert("w", id=2, n=2**40)
    root = _project(tmp_path / "p", u, "    rebuild_below: 0\n")
    code, out = _run(spark, root)
    assert code == 0, out
    shown = _plan(root, capsys)
    assert "adds table feature: columnMapping" in shown
    assert "adds table feature: typeWidening" in shown
    assert "enables columnMapping: target " in shown
    assert ">= table_features.rebuild_below 0 B; polars and delta-rs to_pyarrow_table" in shown
    start = len(u.p.records)
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    code, out = _run(spark, root)
    assert code == 0, out
    r, w = _loc(root, "r"), _loc(root, "w")
    assert CM in R.reader_features(r) and TW in R.reader_features(w)
    assert _rows(spark, r) == [(1, "a"), (2, "b")] and _rows(spark, w) == [(1, 1), (2, 2**40)]
    R.assert_reads_as_spark(spark, r, ("delta-rs sql", *R.WITH_DUCKDB))
    # Back under the default threshold: the small targets lose the features again.
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  ddl:\n    narrow_column: rebuild\n"
    )
    shown = _plan(root, capsys)
    assert "drop table feature columnMapping" in shown
    assert "`table_features.column_mapping: auto`: target " in shown
    code, out = _run(spark, root)
    assert code == 0, out
    for loc in (r, w):
        assert not R.reader_features(loc) & {CM, TW, DV}, loc
        R.assert_reads_as_spark(spark, loc, ALL)
