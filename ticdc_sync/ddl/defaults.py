"""Column defaults as Spark SQL literals: what existing rows get when a column is added.

MySQL fills existing rows with the column's DEFAULT, or with the implicit default of a NOT
NULL column without one (0, '', the first enum member); `backfill_sql` gives that value as a
literal of the column's Delta type, or None when it has no fixed value (CURRENT_TIMESTAMP,
expressions, zero dates: codec facts 0.1). Pure Python.
"""

from __future__ import annotations

import re

from ticdc_sync.core.datatypes import delta_type
from ticdc_sync.core.sqlgen import sql_string
from ticdc_sync.core.upstream import Column

ZERO_DATE = re.compile(r"^0000-00-00")
_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def _bits_value(text: str) -> int | None:
    if text.startswith("b'") and text.endswith("'"):
        return int(text[2:-1] or "0", 2)
    if text.startswith("x'") and text.endswith("'"):
        return int(text[2:-1] or "0", 16)
    return None


def spark_literal(col: Column, value: str) -> str | None:
    """A MySQL default (text as stored in `Column.default`) as a Spark SQL literal of the
    column's Delta type; None when it has no fixed value (CURRENT_TIMESTAMP, expressions) or
    maps to NULL (zero dates, codec facts 0.1)."""
    t = delta_type(col)
    if value.upper().startswith("CURRENT_TIMESTAMP") or value.startswith("("):
        return None
    bits = _bits_value(value)
    if t == "BOOLEAN":
        n = bits if bits is not None else int(float(value or 0))
        return "true" if n else "false"
    if t in _INTEGRAL or t.startswith("DECIMAL") or t in ("FLOAT", "DOUBLE"):
        if bits is not None:
            return str(bits)
        try:
            num = float(value) if value.strip() else 0.0
        except ValueError:
            return None
        if t in _INTEGRAL or t == "DECIMAL(20,0)":
            return str(int(num)) if "." in value or "e" in value.lower() else value.strip() or "0"
        if t.startswith("DECIMAL"):
            return f"CAST({sql_string(value.strip() or '0')} AS {t})"
        return f"CAST({sql_string(value.strip() or '0')} AS {t})"
    if t == "BINARY":
        raw = bytes.fromhex(value[2:-1]) if value.startswith("x'") else value.encode("utf-8")
        if col.base == "binary" and col.length:  # BINARY(n) pads with 0x00
            raw = raw.ljust(col.length, b"\0")
        return f"X'{raw.hex().upper()}'"
    if t == "DATE":
        return None if ZERO_DATE.match(value) else f"DATE {sql_string(value)}"
    if t == "TIMESTAMP_NTZ":
        return None if ZERO_DATE.match(value) else f"TIMESTAMP_NTZ {sql_string(value)}"
    if t == "TIMESTAMP":
        return None  # wall-clock text in the upstream session zone: see AddColumn.note
    return sql_string(value)


def implicit_default(col: Column) -> str | None:
    """MySQL's implicit default for a NOT NULL column without DEFAULT, as a Spark literal."""
    t = delta_type(col)
    if t == "BOOLEAN":
        return "false"
    if t in _INTEGRAL or t == "DECIMAL(20,0)":
        return "0"
    if t.startswith("DECIMAL") or t in ("FLOAT", "DOUBLE"):
        return f"CAST('0' AS {t})"
    if col.base == "enum":
        return sql_string(col.members[0]) if col.members else None
    if col.base == "time":
        return sql_string("00:00:00")
    if col.base == "json":
        return sql_string("null")
    if t == "BINARY":
        return f"X'{'00' * (col.length or 0) if col.base == 'binary' else ''}'"
    if t in ("DATE", "TIMESTAMP_NTZ", "TIMESTAMP"):
        return None  # zero date/datetime, which decodes to NULL
    if t == "STRING":
        return sql_string("")
    return None


def backfill_sql(col: Column) -> str | None:
    """The Spark literal that rows existing when `col` is added get (AddColumn.backfill_sql)."""
    if col.has_default and col.default is not None:
        return spark_literal(col, col.default)
    if not col.nullable and not col.has_default:
        return implicit_default(col)
    return None
