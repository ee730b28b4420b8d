"""Partitioned tables in the DDL layer: the PARTITION BY clause read and kept as canonical text,
partition clauses applied to it, TiDB's expression values checked against MySQL's and TiDB's
documented examples, the partition a row lands in by TiDB's rules (RANGE, RANGE COLUMNS,
LIST, LIST COLUMNS, HASH, KEY), and every case that is not reproduced exactly blocking with
its reason."""

from __future__ import annotations

import datetime as dt

import pytest

from ticdc_sync.core.model import DdlKind
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.ddl import apply_statement, parse_ddl
from ticdc_sync.ddl.changes import DeletePartitionRows, ExchangePartition, NoOp, Unsupported
from ticdc_sync.ddl.partition_expr import PartitionError, evaluate, parse_expr
from ticdc_sync.ddl.partition_rows import locate, predicate
from ticdc_sync.ddl.partitioning import read, read_schema
from ticdc_sync.ddl.tokens import Parser, tokenize


def _e(text: str):
    p = Parser(tokenize(text))
    e = parse_expr(p)
    assert p.done()
    return e


def _create(sql: str) -> TableSchema:
    (stmt,) = parse_ddl(sql, "shop")
    return stmt.schema  # type: ignore[union-attr]


def _apply(schema: TableSchema, sql: str) -> tuple[TableSchema, list]:
    out: list = []
    s: TableSchema | None = schema
    for st in parse_ddl(sql, "shop"):
        s, ch = apply_statement(s, st)
        out += ch
    assert s is not None
    return s, out


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        # MySQL's reference manual, Date and Time Functions.
        ("TO_DAYS('2007-10-07')", 733321),
        ("TO_DAYS('0000-01-01')", None),  # not a date Python holds: refused below
        ("TO_SECONDS('2009-11-29')", 63426672000),
        ("TO_SECONDS('2009-11-29 13:43:32')", 63426721412),
        ("DAYOFWEEK('2007-02-03')", 7),
        ("WEEKDAY('2008-02-03 22:23:00')", 6),
        ("DAYOFYEAR('2007-02-03')", 34),
        ("DAYOFMONTH('2007-02-03')", 3),
        ("QUARTER('2008-04-01')", 2),
        ("YEAR('1987-01-01')", 1987),
        ("MONTH('2008-02-03')", 2),
        ("HOUR('2008-02-03 10:05:03')", 10),
        ("MINUTE('2008-02-03 10:05:03')", 5),
        ("SECOND('2008-02-03 10:05:03')", 3),
        ("MICROSECOND('2019-12-31 23:59:59.000010')", 10),
        ("DATEDIFF('2007-12-31 23:59:59', '2007-12-30')", 1),
        ("DATEDIFF('2010-11-30 23:59:59', '2010-12-31')", -31),
        ("EXTRACT(YEAR FROM '2019-07-02')", 2019),
        ("EXTRACT(YEAR_MONTH FROM '2019-07-02 01:02:03')", 201907),
        ("EXTRACT(DAY_MINUTE FROM '2019-07-02 01:02:03')", 20102),
        # Mathematical functions and operators.
        ("MOD(234, 10)", 4),
        ("253 % 7", 1),
        ("29 MOD 9", 2),
        ("-7 MOD 3", -1),  # the dividend's sign
        ("MOD(7, -3)", 1),
        ("5 DIV 2", 2),
        ("-5 DIV 2", -2),  # toward zero
        ("MOD(3, 0)", None),  # division by zero is NULL
        ("ABS(-32)", 32),
        ("2 + 3 * 4 - 1", 13),
        ("(2 + 3) * -4", -20),
        ("YEAR(NULL)", None),
        ("NULL + 1", None),
    ],
)
def test_constant_expressions_evaluate_as_mysql_documents(expr: str, value) -> None:
    if expr.startswith("TO_DAYS('0000"):
        with pytest.raises(PartitionError, match="not a valid date"):
            evaluate(_e(expr))
        return
    assert evaluate(_e(expr)) == value


