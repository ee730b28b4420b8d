"""Upstream (MySQL/TiDB) table schemas as plain values: `Column`, `TableSchema`, a table's
`Version` and its `Key`; the core's shared types, which every module may import.

These are what schema history stores, what `ddl.py` produces and transforms, what
`datatypes.py` maps to Delta types and what the codecs use to decode values exactly
(enum/set members, unsigned, fsp, binary charset). Pure Python; no pyspark, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Column:
    """One upstream column.

    `base` is the lower-case MySQL type name without parameters ("int", "varchar",
    "decimal", "enum", "timestamp", ...). `length` is the display width / char length /
    bit count; `precision`/`scale` for decimal; `fsp` for time types; `members` the
    enum/set member names in definition order. `binary` is true for the binary charset
    (binary/varbinary/blob family). `default` is the DEFAULT as SQL literal text with
    quotes removed for strings, or None; `has_default` distinguishes DEFAULT NULL.
    `exact` is false when the type was inferred from protocol metadata that lacks
    parameters (Canal `mysqlType` without lengths, say).
    """

    name: str
    base: str
    unsigned: bool = False
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    members: tuple[str, ...] = ()
    binary: bool = False
    nullable: bool = True
    has_default: bool = False
    default: str | None = None
    comment: str | None = None
    exact: bool = True

    def with_(self, **changes: Any) -> Column:
        return replace(self, **changes)

    def type_sql(self) -> str:
        """MySQL type text, e.g. `decimal(10,2) unsigned`, `enum('a','b')`, `varchar(20)`."""
        b = self.base
        if b in ("enum", "set"):
            inner = ",".join("'" + m.replace("'", "''") + "'" for m in self.members)
            s = f"{b}({inner})"
        elif b in ("decimal",) and self.precision is not None:
            s = f"{b}({self.precision},{self.scale or 0})"
        elif b in ("datetime", "timestamp", "time") and self.fsp:
            s = f"{b}({self.fsp})"
        elif self.length is not None and b not in ("date", "datetime", "timestamp", "time", "json"):
            s = f"{b}({self.length})"
        else:
            s = b
        if self.unsigned:
            s += " unsigned"
        return s


@dataclass(frozen=True, slots=True)
class TableSchema:
    """One upstream table's schema at one point in its history."""

    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()
    comment: str | None = None
    exact: bool = True
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    # The table's PARTITION BY clause (canonical text, `ddl.partitioning`), None when it is
    # not partitioned or its partitioning is not known (a schema from protocol metadata).
    partitioning: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.table}"

    def column(self, name: str) -> Column | None:
        """Case-insensitive lookup, as MySQL column names are case-insensitive."""
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        return None

    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def handle_key(self) -> tuple[str, ...]:
        """The PK, else the first unique key whose columns are all NOT NULL (TiCDC's handle key)."""
        if self.primary_key:
            return self.primary_key
        for uk in self.unique_keys:
            cols = [self.column(n) for n in uk]
            if all(c is not None and not c.nullable for c in cols):
                return uk
        return ()

    def with_(self, **changes: Any) -> TableSchema:
        return replace(self, **changes)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys) for state tables and plans."""
        d = asdict(self)
        d.pop("extra", None)
        if d["partitioning"] is None:
            del d["partitioning"]  # the JSON of a table without one stays as it always was
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> TableSchema:
        d = json.loads(text)
        cols = tuple(
            Column(**{**c, "members": tuple(c.get("members") or ())}) for c in d["columns"]
        )
        return TableSchema(
            db=d["db"],
            table=d["table"],
            columns=cols,
            primary_key=tuple(d.get("primary_key") or ()),
            unique_keys=tuple(tuple(u) for u in d.get("unique_keys") or ()),
            comment=d.get("comment"),
            exact=d.get("exact", True),
            partitioning=d.get("partitioning"),
        )


Key = tuple[str, str]  # lower-cased (db, table)


def key(db: str, table: str) -> Key:
    """An upstream table's name as looked up (MySQL table names compare case-insensitively
    in TiDB by default)."""
    return (db.lower(), table.lower())


@dataclass(frozen=True, slots=True)
class Version:
    """One version of an upstream table: `schema` from `commit_ts` on (None: the table does
    not exist from then on, dropped or renamed away)."""

    commit_ts: int
    schema: TableSchema | None
    ddl: str = ""
