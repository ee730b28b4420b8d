"""Canal-JSON (TiCDC flavour) value conversion: raw text in `before`/`after` to Delta values.

`value_sql` / `fits_sql` return Spark SQL text for the engine to evaluate at apply time,
once the table's schema is known. Every Canal value is a JSON string (codec facts 1.2), so
`raw` is that string. Pure Python: builds text, never imports pyspark, never decodes rows.
"""

from __future__ import annotations

from ticdc_sync.codecs import _sql
from ticdc_sync.core import datatypes
from ticdc_sync.core.model import SourceOptions
from ticdc_sync.core.upstream import Column


def value_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL converting `raw` (Canal text) to `datatypes.delta_type(col)`."""
    b = _sql.base(col)
    t = datatypes.delta_type(col)
    if b in datatypes.INTEGER_TYPES:
        return _sql.integer(col, raw)
    if b in ("float", "double"):
        return _sql.floating(col, raw)  # FormatFloat 'f': never exponent form (1.2)
    if b == "decimal":
        return _sql.decimal(col, raw)
    if t == "BINARY":
        # binary/varbinary/blob (and spatial): ISO-8859-1 code points (codec facts 1.2)
        return _sql.iso_8859_1(raw)
    if b == "date":
        return _sql.date(raw)
    if b == "datetime":
        return _sql.datetime_ntz(raw)
    if b == "timestamp":
        # wall clock in the TiCDC server tz, no zone marker (codec facts 0.1, tiflow #10581)
        return _sql.wall_clock_timestamp(raw, options.time_zone)
    if b == "time":
        return _sql.time_text(raw)
    if b == "year":
        return _sql.year(raw)
    if b == "enum":
        return _sql.enum_from_index(col, raw)  # 1-based index (tiflow #8491)
    if b == "set":
        return _sql.set_from_bitmask(col, raw)
    if b == "bit":
        return _sql.bit_from_uint(col, raw)
    return _sql.text(raw)  # char/varchar/text, json, vector, unknown


def fits_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL boolean: `raw` is NULL or converts to the column type without loss."""
    value = value_sql(col, raw, options)
    if datatypes.delta_type(col) == "BINARY":
        return _sql.fits(raw, value)
    return _sql.index_encoded_fits(col, raw, value)