def test_row_expressions_need_a_type_tidb_allows() -> None:
    s = TableSchema(
        "shop",
        "t",
        (
            Column("d", "date"),
            Column("at", "timestamp"),
            Column("at3", "timestamp", fsp=3),
            Column("v", "varchar", length=10),
            Column("n", "int"),
        ),
    )
    assert evaluate(_e("TO_DAYS(d)"), {"d": dt.date(2007, 10, 7)}, s) == 733321
    # A TIMESTAMP holds an instant: UNIX_TIMESTAMP of it does not depend on a time zone.
    utc = dt.datetime(2015, 11, 13, 10, 20, 19)
    assert evaluate(_e("UNIX_TIMESTAMP(at)"), {"at": utc}, s) == 1447410019
    with pytest.raises(PartitionError, match="time zone"):
        evaluate(_e("YEAR(at)"), {"at": utc}, s)
    with pytest.raises(PartitionError, match="fractional"):
        evaluate(_e("UNIX_TIMESTAMP(at3)"), {"at3": utc}, s)
    with pytest.raises(PartitionError, match="session time zone"):
        evaluate(_e("UNIX_TIMESTAMP('2024-01-01 00:00:00')"))
    with pytest.raises(PartitionError, match=r"varchar\(10\)"):
        evaluate(_e("v"), {"v": "x"}, s)
    with pytest.raises(PartitionError, match="not computed here"):
        evaluate(_e("YEARWEEK(d)"), {"d": dt.date(2020, 1, 1)}, s)
    with pytest.raises(PartitionError, match="written as a number"):
        evaluate(_e("TO_DAYS(n)"), {"n": 20200101}, s)


RANGE = (
    "CREATE TABLE events (id INT NOT NULL, d DATE NOT NULL, PRIMARY KEY (id, d)) "
    "PARTITION BY RANGE (TO_DAYS(d)) ("
    "PARTITION p0 VALUES LESS THAN (TO_DAYS('2024-02-01')), "
    "PARTITION p1 VALUES LESS THAN (TO_DAYS('2024-03-01')) COMMENT 'feb', "
    "PARTITION pmax VALUES LESS THAN MAXVALUE)"
)


def test_the_partition_by_clause_is_kept_as_canonical_text() -> None:
    s = _create(RANGE)
    assert s.partitioning == (
        "PARTITION BY RANGE (TO_DAYS(`d`)) (PARTITION `p0` VALUES LESS THAN "
        "(TO_DAYS('2024-02-01')), PARTITION `p1` VALUES LESS THAN (TO_DAYS('2024-03-01')), "
        "PARTITION `pmax` VALUES LESS THAN (MAXVALUE))"
    )
    assert read(s.partitioning).sql() == s.partitioning  # read back: the same
    assert TableSchema.from_json(s.to_json()) == s  # the schema history keeps it
    plain = _create("CREATE TABLE t (id INT PRIMARY KEY)")
    assert "partitioning" not in plain.to_json()  # a table without one: as it always was
    # LINEAR is built as plain HASH/KEY; PARTITIONS n names them p0.. p<n-1>.
    h = _create("CREATE TABLE t (id INT) PARTITION BY LINEAR KEY ALGORITHM=2 (id) PARTITIONS 3")
    assert read(h.partitioning or "").names() == ["p0", "p1", "p2"]
    # TiDB builds these without partitioning: a subpartitioned table, KEY without columns.
    for sql in (
        "CREATE TABLE t (id INT) PARTITION BY RANGE (id) SUBPARTITION BY HASH (id) "
        "SUBPARTITIONS 2 (PARTITION p0 VALUES LESS THAN (5))",
        "CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY KEY () PARTITIONS 2",
    ):
        assert _create(sql).partitioning is None
    # What is not understood stays as written and says why when it is needed.
    iv = _create(
        "CREATE TABLE t (id INT) PARTITION BY RANGE (id) INTERVAL (10) "
        "FIRST PARTITION LESS THAN (10) LAST PARTITION LESS THAN (30)"
    )
    assert iv.partitioning is not None and "INTERVAL" in iv.partitioning
    with pytest.raises(PartitionError, match="INTERVAL partitioning"):
        read_schema(iv)


