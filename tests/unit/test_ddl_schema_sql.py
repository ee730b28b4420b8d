"""parse_schema_sql: CREATE TABLE files into exact upstream schemas."""

from __future__ import annotations

import glob

import pytest

from tests.shared_paths import SHARED, needs_shared
from ticdc_sync.core.errors import DdlError
from ticdc_sync.ddl import parse_schema_sql

CORPUS = str(SHARED / "corpus/canal-ddl-meta")

SQL = """
-- seed
USE shop;
CREATE TABLE `orders` (
  `id` bigint NOT NULL /*T![auto_rand] AUTO_RANDOM(5) */,
  `qty` int(11) unsigned zerofill NOT NULL DEFAULT '1' COMMENT 'how many',
  `note` text(70000) CHARACTER SET utf8mb4,
  `state` enum('new','it''s done') DEFAULT 'new',
  `tags` set('a','b') NOT NULL,
  `raw` varbinary(16),
  `code` varchar(3) CHARACTER SET binary,
  `bin` binary,
  `blob1` blob,
  `vc` varchar(10) BINARY,
  `created` timestamp(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  `flag` bit(1) DEFAULT b'0',
  `price` decimal(12,2) DEFAULT NULL,
  `d` decimal,
  `f` float(30),
  `ok` boolean,
  `dt` datetime(6),
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */,
  UNIQUE KEY `uk_code` (`code`, `raw`(4)),
  KEY `k_note` (`note`(10)),
  FULLTEXT KEY ft (note)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='all orders'
PARTITION BY HASH(`id`) PARTITIONS 4;
CREATE TABLE other.t2 (a INT PRIMARY KEY, b serial);
CREATE TABLE t3 LIKE orders;
"""


def test_types_keys_defaults() -> None:
    tables = parse_schema_sql(SQL, "ignored", "schema/x.sql")
    assert [t.qualified for t in tables] == ["shop.orders", "other.t2", "shop.t3"]
    t = tables[0]
    assert t.primary_key == ("id",)
    assert t.unique_keys == (("code", "raw"),)
    assert t.comment == "all orders"
    c = {c.name: c for c in t.columns}
    assert c["id"].nullable is False
    assert c["qty"].type_sql() == "int(11) unsigned"
    assert (c["qty"].has_default, c["qty"].default, c["qty"].comment) == (True, "1", "how many")
    assert c["note"].base == "mediumtext"  # 70000 chars * 4 bytes
    assert c["state"].members == ("new", "it's done")
    assert c["state"].default == "new"
    assert c["tags"].base == "set" and c["tags"].nullable is False
    assert (c["raw"].base, c["raw"].binary) == ("varbinary", True)
    assert (c["code"].base, c["code"].length, c["code"].binary) == ("varbinary", 3, True)
    assert (c["bin"].base, c["bin"].length, c["bin"].binary) == ("binary", 1, True)
    assert c["blob1"].binary
    assert (c["vc"].base, c["vc"].binary) == ("varchar", False)  # BINARY collation only
    assert (c["created"].fsp, c["created"].default) == (3, "CURRENT_TIMESTAMP(3)")
    assert c["flag"].default == "b'0'"
    assert (c["price"].has_default, c["price"].default) == (True, None)
    assert (c["d"].precision, c["d"].scale) == (10, 0)
    assert c["f"].base == "double"
    assert c["ok"].type_sql() == "tinyint(1)"
    assert c["dt"].fsp == 6
    t2 = tables[1]
    assert t2.primary_key == ("a",)
    assert t2.column("b").type_sql() == "bigint unsigned"
    assert t2.unique_keys == (("b",),)
    assert tables[2].columns == t.columns


def test_default_db_rules() -> None:
    tables = parse_schema_sql("CREATE TABLE a (x int); USE s2; CREATE TABLE b (x int)", "d0", "f")
    assert [t.qualified for t in tables] == ["d0.a", "s2.b"]


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("CREATE TABLE t (x int)", "no default database"),
        ("USE d;\nCREATE TABLE t (x notatype)", "f.sql:2: statement 2: unknown column type"),
        ("USE d; INSERT INTO t VALUES (1)", "only CREATE TABLE"),
        ("USE d; CREATE TABLE t (x int); CREATE TABLE t (y int)", "defined twice"),
        ("USE d; CREATE TABLE t (x int, y int, PRIMARY KEY (z))", "not a column"),
        ("USE d; CREATE TABLE t AS SELECT 1", "without a column list"),
        ("USE d; CREATE TABLE t (x int) 'oops", "tokenize"),
    ],
)
def test_errors_name_file_and_statement(sql: str, needle: str) -> None:
    with pytest.raises(DdlError) as e:
        parse_schema_sql(sql, None, "f.sql")
    assert needle in str(e.value)
    assert "f.sql" in str(e.value)
    assert "hint:" in str(e.value)


def test_if_not_exists_keeps_first() -> None:
    tables = parse_schema_sql(
        "USE d; CREATE TABLE t (a int, b int); CREATE TABLE IF NOT EXISTS t (c int)", None, "f"
    )
    assert [c.name for c in tables[0].columns] == ["a", "b"]


@needs_shared
def test_every_mysql_result_file_of_the_corpus_parses() -> None:
    files = sorted(glob.glob(f"{CORPUS}/*/mysql_*.sql")) + [
        f"{CORPUS}/create.sql",
        f"{CORPUS}/ddl_any.sql",
        f"{CORPUS}/ddl_test2.sql",
        f"{CORPUS}/ddl_test4.sql",
    ]
    assert len(files) > 100
    for f in files:
        with open(f) as fh:
            parse_schema_sql(fh.read(), "test", f)
