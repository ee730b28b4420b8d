"""Which rows a partition holds: the Spark SQL predicate over a target's columns that is true
for exactly those rows (`predicate`), and the same rule in Python (`locate`, for checks and
tests). The rules are TiDB's (`partitioning` names them, with their source).

What is not reproduced exactly raises `PartitionError` with the reason, and the DDL that
needs it blocks: COLUMNS partitioning on string columns (compared under their collation),
KEY partitioning on anything but integer columns (hashed as text under a collation).
Pure Python; no pyspark.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Mapping
from typing import Any

from ticdc_sync.core.datatypes import INTEGER_TYPES
from ticdc_sync.core.sqlgen import quote
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl import partition_expr as px
from ticdc_sync.ddl.partition_expr import Expr, PartitionError
from ticdc_sync.ddl.partitioning import Bound, MaxValue, PartitionDef, Partitioning

# -- which rows a partition holds ------------------------------------------------------------


def predicate(part: Partitioning, names: tuple[str, ...], schema: TableSchema) -> str:
    """Spark SQL over the target's columns, true for exactly the rows the partitions `names`
    hold (false or NULL for every other row, as a WHERE reads it); `PartitionError` with
    the reason where that is not computed exactly."""
    idx = sorted({part.index(n) for n in names})
    if len(idx) == len(part.defs):
        return "true"
    terms = [_one(part, i, schema) for i in idx]
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"


def _one(part: Partitioning, i: int, schema: TableSchema) -> str:
    if part.kind == "RANGE":
        return _range(part, i, schema)
    if part.kind == "LIST":
        return _list(part, i, schema)
    n = len(part.defs)
    if part.kind == "HASH":
        assert part.expr is not None
        v = px.spark_int64(part.expr, schema)
        # TiDB: NULL -> partition 0, else |v % n| (Go's remainder, then its magnitude).
        return f"coalesce(abs({v} % {n}), 0) = {i}"
    return f"(crc32({_key_bytes(part, schema)}) % {n}) = {i}"


def _key_bytes(part: Partitioning, schema: TableSchema) -> str:
    keys = []
    for name in part.columns:
        c = schema.column(name)
        if c is None:
            raise PartitionError(
                f"KEY partitioning names column {name!r}, which the table does not have"
            )
        if c.base not in INTEGER_TYPES and c.base != "year":
            raise PartitionError(
                f"KEY partitioning on {c.name} ({c.type_sql()}): TiDB hashes such a value's text "
                "under its collation, which is reproduced here for integer columns only"
            )
        keys.append(f"coalesce(CAST(CAST({quote(c.name)} AS STRING) AS BINARY), X'00')")
    return keys[0] if len(keys) == 1 else f"concat({', '.join(keys)})"


def _range(part: Partitioning, i: int, schema: TableSchema) -> str:
    if part.expr is not None:
        v = px.spark_sql(part.expr, schema)
        upper = _bound_value(part.defs[i].less_than[0])
        lower = _bound_value(part.defs[i - 1].less_than[0]) if i > 0 else None
        conds = []
        if i == 0:
            below = "true" if upper is None else f"{v} < {upper}"
            return f"({v} IS NULL OR {below})"
        if lower is not None:
            conds.append(f"{v} >= {lower}")
        if upper is not None:
            conds.append(f"{v} < {upper}")
        return "(" + " AND ".join(conds) + ")"
    cols = [_column(schema, c) for c in part.columns]
    below = _tuple_less(cols, part.defs[i].less_than, schema)
    if i == 0:
        return below
    return f"({below} AND NOT {_tuple_less(cols, part.defs[i - 1].less_than, schema)})"


def _bound_value(b: Bound) -> str | None:
    if isinstance(b, MaxValue):
        return None
    v = px.evaluate(b)
    if v is None:
        raise PartitionError("a RANGE bound is NULL")
    return str(v) if v >= 0 else f"({v})"


def _tuple_less(cols: list[tuple[str, str]], bound: tuple[Bound, ...], schema: TableSchema) -> str:
    """(cols) < (bound), NULL below every value, MAXVALUE above every value: 2-valued."""
    if len(bound) != len(cols):
        raise PartitionError("a RANGE COLUMNS bound has a value per column")
    terms: list[str] = []
    equal: list[str] = []
    for (col, kind), b in zip(cols, bound, strict=True):
        if isinstance(b, MaxValue):
            terms.append(" AND ".join(equal) if equal else "true")
            break
        lit = _literal(b, kind)
        terms.append(" AND ".join([*equal, f"({col} IS NULL OR {col} < {lit})"]))
        equal.append(f"{col} <=> {lit}")
    return "(" + " OR ".join(f"({t})" for t in terms) + ")"


def _column(schema: TableSchema, name: str) -> tuple[str, str]:
    c = schema.column(name)
    if c is None:
        raise PartitionError(
            f"the partitioning names column {name!r}, which the table does not have"
        )
    if c.base in INTEGER_TYPES or c.base == "year":
        return quote(c.name), "int"
    if c.base in ("date", "datetime"):
        return quote(c.name), c.base
    raise PartitionError(
        f"COLUMNS partitioning on {c.name} ({c.type_sql()}): TiDB compares such values under "
        "the column's collation or time zone, which is not reproduced here (integer, DATE and "
        "DATETIME columns are)"
    )


def _literal(b: Expr, kind: str) -> str:
    """A COLUMNS bound or list value as a Spark literal of the column's type (TiDB casts it
    to the column's type: `dataForRangeColumnsPruning`)."""
    v = _constant(b, kind)
    if v is None:
        return "NULL"
    if kind == "int":
        return str(v) if v >= 0 else f"({v})"
    if kind == "date":
        return f"DATE '{v.isoformat()}'"
    return f"TIMESTAMP_NTZ '{v.isoformat(sep=' ', timespec='microseconds')}'"