def test_partition_clauses_change_the_partitioning_and_only_some_change_rows() -> None:
    s = _create(RANGE)
    s, ch = _apply(
        s,
        "ALTER TABLE events REORGANIZE PARTITION pmax INTO ("
        "PARTITION p2 VALUES LESS THAN (739400), PARTITION pmax VALUES LESS THAN MAXVALUE)",
    )
    assert [type(c) for c in ch] == [NoOp]
    assert read_schema(s).names() == ["p0", "p1", "p2", "pmax"]
    s, ch = _apply(s, "ALTER TABLE events TRUNCATE PARTITION p1")
    (c,) = ch
    assert isinstance(c, DeletePartitionRows) and c.partitions == ("p1",)
    assert c.effect == "destructive" and c.kind is DdlKind.PARTITION
    assert "739282" in c.predicate and "739311" in c.predicate  # Feb 1st, Mar 1st
    s, ch = _apply(s, "ALTER TABLE events DROP PARTITION p0, p1")
    assert isinstance(ch[0], DeletePartitionRows) and ch[0].partitions == ("p0", "p1")
    assert read_schema(s).names() == ["p2", "pmax"]
    # The first partition now takes everything below its bound, NULL included.
    assert locate(read_schema(s), {"d": dt.date(2000, 1, 1)}, s) == "p2"
    s, ch = _apply(s, "ALTER TABLE events TRUNCATE PARTITION ALL")
    assert ch[0].predicate == "true"
    s, ch = _apply(
        s, "ALTER TABLE `shop`.`events` EXCHANGE PARTITION `p2` WITH TABLE `shop`.`arch`"
    )
    (x,) = ch
    assert isinstance(x, ExchangePartition) and x.other == ("shop", "arch") and x.partitioned
    s, ch = _apply(s, "ALTER TABLE events PARTITION BY HASH (id) PARTITIONS 2")
    assert [type(c) for c in ch] == [NoOp]
    s, _ = _apply(s, "ALTER TABLE events ADD PARTITION PARTITIONS 2")
    assert read_schema(s).names() == ["p0", "p1", "p2", "p3"]
    s, _ = _apply(s, "ALTER TABLE events ADD PARTITION (PARTITION extra)")
    assert read_schema(s).names() == ["p0", "p1", "p2", "p3", "extra"]
    s, _ = _apply(s, "ALTER TABLE events COALESCE PARTITION 2")
    assert read_schema(s).names() == ["p0", "p1", "p2"]
    s, ch = _apply(s, "ALTER TABLE events REMOVE PARTITIONING")
    assert s.partitioning is None and [type(c) for c in ch] == [NoOp]
    s, ch = _apply(s, "ALTER TABLE events TRUNCATE PARTITION p0")
    (u,) = ch
    assert isinstance(u, Unsupported) and u.kind is DdlKind.PARTITION
    assert "not known here" in u.reason and "schema/*.sql" in u.reason


