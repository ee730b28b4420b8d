"""Debezium `tableChanges[].table` objects (codec facts 3.3) into `TableSchema`s.

Pure Python; no pyspark.
"""

from __future__ import annotations

from typing import Any

from ticdc_sync.core.datatypes import normalize_base
from ticdc_sync.core.errors import DdlError
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.ddl.columns import TypeSpec, make_column
from ticdc_sync.ddl.tokens import ParseError

# -- Debezium tableChanges (codec facts 3.3) ----------------------------------------------------


def _unquote_member(m: str) -> str:
    m = m.strip()
    if len(m) >= 2 and m[0] == m[-1] == "'":
        return m[1:-1].replace("''", "'")
    return m


def schema_from_debezium_table(db: str, table: str, table_json: dict[str, Any]) -> TableSchema:
    """A `TableSchema` from a Debezium `tableChanges[].table` object (post-DDL schema)."""
    cols: list[tuple[int, Column]] = []
    for i, c in enumerate(table_json.get("columns") or []):
        type_name = str(c.get("typeName") or c.get("typeExpression") or "").strip()
        words = type_name.lower().split()
        unsigned = "unsigned" in words or "zerofill" in words
        base = " ".join(w for w in words if w not in ("unsigned", "zerofill"))
        length, scale = c.get("length"), c.get("scale")
        args: list[int] = []
        norm = normalize_base(base) if base not in ("bool", "boolean", "serial") else base
        if norm in ("datetime", "timestamp", "time"):
            args = [length] if length else []
        elif norm in ("decimal", "float", "double") and length and scale is not None:
            args = [length, scale]
        elif length and norm in ("decimal", "char", "varchar", "binary", "varbinary", "bit"):
            args = [length]
        members = [_unquote_member(m) for m in c.get("enumValues") or []]
        charset = (c.get("charsetName") or "").lower() or None
        spec = TypeSpec(base=base, args=args, members=members, unsigned=unsigned, charset=charset)
        try:
            col = make_column(c["name"], spec)
        except ParseError as e:
            raise DdlError(
                f"Debezium column {db}.{table}.{c.get('name')}: {e} (hint: check typeName/length)"
            ) from e
        dflt = c.get("defaultValueExpression")
        col = col.with_(
            nullable=bool(c.get("optional", True)),
            has_default=dflt is not None,
            default=dflt,
            comment=c.get("comment") or None,
        )
        cols.append((int(c.get("position") or i + 1), col))
    cols.sort(key=lambda pc: pc[0])
    return TableSchema(
        db=db,
        table=table,
        columns=tuple(c for _, c in cols),
        primary_key=tuple(table_json.get("primaryKeyColumnNames") or ()),
        comment=table_json.get("comment"),
    )
