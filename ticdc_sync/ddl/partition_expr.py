"""A partitioning expression (`PARTITION BY RANGE (TO_DAYS(d))`, a bound, a list value): parsed,
evaluated as TiDB evaluates it, and rendered as Spark SQL over a target's columns.

TiDB evaluates a partitioning expression to a 64-bit integer (`EvalInt`); only integer
columns, and DATE/DATETIME columns under the date functions TiDB allows there, may appear
(a TIMESTAMP column only under UNIX_TIMESTAMP, whose value does not depend on a time zone).
`evaluate` computes it in Python (bounds and list values, which TiDB folds to integers at
the DDL, and rows in unit tests); `spark_sql` renders the same value as Spark SQL over the
target's columns (DATE, TIMESTAMP_NTZ, TIMESTAMP, BIGINT, DECIMAL(20,0) for BIGINT UNSIGNED),
every integer step in BIGINT so that no INT overflows where TiDB computed in 64 bits. What
either cannot reproduce exactly raises `PartitionError` with the reason; nothing is guessed.
Pure Python; no pyspark.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ticdc_sync.core.datatypes import INTEGER_TYPES
from ticdc_sync.core.sqlgen import quote
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl.tokens import ParseError, Parser


class PartitionError(Exception):
    """Why the rows of a partition cannot be computed exactly (shown where the DDL blocks)."""


@dataclass(frozen=True, slots=True)
class Num:
    value: int


@dataclass(frozen=True, slots=True)
class Str:
    value: str


@dataclass(frozen=True, slots=True)
class Null:
    pass


@dataclass(frozen=True, slots=True)
class Col:
    name: str


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # upper case
    args: tuple[Expr, ...]
    unit: str | None = None  # EXTRACT(unit FROM arg)


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # + - * DIV MOD
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Neg:
    arg: Expr


Expr = Num | Str | Null | Col | Call | BinOp | Neg

# -- parsing ----------------------------------------------------------------------------------


def parse_expr(p: Parser) -> Expr:
    """An expression at the cursor (MySQL precedence: unary minus, then * DIV % MOD, then + -)."""
    left = _term(p)
    while p.at_punct("+") or p.at_punct("-"):
        op = p.next().text
        left = BinOp(op, left, _term(p))
    return left


def _term(p: Parser) -> Expr:
    left = _unary(p)
    while True:
        t = p.peek()
        if t is None or t.kind not in ("word", "punct"):
            return left
        op = {"*": "*", "%": "MOD", "MOD": "MOD", "DIV": "DIV"}.get(t.text.upper())
        if op is None:
            if t.text == "/":
                raise ParseError("`/` in a partitioning expression (not an integer)", t)
            return left
        p.next()
        left = BinOp(op, left, _unary(p))


def _unary(p: Parser) -> Expr:
    if p.accept("-"):
        return Neg(_unary(p))
    if p.accept("+"):
        return _unary(p)
    return _primary(p)


def _primary(p: Parser) -> Expr:
    t = p.next()
    if t.kind == "punct" and t.text == "(":
        e = parse_expr(p)
        p.expect(")")
        return e
    if t.kind == "num":
        if not re.fullmatch(r"\d+", t.text):
            raise ParseError(f"non-integer number {t.text} in a partitioning expression", t)
        return Num(int(t.text))
    if t.kind == "str":
        return Str(t.text)
    if t.kind == "word" and t.up == "NULL":
        return Null()
    if t.kind == "word" and t.up in ("TRUE", "FALSE"):
        return Num(1 if t.up == "TRUE" else 0)
    if t.kind in ("word", "ident") and p.at_punct("("):
        name = t.text.upper()
        p.next()
        if name == "EXTRACT":
            unit = p.next().text.upper()
            p.expect("FROM")
            arg = parse_expr(p)
            p.expect(")")
            return Call(name, (arg,), unit)
        args: list[Expr] = []
        if not p.at_punct(")"):
            args.append(parse_expr(p))
            while p.accept(","):
                args.append(parse_expr(p))
        p.expect(")")
        return Call(name, tuple(args))
    if t.kind in ("word", "ident"):
        return Col(t.text)
    raise ParseError(f"unexpected {t.text!r} in a partitioning expression", t)


def expr_sql(e: Expr) -> str:
    """Canonical MySQL text (every operation parenthesised): parsing it gives `e` back."""
    if isinstance(e, Num):
        return str(e.value) if e.value >= 0 else f"(-{-e.value})"
    if isinstance(e, Str):
        return "'" + e.value.replace("\\", "\\\\").replace("'", "''") + "'"
    if isinstance(e, Null):
        return "NULL"
    if isinstance(e, Col):
        return "`" + e.name.replace("`", "``") + "`"
    if isinstance(e, Call):
        if e.unit is not None:
            return f"{e.name}({e.unit} FROM {expr_sql(e.args[0])})"
        return f"{e.name}({', '.join(expr_sql(a) for a in e.args)})"
    if isinstance(e, BinOp):
        return f"({expr_sql(e.left)} {e.op} {expr_sql(e.right)})"
    return f"(-{expr_sql(e.arg)})"


def columns_of(e: Expr) -> set[str]:
    if isinstance(e, Col):
        return {e.name.lower()}
    if isinstance(e, Call):
        return set().union(*(columns_of(a) for a in e.args)) if e.args else set()
    if isinstance(e, BinOp):
        return columns_of(e.left) | columns_of(e.right)
    if isinstance(e, Neg):
        return columns_of(e.arg)
    return set()


# -- TiDB's functions ---------------------------------------------------------------------------

# The date functions TiDB allows in a partitioning expression that take one date argument,
# and what each gives (MySQL's definitions).
_DATE_PARTS = {
    "YEAR": lambda d: d.year,
    "MONTH": lambda d: d.month,
    "DAY": lambda d: d.day,
    "DAYOFMONTH": lambda d: d.day,
    "DAYOFYEAR": lambda d: d.timetuple().tm_yday,
    "QUARTER": lambda d: (d.month - 1) // 3 + 1,
    "DAYOFWEEK": lambda d: d.isoweekday() % 7 + 1,  # 1 = Sunday
    "WEEKDAY": lambda d: d.weekday(),  # 0 = Monday
    "HOUR": lambda d: d.hour,
    "MINUTE": lambda d: d.minute,
    "SECOND": lambda d: d.second,
    "MICROSECOND": lambda d: d.microsecond,
    "TO_DAYS": lambda d: d.toordinal() + 365,  # TO_DAYS('0001-01-01') = 366
    "TO_SECONDS": lambda d: (
        (d.toordinal() + 365) * 86400 + d.hour * 3600 + d.minute * 60 + d.second
    ),
}
_EXTRACT_UNITS = {
    "YEAR": ("YEAR",),
    "QUARTER": ("QUARTER",),
    "MONTH": ("MONTH",),
    "DAY": ("DAY",),
    "HOUR": ("HOUR",),
    "MINUTE": ("MINUTE",),
    "SECOND": ("SECOND",),
    "MICROSECOND": ("MICROSECOND",),
    "YEAR_MONTH": ("YEAR", "MONTH"),
    "DAY_HOUR": ("DAY", "HOUR"),
    "DAY_MINUTE": ("DAY", "HOUR", "MINUTE"),
    "DAY_SECOND": ("DAY", "HOUR", "MINUTE", "SECOND"),
    "HOUR_MINUTE": ("HOUR", "MINUTE"),
    "HOUR_SECOND": ("HOUR", "MINUTE", "SECOND"),
    "MINUTE_SECOND": ("MINUTE", "SECOND"),
}
_TIME_OF_DAY = ("HOUR", "MINUTE", "SECOND", "MICROSECOND")
_DATE_TEXT = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?)?"
)


def parse_temporal(text: str) -> dt.datetime:
    """A date or datetime literal ('2024-01-31', '2024-01-31 10:00:00[.ffffff]')."""
    m = _DATE_TEXT.fullmatch(text.strip())
    if m is None:
        raise PartitionError(f"{text!r} is not a date or datetime TiDB's partitioning reads here")
    y, mo, d, h, mi, s, f = m.groups()
    try:
        return dt.datetime(
            int(y),
            int(mo),
            int(d),
            int(h or 0),
            int(mi or 0),
            int(s or 0),
            int((f or "0").ljust(6, "0")),
        )
    except ValueError as e:
        raise PartitionError(f"{text!r} is not a valid date ({e})") from None


def _tdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero (MySQL DIV, Go's `/`)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _tmod(a: int, b: int) -> int:
    """Remainder with the dividend's sign (MySQL MOD and %, Go's `%`)."""
    return a - b * _tdiv(a, b)


def _kind(schema: TableSchema | None, name: str) -> str:
    """int | date | datetime | timestamp for a column a partitioning expression may name."""
    c = schema.column(name) if schema is not None else None
    if c is None:
        raise PartitionError(
            f"the partitioning names column {name!r}, which the table does not have"
        )
    if c.base in INTEGER_TYPES or c.base == "year":
        return "int"
    if c.base in ("date", "datetime", "timestamp"):
        return c.base
    raise PartitionError(
        f"column {c.name} ({c.type_sql()}) in a partitioning expression: only integer, DATE and "
        "DATETIME columns (TIMESTAMP under UNIX_TIMESTAMP) are computed here"
    )


def evaluate(
    e: Expr, row: Mapping[str, Any] | None = None, schema: TableSchema | None = None
) -> Any:
    """The value TiDB computes (an int, or None for NULL), for `row` (column name -> value:
    int, date, naive datetime; a TIMESTAMP as a naive UTC or an aware datetime). Without a
    row only constants evaluate (a bound, a list value)."""
    v = _eval(e, {k.lower(): x for k, x in (row or {}).items()}, schema)
    if isinstance(v, (dt.date, str)):
        raise PartitionError(f"{expr_sql(e)} is not an integer expression")
    return v


def _eval(e: Expr, row: dict[str, Any], schema: TableSchema | None) -> Any:
    if isinstance(e, Num):
        return e.value
    if isinstance(e, Str):
        return e.value
    if isinstance(e, Null):
        return None
    if isinstance(e, Col):
        if e.name.lower() not in row:
            raise PartitionError(f"{expr_sql(e)} is not a constant")
        _kind(schema, e.name)
        return row[e.name.lower()]
    if isinstance(e, Neg):
        v = _int(_eval(e.arg, row, schema), e)
        return None if v is None else -v
    if isinstance(e, BinOp):
        a = _int(_eval(e.left, row, schema), e)
        b = _int(_eval(e.right, row, schema), e)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b == 0:
            return None  # MySQL: division by zero is NULL
        return _tdiv(a, b) if e.op == "DIV" else _tmod(a, b)
    return _call(e, [_eval(a, row, schema) for a in e.args], row, schema)


def _int(v: Any, e: Expr) -> int | None:
    if v is None or isinstance(v, int):
        return v
    raise PartitionError(f"{expr_sql(e)}: an operand is not an integer")


def _temporal(v: Any, e: Call) -> dt.datetime | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    if isinstance(v, str):
        return parse_temporal(v)
    raise PartitionError(f"{expr_sql(e)}: {e.name} of an integer (a date written as a number)")


def _call(e: Call, args: list[Any], row: dict[str, Any], schema: TableSchema | None) -> Any:
    name = e.name
    arity = {"DATEDIFF": 2, "MOD": 2}.get(name, 1)
    if len(args) != arity:
        raise PartitionError(f"{expr_sql(e)}: {name} takes {arity} argument(s)")
    if name in _DATE_PARTS:
        _check_temporal_arg(e.args[0], schema, name)
        d = _temporal(args[0], e)
        return None if d is None else _DATE_PARTS[name](d)
    if name == "EXTRACT":
        parts = _EXTRACT_UNITS.get(e.unit or "")
        if parts is None:
            raise PartitionError(f"EXTRACT({e.unit} FROM ...) is not computed here")
        _check_temporal_arg(e.args[0], schema, name)
        d = _temporal(args[0], e)
        if d is None:
            return None
        out = 0
        for part in parts:
            width = 1000000 if part == "MICROSECOND" else 100
            out = out * width + _DATE_PARTS[part](d)
        return out
    if name == "DATEDIFF":
        for a in e.args:
            _check_temporal_arg(a, schema, name)
        x, y = _temporal(args[0], e), _temporal(args[1], e)
        return None if x is None or y is None else (x.date() - y.date()).days
    if name == "UNIX_TIMESTAMP":
        return _unix_timestamp(e, args[0], schema)
    if name in ("ABS", "FLOOR", "CEILING", "CEIL"):
        v = _int(args[0], e)
        return None if v is None else abs(v) if name == "ABS" else v
    if name == "MOD":
        a, b = _int(args[0], e), _int(args[1], e)
        return None if a is None or b is None or b == 0 else _tmod(a, b)
    raise PartitionError(f"function {name} in a partitioning expression is not computed here")


def _check_temporal_arg(a: Expr, schema: TableSchema | None, name: str) -> None:
    if isinstance(a, Col) and _kind(schema, a.name) == "timestamp":
        raise PartitionError(
            f"{name} of TIMESTAMP column {a.name}: its value depends on TiDB's time zone"
        )
    if isinstance(a, Col) and _kind(schema, a.name) == "int":
        raise PartitionError(f"{name} of integer column {a.name} (a date written as a number)")


def _unix_timestamp(e: Call, v: Any, schema: TableSchema | None) -> int | None:
    a = e.args[0]
    if not isinstance(a, Col) or _kind(schema, a.name) != "timestamp":
        raise PartitionError(
            f"{expr_sql(e)}: UNIX_TIMESTAMP of anything but a TIMESTAMP column reads its argument "
            "in TiDB's session time zone, which the DDL does not carry"
        )
    c = schema.column(a.name) if schema is not None else None
    if c is not None and c.fsp:
        raise PartitionError(
            f"UNIX_TIMESTAMP of {c.name} ({c.type_sql()}) has a fractional part TiDB rounds"
        )
    if v is None:
        return None
    if not isinstance(v, dt.datetime):
        raise PartitionError(f"{expr_sql(e)}: a TIMESTAMP value is a datetime")
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    return int((v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).total_seconds() // 1)


# -- Spark SQL ---------------------------------------------------------------------------------

_U64 = 1 << 64
_I64 = 1 << 63


@dataclass(frozen=True, slots=True)
class _Sql:
    text: str
    kind: str  # int | date | datetime | timestamp | str
    unsigned: bool = False  # may exceed BIGINT (BIGINT UNSIGNED, DECIMAL(20,0) in Delta)


def spark_sql(e: Expr, schema: TableSchema) -> str:
    """The expression as Spark SQL over the target's columns (an integral value, NULL where
    TiDB's is NULL). Raises `PartitionError` where that value is not reproduced exactly."""
    s = _spark(e, schema)
    if s.kind != "int":
        raise PartitionError(f"{expr_sql(e)} is not an integer expression")
    return s.text