def _constant(b: Expr, kind: str) -> Any:
    if kind == "int":
        return px.evaluate(b)
    if isinstance(b, px.Null):
        return None
    if not isinstance(b, px.Str):
        raise PartitionError(f"{px.expr_sql(b)} as a {kind.upper()} value is not read here")
    d = px.parse_temporal(b.value)
    if kind == "date":
        if d.time() != dt.time(0):
            raise PartitionError(f"{px.expr_sql(b)} as a DATE value is not read here")
        return d.date()
    return d


def _list(part: Partitioning, i: int, schema: TableSchema) -> str:
    d = part.defs[i]
    if d.default:
        others = [j for j, x in enumerate(part.defs) if not x.default]
        if not others:
            return "true"
        return "NOT (" + " OR ".join(_list_match(part, part.defs[j], schema) for j in others) + ")"
    return _list_match(part, d, schema)


def _list_match(part: Partitioning, d: PartitionDef, schema: TableSchema) -> str:
    """Whether a row's value is one of `d`'s values (2-valued: NULL matches a NULL value)."""
    if part.expr is not None:
        v = px.spark_int64(part.expr, schema)
        vals = [px.evaluate(x[0]) for x in d.values]
        terms = []
        if any(x is None for x in vals):
            terms.append(f"{v} IS NULL")
        # TiDB's list keeps int64 values: an unsigned value matches its two's complement.
        ints = sorted({_int64(x) for x in vals if x is not None})
        if ints:
            terms.append(f"coalesce({v} IN ({', '.join(_int_lit(x) for x in ints)}), false)")
        return "(" + " OR ".join(terms) + ")" if terms else "false"
    cols = [_column(schema, c) for c in part.columns]
    tuples = []
    for row in d.values:
        if len(row) != len(cols):
            raise PartitionError("a LIST COLUMNS value has a value per column")
        tuples.append(
            "("
            + " AND ".join(f"{c} <=> {_literal(x, k)}" for (c, k), x in zip(cols, row, strict=True))
            + ")"
        )
    return "(" + " OR ".join(tuples) + ")" if tuples else "false"


def _int64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _int_lit(v: int) -> str:
    return str(v) if v >= 0 else f"({v})"


# -- the same in Python (TiDB's rules; for checks and tests) ---------------------------------


def locate(part: Partitioning, row: Mapping[str, Any], schema: TableSchema) -> str:
    """The name of the partition TiDB puts `row` in (column name -> Python value)."""
    low = {k.lower(): v for k, v in row.items()}
    if part.kind == "RANGE":
        return part.defs[_locate_range(part, low, schema)].name
    if part.kind == "LIST":
        return _locate_list(part, low, schema)
    n = len(part.defs)
    if part.kind == "HASH":
        assert part.expr is not None
        v = px.evaluate(part.expr, low, schema)
        # Go: int64(v) % n keeps the dividend's sign; TiDB then takes its magnitude.
        return part.defs[0 if v is None else abs(_int64(v)) % n].name
    data = b"".join(
        b"\x00" if low.get(c.lower()) is None else str(low[c.lower()]).encode()
        for c in part.columns
    )
    return part.defs[zlib.crc32(data) % n].name


def _locate_range(part: Partitioning, row: dict[str, Any], schema: TableSchema) -> int:
    if part.expr is not None:
        v = px.evaluate(part.expr, row, schema)
        if v is None:
            return 0
        for i, d in enumerate(part.defs):
            b = d.less_than[0]
            if isinstance(b, MaxValue) or v < px.evaluate(b):
                return i
        raise PartitionError(f"no partition for value {v}")
    kinds = [_column(schema, c)[1] for c in part.columns]
    vals = [row.get(c.lower()) for c in part.columns]
    for i, d in enumerate(part.defs):
        if _py_tuple_less(vals, kinds, d.less_than):
            return i
    raise PartitionError("no partition for the row's values")


def _py_tuple_less(vals: list[Any], kinds: list[str], bound: tuple[Bound, ...]) -> bool:
    for v, k, b in zip(vals, kinds, bound, strict=True):
        if isinstance(b, MaxValue):
            return True
        c = _constant(b, k)
        if v is None:
            return True
        if isinstance(v, dt.datetime) and k == "date":
            v = v.date()
        if v < c:
            return True
        if v > c:
            return False
    return False


def _locate_list(part: Partitioning, row: dict[str, Any], schema: TableSchema) -> str:
    default = next((d.name for d in part.defs if d.default), None)
    if part.expr is not None:
        v = px.evaluate(part.expr, row, schema)
        for d in part.defs:
            vals = [px.evaluate(x[0]) for x in d.values]
            if (v is None and None in vals) or (
                v is not None and _int64(v) in {_int64(x) for x in vals if x is not None}
            ):
                return d.name
    else:
        kinds = [_column(schema, c)[1] for c in part.columns]
        vals = [row.get(c.lower()) for c in part.columns]
        for d in part.defs:
            for t in d.values:
                if all(v == _constant(x, k) for v, k, x in zip(vals, kinds, t, strict=True)):
                    return d.name
    if default is None:
        raise PartitionError("no partition for the row's value")
    return default
