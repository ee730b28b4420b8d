"""MySQL/TiDB column types to Delta (Spark SQL) types, and how a type change maps to Delta.

The mapping is DESIGN.md §2 "Types". `delta_type` is total: every column gets a type, and
`lossy_reason` names the mappings that lose information so `plan` can list them.
`type_change` classifies a MODIFY COLUMN as same / widen (Delta type widening) / narrow.
Pure Python; no pyspark.
"""

from __future__ import annotations

import re

from ticdc_sync.core.upstream import Column

INTEGER_TYPES = ("tinyint", "smallint", "mediumint", "int", "bigint")
TEXT_TYPES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
BINARY_TYPES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
SPATIAL_TYPES = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
)

_SIGNED = {
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "mediumint": "INT",
    "int": "INT",
    "bigint": "BIGINT",
}
# Unsigned integers widen one step so that every value fits.
_UNSIGNED = {
    "tinyint": "SMALLINT",
    "smallint": "INT",
    "mediumint": "INT",
    "int": "BIGINT",
    "bigint": "DECIMAL(20,0)",
}

# Aliases MySQL accepts, normalised to the names above.
ALIASES = {
    "integer": "int",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "int4": "int",
    "int8": "bigint",
    "middleint": "mediumint",
    "bool": "tinyint",
    "boolean": "tinyint",
    "dec": "decimal",
    "numeric": "decimal",
    "fixed": "decimal",
    "real": "double",
    "double precision": "double",
    "float4": "float",
    "float8": "double",
    "character": "char",
    "nchar": "char",
    "national char": "char",
    "nvarchar": "varchar",
    "character varying": "varchar",
    "national varchar": "varchar",
    "long": "mediumtext",
    "long varchar": "mediumtext",
    "long varbinary": "mediumblob",
    "serial": "bigint",
}


def normalize_base(name: str) -> str:
    n = " ".join(name.lower().split())
    return ALIASES.get(n, n)


def delta_type(col: Column) -> str:
    """The Delta (Spark SQL) type for an upstream column, e.g. `DECIMAL(20,0)`."""
    b = normalize_base(col.base)
    if b in INTEGER_TYPES:
        return (_UNSIGNED if col.unsigned else _SIGNED)[b]
    if b == "decimal":
        p = col.precision if col.precision is not None else 10
        s = col.scale if col.scale is not None else 0
        if p > 38:
            return "STRING"
        return f"DECIMAL({p},{s})"
    if b == "float":
        return "FLOAT"
    if b == "double":
        return "DOUBLE"
    if b in ("char", "varchar") and col.binary:
        return "BINARY"
    if b in TEXT_TYPES:
        return "STRING"
    if b in BINARY_TYPES:
        return "BINARY"
    if b == "date":
        return "DATE"
    if b == "datetime":
        return "TIMESTAMP_NTZ"
    if b == "timestamp":
        return "TIMESTAMP"
    if b == "time":
        return "STRING"
    if b == "year":
        return "INT"
    if b in ("enum", "set", "json", "vector"):
        return "STRING"
    if b == "bit":
        n = col.length if col.length is not None else 1
        if n == 1:
            return "BOOLEAN"
        if n >= 64:
            return "DECIMAL(20,0)"
        return "BIGINT"
    if b in SPATIAL_TYPES:
        return "BINARY"
    return "STRING"


def lossy_reason(col: Column) -> str | None:
    """Why this column's mapping loses information, or None when it is exact."""
    b = normalize_base(col.base)
    if b == "decimal" and (col.precision or 10) > 38:
        return f"decimal({col.precision},{col.scale or 0}) is wider than Delta's 38 digits: stored as string"
    if b in ("date", "datetime", "timestamp"):
        return None  # zero dates become NULL; listed by the decoders, not a type loss
    if b in ("enum", "set") and not col.members:
        return f"{b} members unknown (no DDL seen): values stay numeric index/bitmask text"
    if b in SPATIAL_TYPES:
        return f"{b} stored as its raw WKB bytes"
    if not col.exact:
        return f"type inferred from protocol metadata ({col.type_sql()}): lengths and precision unknown"
    return None


_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)")
_INT_RANK = {"TINYINT": 1, "SMALLINT": 2, "INT": 3, "BIGINT": 4}


def type_change(old: str, new: str) -> str:
    """Classify a Delta type change: `same`, `widen` (Delta type widening follows it) or `narrow`.

    Widening follows what open-source Delta's type widening supports: integer to a wider
    integer, integer to DECIMAL with room for its digits, FLOAT to DOUBLE, DECIMAL
    precision up with scale not decreasing (and integer digits not decreasing), DATE to
    TIMESTAMP_NTZ. Everything else (including STRING <-> BINARY) is `narrow`.
    """
    if old == new:
        return "same"
    if old in _INT_RANK and new in _INT_RANK:
        return "widen" if _INT_RANK[new] > _INT_RANK[old] else "narrow"
    if old == "FLOAT" and new == "DOUBLE":
        return "widen"
    if old in _INT_RANK and new == "DOUBLE" and _INT_RANK[old] <= 3:
        return "widen"
    mo, mn = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    if mo and mn:
        po, so = int(mo.group(1)), int(mo.group(2))
        pn, sn = int(mn.group(1)), int(mn.group(2))
        if sn >= so and (pn - sn) >= (po - so) and pn >= po:
            return "widen"
        return "narrow"
    if old in _INT_RANK and mn:
        digits = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 20}[old]
        pn, sn = int(mn.group(1)), int(mn.group(2))
        return "widen" if pn - sn >= digits else "narrow"
    if old == "DATE" and new == "TIMESTAMP_NTZ":
        return "widen"
    return "narrow"
