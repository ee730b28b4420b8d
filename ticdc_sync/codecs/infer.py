"""Upstream columns from protocol metadata (`col_meta`), for tables without DDL history.

Canal `mysqlType` (`int unsigned`, or `decimal(10,4)`/`enum('a','b')` with
content-compatible, codec facts 1.3), Open Protocol `"<type code>,<flags>"` (facts 2.3,
2.4) and Debezium field schema JSON (with `tidb_type` from the TiDB extension, facts 3.1,
or plain connector logical names). Parameters the metadata lacks leave the column
`exact=False`, so `plan` names the mapping as lossy. Pure Python; no pyspark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from ticdc_sync.core import datatypes
from ticdc_sync.core.model import Protocol
from ticdc_sync.core.upstream import Column, TableSchema

# Types whose Delta mapping or value conversion depends on parameters.
_NEEDS_PARAMS = ("decimal", "bit", "enum", "set")

# Open Protocol column type codes (tidb pkg/parser/mysql/type.go; facts 2.4).
_OPEN_CODES: dict[int, str] = {
    0: "decimal",
    1: "tinyint",
    2: "smallint",
    3: "int",
    4: "float",
    5: "double",
    6: "null",
    7: "timestamp",
    8: "bigint",
    9: "mediumint",
    10: "date",
    11: "time",
    12: "datetime",
    13: "year",
    14: "date",
    15: "varchar",
    16: "bit",
    225: "vector",
    245: "json",
    246: "decimal",
    247: "enum",
    248: "set",
    249: "tinytext",
    250: "mediumtext",
    251: "longtext",
    252: "text",
    253: "varchar",
    254: "char",
    255: "geometry",
}
_TEXT_TO_BLOB = {
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}
_CHAR_TO_BINARY = {"char": "binary", "varchar": "varbinary"}

_FLAG_BINARY = 0x01
_FLAG_NULLABLE = 0x40
_FLAG_UNSIGNED = 0x80

_TYPE_RE = re.compile(
    r"^\s*([a-zA-Z][a-zA-Z0-9 ]*?)\s*(?:\((.*)\))?\s*((?:unsigned|signed|zerofill|\s)*)$",
    re.S | re.I,
)


def _split_members(inner: str) -> tuple[str, ...]:
    """`'a','b''c'` -> ('a', "b'c"); MySQL quoting with doubled quotes or backslashes."""
    out: list[str] = []
    i, n = 0, len(inner)
    while i < n:
        while i < n and inner[i] in " ,\t\n":
            i += 1
        if i >= n:
            break
        q = inner[i]
        if q not in "'\"":
            j = inner.find(",", i)
            j = n if j < 0 else j
            out.append(inner[i:j].strip())
            i = j
            continue
        i += 1
        buf: list[str] = []
        while i < n:
            c = inner[i]
            if c == "\\" and i + 1 < n:
                buf.append(inner[i + 1])
                i += 2
            elif c == q and i + 1 < n and inner[i + 1] == q:
                buf.append(q)
                i += 2
            elif c == q:
                i += 1
                break
            else:
                buf.append(c)
                i += 1
        out.append("".join(buf))
    return tuple(out)


def parse_mysql_type(name: str, text: str) -> Column:
    """A MySQL type text (`varchar(16)`, `int(11) unsigned zerofill`, `enum('a')`) as a Column."""
    m = _TYPE_RE.match(text or "")
    if not m:
        return Column(name=name, base=(text or "").strip().lower() or "varchar", exact=False)
    base = datatypes.normalize_base(m.group(1))
    params = m.group(2)
    mods = (m.group(3) or "").lower()
    unsigned = "unsigned" in mods or "zerofill" in mods
    col = Column(name=name, base=base, unsigned=unsigned and base not in ("bit", "year"))
    if base in datatypes.BINARY_TYPES:
        col = col.with_(binary=True)
    if params is None:
        if base == "decimal":
            # Unknown precision: widest exact-enough choice (Paimon does the same), named lossy.
            return col.with_(precision=38, scale=18, exact=False)
        if base == "bit":
            return col.with_(length=64, exact=False)  # any BIT value fits DECIMAL(20,0)
        if base in ("tinyint",) and text.strip().lower() in ("bool", "boolean"):
            return col.with_(length=1)
        return col.with_(exact=base not in _NEEDS_PARAMS)
    if base in ("enum", "set"):
        return col.with_(members=_split_members(params))
    nums = [p.strip() for p in params.split(",")]
    try:
        ints = [int(p) for p in nums if p]
    except ValueError:
        return col.with_(exact=False)
    if base == "decimal":
        return col.with_(precision=ints[0] if ints else 10, scale=ints[1] if len(ints) > 1 else 0)
    if base in ("datetime", "timestamp", "time"):
        return col.with_(fsp=ints[0] if ints else 0)
    if base in ("float", "double"):
        return col
    return col.with_(length=ints[0] if ints else None)


def _from_canal(name: str, meta: str) -> Column:
    return parse_mysql_type(name, meta)


def _from_open(name: str, meta: str) -> Column:
    try:
        code_s, flag_s = (meta.split(",") + ["0"])[:2]
        code, flags = int(code_s), int(flag_s)
    except ValueError:
        return Column(name=name, base="varchar", exact=False)
    base = _OPEN_CODES.get(code, "varchar")
    is_string = base in ("char", "varchar") or base in _TEXT_TO_BLOB
    binary = bool(flags & _FLAG_BINARY) and is_string  # only meaningful for strings (facts 2.3)
    if binary:
        base = _CHAR_TO_BINARY.get(base) or _TEXT_TO_BLOB.get(base, base)
    col = Column(
        name=name,
        base=base,
        unsigned=bool(flags & _FLAG_UNSIGNED) and base in datatypes.INTEGER_TYPES,
        binary=binary,
        nullable=bool(flags & _FLAG_NULLABLE),
    )
    if base == "decimal":
        return col.with_(precision=38, scale=18, exact=False)
    if base == "bit":
        return col.with_(length=64, exact=False)
    return col.with_(
        exact=base not in _NEEDS_PARAMS and base not in ("char", "varchar", "binary", "varbinary")
    )


_DBZ_NAMES = {
    "io.debezium.time.Date": ("date", None),
    "io.debezium.time.Timestamp": ("datetime", 3),
    "io.debezium.time.MicroTimestamp": ("datetime", 6),
    "io.debezium.time.NanoTimestamp": ("datetime", 6),
    "io.debezium.time.ZonedTimestamp": ("timestamp", None),
    "io.debezium.time.MicroTime": ("time", 6),
    "io.debezium.time.Year": ("year", None),
    "io.debezium.data.Enum": ("enum", None),
    "io.debezium.data.EnumSet": ("set", None),
    "io.debezium.data.Bits": ("bit", None),
    "io.debezium.data.Json": ("json", None),
    "org.apache.kafka.connect.data.Decimal": ("decimal", None),
}
_DBZ_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "float32": "float",
    "double": "double",
    "float64": "double",
    "boolean": "bit",
    "string": "varchar",
    "bytes": "varbinary",
    "struct": "geometry",
}


def _from_debezium(name: str, meta: str) -> Column:
    try:
        f = json.loads(meta)
        if not isinstance(f, dict):
            raise ValueError
    except ValueError:
        return Column(name=name, base="varchar", exact=False)
    params = f.get("parameters") or {}
    lname = f.get("name")
    ftype = f.get("type")
    tidb_type = f.get("tidb_type")
    if tidb_type:
        col = parse_mysql_type(name, str(tidb_type))
    elif lname in _DBZ_NAMES:
        col = Column(name=name, base=_DBZ_NAMES[lname][0])
    else:
        col = Column(name=name, base=_DBZ_TYPES.get(str(ftype), "varchar"), exact=False)
        if col.base == "bit":
            col = col.with_(length=1, exact=True)
        if col.base == "varbinary":
            col = col.with_(binary=True)
    if lname in _DBZ_NAMES and _DBZ_NAMES[lname][1] is not None:
        col = col.with_(fsp=_DBZ_NAMES[lname][1])
    if col.base in ("enum", "set") and "allowed" in params:
        allowed = str(params["allowed"])
        col = col.with_(members=tuple(allowed.split(",")) if allowed else (), exact=True)
    if col.base == "bit":
        if "length" in params:
            col = col.with_(length=int(params["length"]), exact=True)
        elif ftype == "boolean":
            col = col.with_(length=1, exact=True)
    if col.base == "decimal":
        p = params.get("connect.decimal.precision")
        s = params.get("scale")
        if p is not None and s is not None:
            col = col.with_(precision=int(p), scale=int(s), exact=True)
        elif col.precision is None or not col.exact:
            col = col.with_(precision=38, scale=18, exact=False)
    col = col.with_(nullable=bool(f.get("optional", True)))
    if "default" in f:
        d = f["default"]
        col = col.with_(has_default=True, default=None if d is None else str(d))
    return col


def detect_protocol(meta: str) -> Protocol:
    """Guess which protocol wrote a col_meta text (JSON: Debezium; `n,n`: Open; else Canal)."""
    s = meta.strip()
    if s.startswith("{"):
        return Protocol.DEBEZIUM
    if re.fullmatch(r"\d+,\d+", s):
        return Protocol.OPEN_PROTOCOL
    return Protocol.CANAL_JSON


def column_from_meta(protocol: Protocol | str, name: str, meta: str) -> Column:
    """An upstream Column from one column's col_meta text."""
    p = Protocol(protocol)
    if p is Protocol.CANAL_JSON:
        return _from_canal(name, meta)
    if p is Protocol.OPEN_PROTOCOL:
        return _from_open(name, meta)
    return _from_debezium(name, meta)


def schema_from_meta(
    db: str,
    table: str,
    col_meta: Mapping[str, str],
    pk_names: Sequence[str] | None,
    protocol: Protocol | str | None = None,
) -> TableSchema:
    """A TableSchema from an event's col_meta map (columns in map order) and pk names.

    `protocol` is detected from the metadata text when not given.
    """
    cols: list[Column] = []
    for name, meta in col_meta.items():
        p = Protocol(protocol) if protocol else detect_protocol(meta or "")
        cols.append(column_from_meta(p, name, meta or ""))
    pk = tuple(pk_names or ())
    cols = [c.with_(nullable=False) if c.name in pk else c for c in cols]
    return TableSchema(
        db=db,
        table=table,
        columns=tuple(cols),
        primary_key=pk,
        exact=all(c.exact for c in cols),
    )
