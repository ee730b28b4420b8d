"""Every DDL kind on real Delta targets, per protocol, through the real runner.

One upstream history per protocol (TiCDC-encoded by `testkit.encode`) walks
through CREATE TABLE from a `shop.*` route (no schema/*.sql), ADD COLUMN NOT NULL DEFAULT
with backfill, ADD COLUMN FIRST/AFTER, RENAME COLUMN then an update of it, DROP and re-ADD
of a column with the same name, widening MODIFYs, a MODIFY that keeps the Spark type,
TRUNCATE then inserts, RENAME TABLE then rows under the new name, DROP TABLE, a narrowing
MODIFY (blocked by default) and a TRUNCATE PARTITION whose rows are not computed (KEY
partitioning on a string column: TiDB hashes it under its collation). The first run must land
everything except the two blocked tables and exit 1 naming them; `plan` must show the
pending DDL; after the policy change the next run lands the rest with nothing lost.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from testkit.encode import DdlChange, RowChange, TopicProducer, make_encoder, make_tso
from tests.spark.engine_harness import (
    load,
    make_project,
    read_target,
    target_schema,
    write_captures,
)
from ticdc_sync import ddl as ddl_mod
from ticdc_sync.commands.cli import main as cli_main
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

PROTOCOLS = ["canal-json", "debezium", "open-protocol"]


class Upstream:
    """A tiny TiDB: tracks each table's schema and sends its changes through a producer."""

    def __init__(self, protocol: str, partitions: int = 2) -> None:
        self.p = TopicProducer("cdc", partitions, make_encoder(protocol))
        self.tables: dict[str, TableSchema] = {}
        self.rows: dict[str, dict[Any, dict[str, Any]]] = {}
        self.n = 0
        self.partitions = partitions

    def ts(self) -> int:
        self.n += 1
        return make_tso(1_700_000_000_000 + 1000 * self.n)

    def ddl(self, table: str, sql: str, action: int, *, old: str | None = None) -> int:
        ts = self.ts()
        base = self.tables.get(old or table)
        schema = base
        changes = []
        for st in ddl_mod.parse_ddl(sql, "shop"):
            schema, ch = ddl_mod.apply_statement(schema, st)
            changes += ch
        if old is not None:
            del self.tables[old]
            self.rows[table] = self.rows.pop(old, {})
        for row in self.rows.get(table, {}).values():  # what upstream does to existing rows
            for ch in changes:
                if isinstance(ch, ddl_mod.AddColumn):
                    col = schema.column(ch.name)
                    row[ch.name] = int(col.default) if col.default is not None else None
                elif isinstance(ch, ddl_mod.DropColumn):
                    del row[ch.name]
                elif isinstance(ch, ddl_mod.RenameColumn):
                    row[ch.new] = row.pop(ch.old)
        if schema is None:
            self.tables.pop(table, None)
        else:
            self.tables[table] = schema
        self.p.send_ddl(
            DdlChange("shop", table, sql, action, ts, schema, "shop" if old else None, old)
        )
        return ts

    def _full(self, table: str, values: dict[str, Any]) -> dict[str, Any]:
        return {c.name: values.get(c.name) for c in self.tables[table].columns}

    def _part(self, table: str) -> int:
        return sum(table.encode()) % self.partitions

    def insert(self, table: str, **values: Any) -> None:
        row = self._full(table, values)
        self.rows.setdefault(table, {})[row["id"]] = row
        ch = RowChange(self.tables[table], "I", None, row, self.ts())
        self.p.send_row(ch, self._part(table))

    def update(self, table: str, id: int, **values: Any) -> None:
        before = self._full(table, self.rows[table][id])
        after = {**before, **values}
        self.rows[table][id] = after
        self.p.send_row(
            RowChange(self.tables[table], "U", before, after, self.ts()), self._part(table)
        )

    def watermark(self) -> None:
        self.p.send_watermark(self.ts())

    def records(self, start: int = 0) -> list[tuple]:
        return [(r.partition, r.offset, r.key, r.value) for r in self.p.records[start:]]