def spark_int64(e: Expr, schema: TableSchema) -> str:
    """As `spark_sql`, then as TiDB's int64 (`Datum.GetInt64`): a BIGINT UNSIGNED value at or
    above 2^63 reads as its two's complement (what HASH partitioning takes the modulus of)."""
    s = _spark(e, schema)
    if s.kind != "int":
        raise PartitionError(f"{expr_sql(e)} is not an integer expression")
    if not s.unsigned:
        return s.text
    return f"CAST(IF({s.text} >= {_I64}, {s.text} - {_U64}, {s.text}) AS BIGINT)"


def _lit(v: int | None) -> _Sql:
    if v is None:
        return _Sql("CAST(NULL AS BIGINT)", "int")
    return _Sql(str(v) if v >= 0 else f"({v})", "int", v >= _I64)


def _spark(e: Expr, schema: TableSchema) -> _Sql:
    if not columns_of(e):
        if isinstance(e, Str):
            return _Sql(e.value, "str")
        return _lit(evaluate(e))
    if isinstance(e, Col):
        c = schema.column(e.name)
        kind = _kind(schema, e.name)
        assert c is not None
        if kind != "int":
            return _Sql(quote(c.name), kind)
        if c.base == "bigint" and c.unsigned:
            return _Sql(quote(c.name), "int", True)
        return _Sql(f"CAST({quote(c.name)} AS BIGINT)", "int")
    if isinstance(e, Neg):
        a = _int_sql(_spark(e.arg, schema), e)
        return _Sql(f"(-{a.text})", "int", a.unsigned)
    if isinstance(e, BinOp):
        a = _int_sql(_spark(e.left, schema), e)
        b = _int_sql(_spark(e.right, schema), e)
        u = a.unsigned or b.unsigned
        if e.op in ("+", "-", "*"):
            return _Sql(f"({a.text} {e.op} {b.text})", "int", u)
        op = "div" if e.op == "DIV" else "%"
        # MySQL gives NULL for a zero divisor; Spark's ANSI mode would raise.
        return _Sql(f"IF({b.text} = 0, NULL, {a.text} {op} {b.text})", "int", u)
    assert isinstance(e, Call)
    return _spark_call(e, schema)


