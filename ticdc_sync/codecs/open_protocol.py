"""TiCDC Open Protocol value conversion: raw column `v` text to Delta values.

`value_sql` / `fits_sql` return Spark SQL text evaluated by the engine at apply time.
Rules are codec facts 2.4: ints/floats are JSON numbers (floats may use exponent form),
DECIMAL/dates/times are strings, TEXT and BLOB (codes 249-252) are base64, binary
CHAR/VARCHAR use Go `strconv.Quote` escapes, ENUM/SET are index/bitmask, BIT an unsigned
integer. Pure Python; never imports pyspark.
"""

from __future__ import annotations

from ticdc_sync.codecs import _sql
from ticdc_sync.core import datatypes
from ticdc_sync.core.model import SourceOptions
from ticdc_sync.core.upstream import Column

_TEXT_BLOB = ("tinytext", "text", "mediumtext", "longtext")
_BLOBS = ("tinyblob", "blob", "mediumblob", "longblob")


def _is_quoted_binary(col: Column) -> bool:
    b = _sql.base(col)
    return b in ("binary", "varbinary") or (b in ("char", "varchar") and col.binary)


def value_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL converting `raw` (Open Protocol `v` text) to `datatypes.delta_type(col)`."""
    b = _sql.base(col)
    if b in datatypes.INTEGER_TYPES:
        return _sql.integer(col, raw)
    if b in ("float", "double"):
        return _sql.floating(col, raw)  # Go shortest form; may be `1e+21` (facts 2.4)
    if b == "decimal":
        return _sql.decimal(col, raw)
    if b in _TEXT_BLOB:
        return _sql.base64_text(raw)  # base64 even for TEXT (facts 2.4)
    if b in _BLOBS:
        return _sql.base64_binary(raw)
    if _is_quoted_binary(col):
        return _sql.go_unquote(raw)
    if b in datatypes.SPATIAL_TYPES:
        return _sql.base64_binary(raw)
    if b == "date":
        return _sql.date(raw)
    if b == "datetime":
        return _sql.datetime_ntz(raw)
    if b == "timestamp":
        return _sql.wall_clock_timestamp(raw, options.time_zone)  # server tz (facts 0.1)
    if b == "time":
        return _sql.time_text(raw)
    if b == "year":
        return _sql.year(raw)
    if b == "enum":
        return _sql.enum_from_index(col, raw)
    if b == "set":
        return _sql.set_from_bitmask(col, raw)
    if b == "bit":
        return _sql.bit_from_uint(col, raw)
    return _sql.text(raw)  # char/varchar (plain UTF-8), json, vector


def fits_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL boolean: `raw` is NULL or converts to the column type without loss."""
    value = value_sql(col, raw, options)
    if (
        (b := _sql.base(col)) in _TEXT_BLOB
        or b in _BLOBS
        or _is_quoted_binary(col)
        or b in datatypes.SPATIAL_TYPES
    ):
        return _sql.fits(raw, value)
    return _sql.index_encoded_fits(col, raw, value)
