"""Debezium (TiCDC flavour and the plain MySQL connector) value conversion to Delta values.

`value_sql` / `fits_sql` return Spark SQL text evaluated by the engine at apply time.
Rules are codec facts 3.2: BIGINT UNSIGNED wraps negative (add 2^64), DECIMAL is a double,
binary is base64, BIT(n>1) is little-endian base64, DATE is days, DATETIME is ms (fsp<=3)
or µs, TIMESTAMP is a UTC ZonedTimestamp string, TIME is µs, ENUM/SET are names. The plain
connector's precise forms (DECIMAL and BIGINT UNSIGNED as base64 big-endian bytes) are
accepted too. Pure Python; never imports pyspark.
"""

from __future__ import annotations

from ticdc_sync.codecs import _sql
from ticdc_sync.core import datatypes
from ticdc_sync.core.model import SourceOptions
from ticdc_sync.core.upstream import Column

_NUM_RE = r"^\s*-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\s*$"


def _be_unscaled(raw: str) -> str:
    """Base64 of a big-endian two's-complement integer (Kafka Connect Decimal), as DECIMAL(38,0).

    Up to 8 bytes (conv works on 64 bits); longer values become NULL.
    """
    h = f"hex(try_to_binary({raw}, 'base64'))"
    u = f"CAST(conv({h}, 16, 10) AS DECIMAL(38,0))"
    span = " ".join(
        f"WHEN {2 * n} THEN CAST('{2 ** (8 * n)}' AS DECIMAL(38,0))" for n in range(1, 9)
    )
    return (
        f"CASE WHEN length({h}) BETWEEN 2 AND 16 THEN "
        f"IF(substr({h}, 1, 1) >= '8', {u} - CASE length({h}) {span} END, {u}) END"
    )


def _numeric_or_bytes(raw: str, scale: int, target: str) -> str:
    precise = f"try_cast(concat(CAST({_be_unscaled(raw)} AS STRING), 'e-{scale}') AS {target})"
    return f"IF({_sql.rlike(raw, _NUM_RE)}, try_cast(trim({raw}) AS {target}), {precise})"


def _micro_time(col: Column, raw: str) -> str:
    v = f"try_cast(trim({raw}) AS BIGINT)"
    a = f"abs({v})"
    hms = (
        f"concat(IF({v} < 0, '-', ''), format_string('%02d', {a} DIV 3600000000), ':', "
        f"lpad(CAST(({a} DIV 60000000) % 60 AS STRING), 2, '0'), ':', "
        f"lpad(CAST(({a} DIV 1000000) % 60 AS STRING), 2, '0')"
    )
    f = f"lpad(CAST({a} % 1000000 AS STRING), 6, '0')"
    if col.fsp:
        frac = f"'.', substr({f}, 1, {col.fsp})"
    elif col.fsp == 0:
        frac = "''"
    else:
        frac = f"IF({a} % 1000000 = 0, '', concat('.', {f}))"
    return f"IF({v} IS NULL, CAST(NULL AS STRING), {hms}, {frac}))"


def value_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL converting `raw` (Debezium field text) to `datatypes.delta_type(col)`."""
    b = _sql.base(col)
    t = datatypes.delta_type(col)
    if b == "bigint" and col.unsigned:
        # Wrapped into int64 (facts 3.2, tiflow #12064): add 2^64 to negatives.
        d = _numeric_or_bytes(raw, 0, "DECIMAL(21,0)")
        return f"CAST(IF({d} < 0, {d} + {_sql.TWO_64}, {d}) AS DECIMAL(20,0))"
    if b in datatypes.INTEGER_TYPES:
        return _sql.integer(col, raw)
    if b in ("float", "double"):
        return _sql.floating(col, raw)
    if b == "decimal":
        if t == "STRING":
            return _sql.text(raw)
        return _numeric_or_bytes(raw, col.scale or 0, t)  # a double: precision lost upstream
    if t == "BINARY":
        if b in datatypes.SPATIAL_TYPES:
            return f"try_to_binary(get_json_object({raw}, '$.wkb'), 'base64')"
        return _sql.base64_binary(raw)
    if b == "bit":
        if t == "BOOLEAN":
            return f"CASE lower(trim({raw})) WHEN 'true' THEN true WHEN 'false' THEN false ELSE CAST(NULL AS BOOLEAN) END"
        le = f"try_to_binary({raw}, 'base64')"  # little-endian bytes (facts 3.2)
        return f"IF(length({le}) BETWEEN 1 AND 8, try_cast(conv(hex(reverse({le})), 16, 10) AS {t}), CAST(NULL AS {t}))"
    if b == "date":
        return f"date_add(DATE'1970-01-01', try_cast(trim({raw}) AS INT))"
    if b == "datetime":
        unit = "MILLISECOND" if (col.fsp is None or col.fsp <= 3) else "MICROSECOND"
        return f"timestampadd({unit}, try_cast(trim({raw}) AS BIGINT), TIMESTAMP_NTZ'1970-01-01 00:00:00')"
    if b == "timestamp":
        return f"try_cast(trim({raw}) AS TIMESTAMP)"  # ZonedTimestamp, UTC with `Z`
    if b == "time":
        return _micro_time(col, raw)
    if b == "year":
        return _sql.year(raw)
    return _sql.text(raw)  # char/varchar/text, enum/set names, json, vector


def fits_sql(col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL boolean: `raw` is NULL or converts to the column type without loss."""
    b = _sql.base(col)
    v = value_sql(col, raw, options)
    if b == "bigint" and col.unsigned:
        return _sql.fits(raw, v)
    if b in datatypes.INTEGER_TYPES:
        return _sql.integer_fits(col, raw)
    if b in ("float", "double"):
        return _sql.floating_fits(col, raw)
    if b == "bit" and datatypes.delta_type(col) != "BOOLEAN":
        return _sql.bit_fits(col, v, raw)
    if b == "enum" and col.members:
        return _sql.enum_name_fits(col, raw, raw)
    if b == "set" and col.members:
        return _sql.set_names_fit(col, raw, raw)
    if b == "year":
        return _sql.year_fits(raw)
    return _sql.fits(raw, v)