def test_rows_land_where_tidb_puts_them() -> None:
    s = _create(RANGE)
    part = read_schema(s)
    # RANGE: the first bound above the value; at the bound, the next partition.
    assert locate(part, {"d": dt.date(2024, 1, 31)}, s) == "p0"
    assert locate(part, {"d": dt.date(2024, 2, 1)}, s) == "p1"
    assert locate(part, {"d": dt.date(2031, 1, 1)}, s) == "pmax"
    # HASH: TiDB takes |v % n| with Go's remainder, NULL in the first partition (TiDB's
    # own capture: hash(a) partitions 4 over 0,1,3,4,-1,-3,-4,-7,NULL).
    h = _create("CREATE TABLE t (a INT) PARTITION BY HASH (a) PARTITIONS 4")
    hp = read_schema(h)
    got = [locate(hp, {"a": v}, h) for v in (0, 1, 3, 4, -1, -3, -4, -7, None)]
    assert got == ["p0", "p1", "p3", "p0", "p1", "p3", "p0", "p3", "p0"]
    # KEY: crc32 (IEEE) of the value's text; crc32('123456789') is the standard check
    # value 0xCBF43926 = 3421780262 (% 7 = 5), crc32 of one 0 byte (NULL) 3523407757 (% 7 = 2).
    k = _create("CREATE TABLE t (id BIGINT) PARTITION BY KEY (id) PARTITIONS 7")
    kp = read_schema(k)
    assert locate(kp, {"id": 123456789}, k) == "p5"
    assert locate(kp, {"id": None}, k) == "p2"
    # LIST: NULL only where a list names it, else DEFAULT; no DEFAULT: TiDB refuses it.
    li = _create(
        "CREATE TABLE t (n INT) PARTITION BY LIST (n) "
        "(PARTITION a VALUES IN (1, NULL), PARTITION b VALUES IN (2), PARTITION d DEFAULT)"
    )
    lp = read_schema(li)
    assert [locate(lp, {"n": v}, li) for v in (1, None, 2, 3)] == ["a", "a", "b", "d"]
    # RANGE COLUMNS: tuples, NULL below everything, MAXVALUE above.
    rc = _create(
        "CREATE TABLE t (a INT, b INT) PARTITION BY RANGE COLUMNS (a, b) ("
        "PARTITION p0 VALUES LESS THAN (5, 10), PARTITION p1 VALUES LESS THAN (5, MAXVALUE), "
        "PARTITION p2 VALUES LESS THAN (MAXVALUE, MAXVALUE))"
    )
    rp = read_schema(rc)
    cases = {
        (4, 99): "p0",
        (5, 9): "p0",
        (5, 10): "p1",
        (5, None): "p0",
        (None, 99): "p0",
        (6, 0): "p2",
    }
    for (a, b), want in cases.items():
        assert locate(rp, {"a": a, "b": b}, rc) == want, (a, b)


def test_what_is_not_reproduced_exactly_blocks_with_its_reason() -> None:
    cases = {
        "CREATE TABLE t (s VARCHAR(10)) PARTITION BY KEY (s) PARTITIONS 2": "collation",
        "CREATE TABLE t (s VARCHAR(10)) PARTITION BY RANGE COLUMNS (s) "
        "(PARTITION p0 VALUES LESS THAN ('m'), PARTITION p1 VALUES LESS THAN (MAXVALUE))": "collation",
        "CREATE TABLE t (at TIMESTAMP) PARTITION BY RANGE (UNIX_TIMESTAMP(at)) ("
        "PARTITION p0 VALUES LESS THAN (UNIX_TIMESTAMP('2024-01-01 00:00:00')), "
        "PARTITION p1 VALUES LESS THAN MAXVALUE)": "session time zone",
        "CREATE TABLE t (d DATE) PARTITION BY HASH (YEARWEEK(d)) PARTITIONS 2": "YEARWEEK",
    }
    for sql, why in cases.items():
        s = _create(sql)
        _, ch = _apply(s, "ALTER TABLE t TRUNCATE PARTITION p0")
        (u,) = ch
        assert isinstance(u, Unsupported) and why in u.reason, (sql, u)
        with pytest.raises(PartitionError, match=why):
            predicate(read_schema(s), ("p0",), s)


def test_open_protocol_type_codes_of_partition_ddl() -> None:
    from ticdc_sync import ddl

    for code, sql in {
        19: "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (100))",
        20: "ALTER TABLE t DROP PARTITION p0",
        23: "ALTER TABLE t TRUNCATE PARTITION p0",
        42: "ALTER TABLE `d`.`t` EXCHANGE PARTITION `p0` WITH TABLE `d`.`n`",
        64: "ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION a VALUES LESS THAN (5))",
        71: "ALTER TABLE t PARTITION BY HASH (id) PARTITIONS 2",
        72: "ALTER TABLE t REMOVE PARTITIONING",
    }.items():
        (st,) = ddl.parse_ddl(sql, "d", str(code))
        assert type(st).__name__ == "AlterTable", (code, st)
    # The kinds a type code stands for: rows change at 20, 23, 42 only.
    kinds = {c: ddl.open_protocol_action(c).kind for c in (19, 20, 23, 42, 64, 71, 72)}
    assert {c for c, k in kinds.items() if k is DdlKind.PARTITION} == {20, 23, 42}
