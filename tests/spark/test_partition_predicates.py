"""Each partition's Spark SQL predicate (`ddl.partition_rows.predicate`), run by Spark over
rows of a target's column types, against the partition TiDB puts each row in, as the testkit
simulates it (`testkit.partitions`, written from TiDB's rules apart from ticdc-sync's code)
and as `partition_rows.locate` says in Python.

Per partitioning kind, seeded random rows with the edge values TiDB's rules turn on: NULL
(RANGE's first partition, LIST's NULL value or DEFAULT, HASH's p0, KEY's 0 byte), negative
values (HASH's magnitude, MOD's sign), BIGINT UNSIGNED above 2^63 (HASH's two's complement),
bound values themselves, MAXVALUE, dates across year and month ends. Every row must match
exactly one partition's predicate, and it must be the one TiDB picks.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pytest

from testkit.partitions import MAXVALUE, Layout, Part, to_days
from ticdc_sync.core.datatypes import delta_type
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl import parse_ddl
from ticdc_sync.ddl.partition_rows import locate, predicate
from ticdc_sync.ddl.partitioning import read_schema

pytestmark = pytest.mark.spark

U63 = 1 << 63


def _schema(sql: str) -> TableSchema:
    (stmt,) = parse_ddl(sql, "shop")
    return stmt.schema  # type: ignore[union-attr]


def _days(y: int, m: int, d: int) -> int:
    return to_days(dt.date(y, m, d))  # type: ignore[return-value]


def _date(rnd: random.Random) -> dt.date | None:
    if rnd.random() < 0.1:
        return None
    edges = [dt.date(2024, 1, 31), dt.date(2024, 2, 1), dt.date(2024, 3, 1), dt.date(2023, 12, 31)]
    if rnd.random() < 0.3:
        return rnd.choice(edges)
    return dt.date(2023, 11, 1) + dt.timedelta(days=rnd.randrange(220))


def _datetime(rnd: random.Random) -> dt.datetime | None:
    d = _date(rnd)
    if d is None:
        return None
    return dt.datetime(d.year, d.month, d.day) + dt.timedelta(
        seconds=rnd.randrange(86400), microseconds=rnd.choice([0, 0, rnd.randrange(10**6)])
    )


def _int(rnd: random.Random, lo: int = -50, hi: int = 50) -> int | None:
    return None if rnd.random() < 0.1 else rnd.randint(lo, hi)


# (name, CREATE TABLE, the testkit's layout of it, a random row)
CASES: list[tuple[str, str, Layout, Any]] = [
    (
        "range_to_days",
        "CREATE TABLE t (id INT, d DATE) PARTITION BY RANGE (TO_DAYS(d)) ("
        "PARTITION p0 VALUES LESS THAN (TO_DAYS('2024-01-01')), "
        "PARTITION p1 VALUES LESS THAN (TO_DAYS('2024-02-01')), "
        "PARTITION p2 VALUES LESS THAN (739312), PARTITION pm VALUES LESS THAN MAXVALUE)",
        Layout(
            "RANGE",
            "",
            lambda r: to_days(r["d"]),
            (
                Part("p0", _days(2024, 1, 1)),
                Part("p1", _days(2024, 2, 1)),
                Part("p2", 739312),
                Part("pm", MAXVALUE),
            ),
        ),
        lambda rnd: {"id": 1, "d": _date(rnd)},
    ),
    (
        "range_year_month_datetime",
        "CREATE TABLE t (id INT, ts DATETIME(6)) PARTITION BY RANGE (YEAR(ts) * 100 + MONTH(ts)) ("
        "PARTITION p0 VALUES LESS THAN (202401), PARTITION p1 VALUES LESS THAN (202403), "
        "PARTITION pm VALUES LESS THAN (MAXVALUE))",
        Layout(
            "RANGE",
            "",
            lambda r: None if r["ts"] is None else r["ts"].year * 100 + r["ts"].month,
            (Part("p0", 202401), Part("p1", 202403), Part("pm", MAXVALUE)),
        ),
        lambda rnd: {"id": 1, "ts": _datetime(rnd)},
    ),
    (
        "range_to_seconds_dayofweek",
        "CREATE TABLE t (id INT, ts DATETIME) PARTITION BY RANGE (TO_SECONDS(ts) DIV 86400 + "
        "DAYOFWEEK(ts) - WEEKDAY(ts) + HOUR(ts) * 0) ("
        "PARTITION p0 VALUES LESS THAN (739270), PARTITION p1 VALUES LESS THAN MAXVALUE)",
        Layout(
            "RANGE",
            "",
            lambda r: (
                None
                if r["ts"] is None
                else to_days(r["ts"].date()) + (r["ts"].isoweekday() % 7 + 1) - r["ts"].weekday()
            ),
            (Part("p0", 739270), Part("p1", MAXVALUE)),
        ),
        lambda rnd: {"id": 1, "ts": _datetime(rnd)},
    ),
    (
        "range_unix_timestamp",
        "CREATE TABLE t (id INT, at TIMESTAMP NULL) PARTITION BY RANGE (UNIX_TIMESTAMP(at)) ("
        "PARTITION p0 VALUES LESS THAN (1704067200), PARTITION p1 VALUES LESS THAN (1706745600), "
        "PARTITION pm VALUES LESS THAN MAXVALUE)",
        Layout(
            "RANGE",
            "",
            lambda r: None if r["at"] is None else int(r["at"].replace(tzinfo=dt.UTC).timestamp()),
            (Part("p0", 1704067200), Part("p1", 1706745600), Part("pm", MAXVALUE)),
        ),
        lambda rnd: {"id": 1, "at": (lambda x: x and x.replace(microsecond=0))(_datetime(rnd))},
    ),
    (
        "range_columns",
        "CREATE TABLE t (a INT, dt DATETIME, id INT) PARTITION BY RANGE COLUMNS (a, dt) ("
        "PARTITION p0 VALUES LESS THAN (0, '2024-02-01 00:00:00'), "
        "PARTITION p1 VALUES LESS THAN (0, MAXVALUE), "
        "PARTITION p2 VALUES LESS THAN (10, '2024-01-01'), "
        "PARTITION p3 VALUES LESS THAN (MAXVALUE, MAXVALUE))",
        Layout(
            "RANGE COLUMNS",
            "",
            lambda r: (r["a"], r["dt"]),
            (
                Part("p0", (0, dt.datetime(2024, 2, 1))),
                Part("p1", (0, MAXVALUE)),
                Part("p2", (10, dt.datetime(2024, 1, 1))),
                Part("p3", (MAXVALUE, MAXVALUE)),
            ),
        ),
        lambda rnd: {
            "a": rnd.choice([None, -3, 0, 0, 5, 10, 10, 11]),
            "dt": _datetime(rnd),
            "id": 1,
        },
    ),
    (
        "list_mod_null_default",
        "CREATE TABLE t (id INT, n INT) PARTITION BY LIST (MOD(n, 5)) ("
        "PARTITION pn VALUES IN (NULL, 0), PARTITION pp VALUES IN (1, 2, -1), "
        "PARTITION pd DEFAULT)",
        Layout(
            "LIST",
            "",
            lambda r: None if r["n"] is None else int(r["n"] - 5 * int(r["n"] / 5)),
            (Part("pn", values=(None, 0)), Part("pp", values=(1, 2, -1)), Part("pd", default=True)),
        ),
        lambda rnd: {"id": 1, "n": _int(rnd)},
    ),
    (
        "list_columns",
        "CREATE TABLE t (c INT, d DATE, id INT) PARTITION BY LIST COLUMNS (c, d) ("
        "PARTITION p0 VALUES IN ((1, '2024-01-31'), (2, '2024-02-01'), (NULL, NULL)), "
        "PARTITION p1 VALUES IN ((1, '2024-02-01')), PARTITION pd VALUES IN (DEFAULT))",
        Layout(
            "LIST COLUMNS",
            "",
            lambda r: (r["c"], r["d"]),
            (
                Part(
                    "p0",
                    values=(
                        (1, dt.date(2024, 1, 31)),
                        (2, dt.date(2024, 2, 1)),
                        (None, None),
                    ),
                ),
                Part("p1", values=((1, dt.date(2024, 2, 1)),)),
                Part("pd", default=True),
            ),
        ),
        lambda rnd: {
            "c": rnd.choice([None, 1, 2, 3]),
            "d": rnd.choice([None, dt.date(2024, 1, 31), dt.date(2024, 2, 1)]),
            "id": 1,
        },
    ),
    (
        "hash_negative_null",
        "CREATE TABLE t (id INT, n BIGINT) PARTITION BY HASH (n) PARTITIONS 5",
        Layout("HASH", "", lambda r: r["n"], tuple(Part(f"p{i}") for i in range(5))),
        lambda rnd: {
            "id": 1,
            "n": rnd.choice([None, -(1 << 63), (1 << 63) - 1, _int(rnd, -(10**12), 10**12)]),
        },
    ),
    (
        "hash_unsigned_expression",
        "CREATE TABLE t (id BIGINT UNSIGNED, d DATE) PARTITION BY LINEAR HASH (id + 1) PARTITIONS 7",
        Layout(
            "HASH",
            "",
            lambda r: None if r["id"] is None else r["id"] + 1,
            tuple(Part(f"p{i}") for i in range(7)),
        ),
        lambda rnd: {
            "id": rnd.choice([None, 0, U63 - 1, U63, (1 << 64) - 2, rnd.randrange(1 << 64 - 1)]),
            "d": None,
        },
    ),
    (
        "hash_year",
        "CREATE TABLE t (id INT, d DATE) PARTITION BY HASH (YEAR(d)) "
        "(PARTITION a, PARTITION b, PARTITION c)",
        Layout("HASH", "", lambda r: r["d"] and r["d"].year, (Part("a"), Part("b"), Part("c"))),
        lambda rnd: {"id": 1, "d": _date(rnd)},
    ),
    (
        "key_ints",
        "CREATE TABLE t (id BIGINT UNSIGNED, s SMALLINT) PARTITION BY KEY (id, s) PARTITIONS 6",
        Layout("KEY", "", lambda r: (r["id"], r["s"]), tuple(Part(f"p{i}") for i in range(6))),
        lambda rnd: {
            "id": rnd.choice([None, 0, 7, U63 + 5, rnd.randrange(1 << 40)]),
            "s": _int(rnd, -32768, 32767),
        },
    ),
]


def _value(schema: TableSchema, name: str, v: Any) -> Any:
    c = schema.column(name)
    assert c is not None
    if v is not None and delta_type(c).startswith("DECIMAL"):
        return Decimal(v)
    return v


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_row_matches_the_partition_tidb_puts_it_in(spark, case):
    name, sql, layout, gen = case
    schema = _schema(sql)
    part = read_schema(schema)
    rnd = random.Random(name)
    rows = [gen(rnd) for _ in range(400)]
    cols = [c.name for c in schema.columns]
    ddl = ", ".join(f"`{c.name}` {delta_type(c)}" for c in schema.columns)
    data = [(i, *(_value(schema, c, r[c]) for c in cols)) for i, r in enumerate(rows)]
    df = spark.createDataFrame(data, f"`__i` INT, {ddl}")
    names = part.names()
    assert names == layout.names()
    cases = ", ".join(f"IF({predicate(part, (n,), schema)}, '{n}', NULL)" for n in names)
    got = {
        r["__i"]: [x for x in r["hits"] if x is not None]
        for r in df.selectExpr("__i", f"array({cases}) AS hits").collect()
    }
    for i, row in enumerate(rows):
        want = layout.locate(row)
        assert got[i] == [want], (name, row, got[i], want)
        assert locate(part, row, schema) == want, (name, row)
    # Several partitions at once: the union of their rows.
    pair = tuple(names[:2])
    hit = df.where(predicate(part, pair, schema)).select("__i").collect()
    assert sorted(r["__i"] for r in hit) == [
        i for i, r in enumerate(rows) if layout.locate(r) in pair
    ]
