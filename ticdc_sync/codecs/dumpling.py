"""Dumpling export values (an initial load) to Delta values, as Spark SQL text.

Dumpling writes each value as TiDB's text protocol returns it (dumpling/export/sql_type.go):
numbers as their text; DECIMAL exact; dates, DATETIME and TIME as `Time.String()` /
`Duration.String()` text; TIMESTAMP as wall clock in the export session's time zone; YEAR
as digits; ENUM as the member name and SET as member names joined by commas (not the index
and bitmask Canal-JSON carries); BIT as its bytes, big-endian; BINARY/VARBINARY/BLOB as raw
bytes; text and JSON as UTF-8. The reader (`spark/apply/load.py`) undoes the file's quoting and
escapes and hands every value over as ISO-8859-1 text: one character per byte of the value,
so binary values come through byte for byte, as in Canal-JSON (codec facts 1.2).

`value_sql` / `fits_sql` have the signatures of the other codecs; the row typing of
`spark/apply/rows.py` uses them for the load exactly as for change events. Pure Python: builds
text, never imports pyspark.
"""

from __future__ import annotations

from ticdc_sync.codecs import _sql
from ticdc_sync.core import datatypes
from ticdc_sync.core.model import SourceOptions
from ticdc_sync.core.upstream import Column


def written_bare(col: Column) -> bool:
    """Whether Dumpling writes the column's values bare in a CSV file: numbers (integer,
    float, double and decimal types) are; every other value is between delimiters, escaped
    (sql_type.go: SQLTypeNumber against SQLTypeString and SQLTypeBytes)."""
    return _sql.base(col) in _NUMBERS


_NUMBERS = (*datatypes.INTEGER_TYPES, "float", "double", "decimal")


def utf8(raw: str) -> str:
    """The UTF-8 text whose bytes `raw` holds one per character; NULL when not UTF-8. A value
    of ASCII characters only (as many bytes as characters: every other character takes two
    in Spark's UTF-8 strings) is its own text, without the conversion to bytes and back."""
    convert = f"CAST(try_validate_utf8(encode({raw}, 'ISO-8859-1')) AS STRING)"
    return f"IF(octet_length({raw}) = char_length({raw}), {raw}, {convert})"


def _bit(col: Column, raw: str) -> str:
    """BIT(n) as its big-endian bytes: BOOLEAN for bit(1), else BIGINT / DECIMAL(20,0)."""
    t = datatypes.delta_type(col)
    n = f"conv(hex(encode({raw}, 'ISO-8859-1')), 16, 10)"
    if t == "BOOLEAN":
        return f"CASE {n} WHEN '0' THEN false WHEN '1' THEN true ELSE CAST(NULL AS BOOLEAN) END"
    # At most 8 bytes: conv() works on 64 bits.
    return f"IF(length({raw}) BETWEEN 1 AND 8, try_cast({n} AS {t}), CAST(NULL AS {t}))"


def value_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL converting `raw` (one character per byte) to `datatypes.delta_type(col)`."""
    b = _sql.base(col)
    t = datatypes.delta_type(col)
    if b in datatypes.INTEGER_TYPES:
        return _sql.integer(col, raw)
    if b in ("float", "double"):
        return _sql.floating(col, raw)
    if b == "decimal":
        return _sql.decimal(col, raw)
    if b == "bit":
        return _bit(col, raw)
    if t == "BINARY":
        return _sql.iso_8859_1(raw)
    if b == "date":
        return _sql.date(raw)
    if b == "datetime":
        return _sql.datetime_ntz(raw)
    if b == "timestamp":
        return _sql.wall_clock_timestamp(raw, options.time_zone)
    if b == "time":
        return _sql.time_text(raw)
    if b == "year":
        return _sql.year(raw)
    return utf8(raw)  # char/varchar/text, enum and set names, json, unknown


def fits_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL boolean: `raw` is NULL or converts to the column type without loss."""
    b = _sql.base(col)
    value = value_sql(col, raw, options)
    if b == "bit":
        return _sql.bit_fits(col, value, raw)
    if b == "enum" and col.members:
        return _sql.enum_name_fits(col, raw, value)
    if b == "set" and col.members:
        return _sql.set_names_fit(col, raw, value)
    if datatypes.delta_type(col) == "BINARY" or b in ("enum", "set", "json"):
        return _sql.fits(raw, value)
    if b in datatypes.TEXT_TYPES or b not in _INDEX_ENCODED:
        return _sql.fits(raw, value)
    return _sql.index_encoded_fits(col, raw, value)


# The types whose text Dumpling writes as Canal-JSON does (numbers, temporal text, YEAR):
# their fit checks are shared (codec facts 1.2).
_INDEX_ENCODED = (
    *datatypes.INTEGER_TYPES,
    "float",
    "double",
    "decimal",
    "date",
    "datetime",
    "timestamp",
    "time",
    "year",
)
