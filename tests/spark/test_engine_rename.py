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
