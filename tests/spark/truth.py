"""Compare Delta targets with a workload history's truth, value by value, in one canonical form."""

from __future__ import annotations

import base64
import datetime as dt
from collections import Counter
from decimal import Decimal
from typing import Any

from testkit import values as V
from testkit.history import json_value
from ticdc_sync.core.upstream import Column, TableSchema


def schema_sql(schema: TableSchema) -> str:
    """CREATE TABLE text for a seed schema (schema/*.sql)."""
    cols = []
    for c in schema.columns:
        s = f"`{c.name}` {c.type_sql()}"
        if c.binary and c.base in ("char", "varchar"):
            s = f"`{c.name}` {'binary' if c.base == 'char' else 'varbinary'}({c.length})"
        if not c.nullable:
            s += " NOT NULL"
        if c.has_default and c.default is not None:
            s += " DEFAULT '" + c.default.replace("'", "''") + "'"
        cols.append(s)
    if schema.primary_key:
        cols.append("PRIMARY KEY (" + ", ".join(f"`{k}`" for k in schema.primary_key) + ")")
    for uk in schema.unique_keys:
        cols.append("UNIQUE KEY (" + ", ".join(f"`{k}`" for k in uk) + ")")
    return f"CREATE TABLE `{schema.db}`.`{schema.table}` (\n  " + ",\n  ".join(cols) + "\n);\n"


def canon_truth(col: Column | None, v: Any) -> Any:
    if v is None:
        return None
    if col is not None and V.base_of(col) == "time":
        return V.fmt_time(v, col.fsp or 0)
    if isinstance(v, float) and col is not None and V.base_of(col) == "float":
        return round(v, 4)
    return json_value(col, v)


def canon_delta(col: Column | None, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, Decimal):
        if col is not None and V.base_of(col) in (
            "tinyint",
            "smallint",
            "mediumint",
            "int",
            "bigint",
            "bit",
        ):
            return int(v)  # bigint unsigned / bit(64) land as DECIMAL(20,0)
        return json_value(col, v) if col is not None else str(v)
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dt.datetime):
        if col is not None and V.base_of(col) == "timestamp":
            return v.isoformat(timespec="microseconds") + "Z"
        return v.isoformat(sep=" ", timespec="microseconds")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, float) and col is not None and V.base_of(col) == "float":
        return round(v, 4)
    return v


def assert_table_equals(
    rows: list[dict], truth: list[dict], schema: TableSchema, what: str
) -> None:
    keys = schema.handle_key()

    def key_of(r: dict) -> tuple:
        return tuple(str(r[k]) for k in keys)

    # A key twice is a row doubled (a change applied twice), whatever its values.
    seen = Counter(key_of(r) for r in rows)
    twice = sorted(k for k, n in seen.items() if n > 1)
    assert not twice, f"{what}: keys present more than once {twice[:5]}"
    got = {key_of(r): {k: canon_delta(schema.column(k), v) for k, v in r.items()} for r in rows}
    want = {key_of(r): {k: canon_truth(schema.column(k), v) for k, v in r.items()} for r in truth}
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"{what}: missing keys {missing[:5]}, extra keys {extra[:5]}"
    for k in sorted(want):
        w, g = want[k], got[k]
        diff = {c: (g.get(c), w[c]) for c in w if g.get(c) != w[c]}
        assert not diff, f"{what}: key {k}: (got, want) {diff}"
