"""RENAME TABLE lands exactly whatever the target names sort as: to a name that sorts before
the old one, chains over two commits, and a swap of two tables in one statement.

The order in which the targets of a rename are applied must not decide what lands: the DDL
timeline replays a source's DDL once for all targets, and rows that move between targets
are copied as of just before the rename (issue: `customers` -> `clients` failed with
"RenameTables on a table with no known schema" while `customers` -> `zclients` worked).
"""

from __future__ import annotations

import pytest

from testkit.encode import DdlChange
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.test_ddl_engine_kinds import PROTOCOLS, Upstream
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark


def rows(spark, project, name: str) -> list[tuple]:
    return [
        tuple(v for k, v in r.items() if k != "_commit_ts")
        for r in read_target(spark, project, name, "id")
    ]


def rename_many(u: Upstream, pairs: list[tuple[str, str]], action: int = 47) -> int:
    """One multi-table RENAME at one commit_ts, sent as TiCDC splits it: one DDL event per
    pair, keyed under its new name (codec facts 0.5)."""
    ts = u.ts()
    for old, new in pairs:
        schema = u.tables.pop(old).with_(table=new)
        u.tables[new] = schema
        u.rows[new] = u.rows.pop(old, {})
        sql = f"RENAME TABLE `shop`.`{old}` TO `shop`.`{new}`"
        u.p.send_ddl(DdlChange("shop", new, sql, action, ts, schema, "shop", old))
    return ts


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rename_to_a_name_that_sorts_first(spark, tmp_path, protocol):
    u = Upstream(protocol)
    u.ddl("customers", "CREATE TABLE shop.customers (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("customers", id=1, v="one")
    u.insert("customers", id=2, v="two")
    u.ddl("customers", "ALTER TABLE shop.customers ADD COLUMN n INT NOT NULL DEFAULT 3", 5)
    u.insert("customers", id=3, v="three", n=30)
    u.ddl("clients", "RENAME TABLE shop.customers TO shop.clients", 14, old="customers")
    u.insert("clients", id=4, v="four", n=40)
    u.update("clients", 1, v="uno")
    u.watermark()
    root = make_project(tmp_path / protocol, protocol=protocol, topic="cdc")
    write_captures(root, "cdc", u.records())
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert rows(spark, project, "clients") == [
        (1, "uno", 3),
        (2, "two", 3),
        (3, "three", 30),
        (4, "four", 40),
    ]
    assert rows(spark, project, "customers") == []  # moved to clients, as upstream


def test_chains_and_swaps(spark, tmp_path):
    u = Upstream("canal-json")
    for t in ("a", "x", "y"):
        u.ddl(t, f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("a", id=1, v="a1")
    u.insert("x", id=1, v="x1")
    u.insert("y", id=2, v="y2")
    # A chain over two commits: a -> b, then rows, then b -> c.
    u.ddl("b", "RENAME TABLE shop.a TO shop.b", 14, old="a")
    u.insert("b", id=2, v="b2")
    u.ddl("c", "RENAME TABLE shop.b TO shop.c", 14, old="b")
    u.insert("c", id=3, v="c3")
    # A swap in one statement: x -> tmp, y -> x, tmp -> y.
    rename_many(u, [("x", "tmp"), ("y", "x"), ("tmp", "y")])
    u.insert("x", id=5, v="now x")
    u.insert("y", id=6, v="now y")
    u.watermark()
    root = make_project(tmp_path / "chain", protocol="canal-json", topic="cdc")
    write_captures(root, "cdc", u.records())
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert rows(spark, project, "c") == [(1, "a1"), (2, "b2"), (3, "c3")]
    assert rows(spark, project, "a") == [] and rows(spark, project, "b") == []
    assert rows(spark, project, "x") == [(2, "y2"), (5, "now x")]
    assert rows(spark, project, "y") == [(1, "x1"), (6, "now y")]
    # Running again changes nothing.
    assert runner.run(project, spark=spark, out=lines.append) == 0
    assert rows(spark, project, "x") == [(2, "y2"), (5, "now x")]


def test_a_ghost_cut_over_blocks_until_the_ghost_table_is_routed(spark, tmp_path):
    """gh-ost's cut-over with only `orders` routed: `_orders_gho` holds every row plus the
    new column, and `RENAME TABLE orders TO _orders_del, _orders_gho TO orders` makes it
    `orders`. Following that rename from a table whose rows were never applied would empty
    the target; it blocks instead, and routing the ghost table lets the rows move in."""
    u = Upstream("canal-json")
    u.ddl("orders", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("orders", id=1, v="one")
    u.insert("orders", id=2, v="two")
    u.ddl("_orders_gho", "CREATE TABLE shop._orders_gho (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("_orders_gho", "ALTER TABLE shop._orders_gho ADD COLUMN n INT", 5)
    u.insert("_orders_gho", id=1, v="one")  # gh-ost's row copy
    u.insert("_orders_gho", id=2, v="two")
    u.update("orders", 2, v="TWO")  # a change during the copy, mirrored from the binlog
    u.update("_orders_gho", 2, v="TWO")
    cut = rename_many(u, [("orders", "_orders_del"), ("_orders_gho", "orders")])
    u.insert("orders", id=3, v="three", n=30)
    u.watermark()
    only_orders = '  - upstream: "shop.orders"\n    name: "orders"\n'
    root = make_project(tmp_path / "gho", protocol="canal-json", topic="cdc", tables=only_orders)
    write_captures(root, "cdc", u.records())
    lines: list[str] = []
    assert runner.run(load(root), spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    assert f"target orders is blocked at commit_ts {cut}" in text, text
    assert "shop._orders_gho" in text
    # Stopped just before the rename, with the rows it had: nothing lost, nothing emptied.
    assert rows(spark, load(root), "orders") == [(1, "one"), (2, "TWO")]

    (root / "tables" / "t.yml").write_text(
        "tables:\n" + only_orders + '  - upstream: "shop._orders_gho"\n    name: "orders_gho"\n'
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert rows(spark, project, "orders") == [(1, "one", None), (2, "TWO", None), (3, "three", 30)]
    assert rows(spark, project, "orders_gho") == []  # its rows moved with the rename