def _int_sql(s: _Sql, e: Expr) -> _Sql:
    if s.kind != "int":
        raise PartitionError(f"{expr_sql(e)}: an operand is not an integer")
    return s


def _temporal_sql(s: _Sql, e: Call) -> _Sql:
    """A date function's argument as a Spark DATE or TIMESTAMP_NTZ value."""
    if s.kind == "str":
        d = parse_temporal(s.text)
        text = d.isoformat(sep=" ", timespec="microseconds")
        return _Sql(f"TIMESTAMP_NTZ '{text}'", "datetime")
    if s.kind == "timestamp":
        raise PartitionError(f"{expr_sql(e)}: {e.name} of a TIMESTAMP depends on TiDB's time zone")
    if s.kind == "int":
        raise PartitionError(f"{expr_sql(e)}: {e.name} of an integer (a date written as a number)")
    return s


def _bigint(text: str) -> _Sql:
    return _Sql(f"CAST({text} AS BIGINT)", "int")


def _days(x: _Sql) -> str:
    return f"(CAST(unix_date(CAST({x.text} AS DATE)) AS BIGINT) + 719528)"


def _part(part: str, x: _Sql) -> str:
    """One date part of `x` (DATE or TIMESTAMP_NTZ) as BIGINT SQL."""
    if part in _TIME_OF_DAY and x.kind == "date":
        return f"IF({x.text} IS NULL, CAST(NULL AS BIGINT), CAST(0 AS BIGINT))"
    fn = {
        "YEAR": "year",
        "MONTH": "month",
        "DAY": "dayofmonth",
        "DAYOFMONTH": "dayofmonth",
        "DAYOFYEAR": "dayofyear",
        "QUARTER": "quarter",
        "DAYOFWEEK": "dayofweek",
        "WEEKDAY": "weekday",
        "HOUR": "hour",
        "MINUTE": "minute",
        "SECOND": "second",
    }.get(part)
    if fn is not None:
        return f"CAST({fn}({x.text}) AS BIGINT)"
    if part == "MICROSECOND":
        return f"(CAST(extract(SECOND FROM {x.text}) * 1000000 AS BIGINT) % 1000000)"
    if part == "TO_DAYS":
        return _days(x)
    assert part == "TO_SECONDS"
    secs = (
        f" + {_part('HOUR', x)} * 3600 + {_part('MINUTE', x)} * 60 + {_part('SECOND', x)}"
        if x.kind == "datetime"
        else ""
    )
    return f"({_days(x)} * 86400{secs})"