def history(protocol: str) -> tuple[Upstream, dict[str, int]]:
    u = Upstream(protocol)
    ts: dict[str, int] = {}
    # a: column DDL of every kind.
    u.ddl("a", "CREATE TABLE shop.a (id INT PRIMARY KEY, v VARCHAR(10), n INT, d DECIMAL(10,2))", 3)
    u.insert("a", id=1, v="one", n=10, d=Decimal("1.50"))
    u.insert("a", id=2, v="two", n=20, d=Decimal("2.50"))
    u.ddl("a", "ALTER TABLE shop.a ADD COLUMN c INT NOT NULL DEFAULT 5 AFTER id", 5)
    u.ddl("a", "ALTER TABLE shop.a ADD COLUMN f VARCHAR(5) FIRST", 5)
    u.insert("a", id=3, c=9, f="x", v="three", n=30, d=Decimal("3.00"))
    u.ddl("a", "ALTER TABLE shop.a RENAME COLUMN v TO w", 12)
    u.update("a", 1, w="uno")
    u.ddl("a", "ALTER TABLE shop.a DROP COLUMN n", 6)
    u.insert("a", id=4, c=4, w="four", d=Decimal("4.00"))
    u.ddl("a", "ALTER TABLE shop.a ADD COLUMN n VARCHAR(8)", 5)
    u.update("a", 2, n="again")
    u.ddl(
        "a",
        "ALTER TABLE shop.a MODIFY COLUMN c BIGINT NOT NULL DEFAULT 5, "
        "MODIFY COLUMN d DECIMAL(14,2), MODIFY COLUMN w VARCHAR(20)",
        61,
    )
    u.insert("a", id=5, c=2**40, w="a-longer-value-here", d=Decimal("123456789012.34"))
    # t: truncate then inserts.
    u.ddl("t", "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("t", id=1, v="gone")
    u.insert("t", id=2, v="gone too")
    u.ddl("t", "TRUNCATE TABLE shop.t", 11)
    u.insert("t", id=3, v="kept")
    # b: renamed to b2, then rows under the new name.
    u.ddl("b", "CREATE TABLE shop.b (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("b", id=1, v="b1")
    u.insert("b", id=2, v="b2")
    ts["rename"] = u.ddl("b2", "RENAME TABLE shop.b TO shop.b2", 14, old="b")
    u.insert("b2", id=3, v="b3")
    u.update("b2", 1, v="b1 new")
    # g: dropped.
    u.ddl("g", "CREATE TABLE shop.g (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("g", id=1, v="g1")
    u.ddl("g", "DROP TABLE shop.g", 4)
    # x: narrowing MODIFY, blocked by default (narrow_column: fail).
    u.ddl("x", "CREATE TABLE shop.x (id INT PRIMARY KEY, n BIGINT)", 3)
    u.insert("x", id=1, n=7)
    ts["narrow"] = u.ddl("x", "ALTER TABLE shop.x MODIFY COLUMN n INT", 12)
    u.insert("x", id=2, n=8)
    u.update("x", 1, n=9)
    # p: TRUNCATE PARTITION removes rows without row events, here rows it cannot compute.
    u.ddl(
        "p",
        "CREATE TABLE shop.p (id INT, v VARCHAR(10), PRIMARY KEY (id, v)) "
        "PARTITION BY KEY (v) PARTITIONS 2",
        3,
    )
    u.insert("p", id=1, v="p1")
    ts["partition"] = u.ddl("p", "ALTER TABLE shop.p TRUNCATE PARTITION p0", 23)
    u.insert("p", id=2, v="p2")
    u.watermark()
    return u, ts


def _rows(spark, project, name: str) -> list[tuple]:
    return [
        tuple(v for k, v in r.items() if k != "_commit_ts")
        for r in read_target(spark, project, name, "id")
    ]


def _plan_code(root) -> int:
    return cli_main(["plan", "--project", str(root), "--detailed-exitcode"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ddl_kinds_land_and_blocked_tables_resume(spark, tmp_path, protocol, capsys):
    u, ts = history(protocol)
    root = make_project(tmp_path / protocol, protocol=protocol, topic="cdc")
    write_captures(root, "cdc", u.records())
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lambda s: (lines.append(s), print(s))) == 1
    text = "\n".join(lines)

    # a: every column DDL, rows before and after each.
    assert target_schema(spark, project, "a") == [
        ("f", "string"),
        ("id", "int"),
        ("c", "bigint"),
        ("w", "string"),
        ("d", "decimal(14,2)"),
        ("n", "string"),
        ("_commit_ts", "bigint"),
    ]
    assert _rows(spark, project, "a") == [
        (None, 1, 5, "uno", Decimal("1.50"), None),
        (None, 2, 5, "two", Decimal("2.50"), "again"),
        ("x", 3, 9, "three", Decimal("3.00"), None),
        (None, 4, 4, "four", Decimal("4.00"), None),
        (None, 5, 2**40, "a-longer-value-here", Decimal("123456789012.34"), None),
    ]
    assert _rows(spark, project, "t") == [(3, "kept")]
    assert _rows(spark, project, "b2") == [(1, "b1 new"), (2, "b2"), (3, "b3")]
    assert _rows(spark, project, "b") == []  # moved to b2, as upstream
    assert _rows(spark, project, "g") == []
    # Blocked tables keep what came before their DDL.
    assert _rows(spark, project, "x") == [(1, 7)]
    assert _rows(spark, project, "p") == [(1, "p1")]
    assert f"target x is blocked at commit_ts {ts['narrow']}" in text
    assert "ALTER TABLE shop.x MODIFY COLUMN n INT" in text
    assert "narrow_column: rebuild" in text
    assert f"target p is blocked at commit_ts {ts['partition']}" in text
    assert "partition: skip" in text

    # plan shows the blocked DDL as pending, classified, with its Delta change.
    capsys.readouterr()
    assert _plan_code(root) == 2
    shown = capsys.readouterr().out
    assert "ALTER TABLE shop.x MODIFY COLUMN n INT" in shown
    assert "TRUNCATE PARTITION" in shown
    assert "destructive" in shown and "unsupported" in shown

    # The user lets them through; the next run continues with nothing lost.
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  ddl:\n    narrow_column: rebuild\n"
        "    partition: skip\n"
    )
    project = load(root)
    lines.clear()
    assert runner.run(project, spark=spark, out=lambda s: (lines.append(s), print(s))) == 0, (
        "\n".join(lines)
    )
    assert ("n", "int") in target_schema(spark, project, "x")
    assert _rows(spark, project, "x") == [(1, 9), (2, 8)]
    assert _rows(spark, project, "p") == [(1, "p1"), (2, "p2")]
    assert _rows(spark, project, "b2") == [(1, "b1 new"), (2, "b2"), (3, "b3")]
    capsys.readouterr()
    assert _plan_code(root) == 0