def _spark_call(e: Call, schema: TableSchema) -> _Sql:
    args = [_spark(a, schema) for a in e.args]
    name = e.name
    arity = {"DATEDIFF": 2, "MOD": 2}.get(name, 1)
    if len(args) != arity:
        raise PartitionError(f"{expr_sql(e)}: {name} takes {arity} argument(s)")
    if name in _DATE_PARTS:
        return _Sql(_part(name, _temporal_sql(args[0], e)), "int")
    if name == "EXTRACT":
        parts = _EXTRACT_UNITS.get(e.unit or "")
        if parts is None:
            raise PartitionError(f"EXTRACT({e.unit} FROM ...) is not computed here")
        x = _temporal_sql(args[0], e)
        text = _part(parts[0], x)
        for part in parts[1:]:
            width = 1000000 if part == "MICROSECOND" else 100
            text = f"({text} * {width} + {_part(part, x)})"
        return _Sql(text, "int")
    if name == "DATEDIFF":
        a, b = (_temporal_sql(x, e) for x in args)
        return _bigint(f"datediff(CAST({a.text} AS DATE), CAST({b.text} AS DATE))")
    if name == "UNIX_TIMESTAMP":
        _unix_timestamp(e, None, schema)  # the checks
        return _bigint(f"unix_seconds({args[0].text})")
    if name in ("ABS", "FLOOR", "CEILING", "CEIL"):
        a = _int_sql(args[0], e)
        return _Sql(f"abs({a.text})", "int", a.unsigned) if name == "ABS" else a
    if name == "MOD":
        a, b = (_int_sql(x, e) for x in args)
        return _Sql(f"IF({b.text} = 0, NULL, {a.text} % {b.text})", "int", a.unsigned or b.unsigned)
    raise PartitionError(f"function {name} in a partitioning expression is not computed here")
