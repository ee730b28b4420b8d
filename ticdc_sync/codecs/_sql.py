"""Spark SQL text fragments shared by the per-protocol value converters.

Every function here takes a Spark SQL expression (text) that yields the column's raw text
(as staged by `ticdc_sync.spark.staging.decode`: JSON quoting removed, numbers as their literal
text) and returns a new expression (text). Nothing here touches Spark; the engine puts the
text into `selectExpr`/`MERGE`. Expressions never raise on bad input (no ANSI casts, no
`decode`/`encode` on invalid input): a value that cannot be converted becomes NULL and the
matching `fits_sql` is false, so the engine can report or quarantine it.
"""

from __future__ import annotations

from ticdc_sync.core import datatypes
from ticdc_sync.core.sqlgen import sql_string
from ticdc_sync.core.upstream import Column

TWO_64 = "18446744073709551616"


def base(col: Column) -> str:
    return datatypes.normalize_base(col.base)


def fits(raw: str, value: str, extra: str | None = None) -> str:
    """`raw IS NULL OR (value IS NOT NULL AND extra)`."""
    cond = f"({value}) IS NOT NULL"
    if extra:
        cond = f"{cond} AND ({extra})"
    return f"(({raw}) IS NULL OR ({cond}))"


def rlike(raw: str, pattern: str) -> str:
    return f"(({raw}) RLIKE {sql_string(pattern)})"


INT_RE = r"^\s*-?[0-9]+\s*$"
UINT_RE = r"^\s*[0-9]+\s*$"


def integer(col: Column, raw: str) -> str:
    """Signed/unsigned integer text to the column's Delta type (DESIGN §2: unsigned widens)."""
    t = datatypes.delta_type(col)
    return f"try_cast(trim({raw}) AS {t})"


def integer_fits(col: Column, raw: str) -> str:
    return fits(raw, integer(col, raw), rlike(raw, UINT_RE if col.unsigned else INT_RE))


def floating(col: Column, raw: str) -> str:
    return f"try_cast(trim({raw}) AS {datatypes.delta_type(col)})"


def floating_fits(col: Column, raw: str) -> str:
    v = floating(col, raw)
    return fits(raw, v, f"NOT isnan({v}) AND abs({v}) < double('Infinity')")


def decimal(col: Column, raw: str) -> str:
    t = datatypes.delta_type(col)
    if t == "STRING":  # precision > 38: kept as text (lossy mapping named by datatypes)
        return f"({raw})"
    return f"try_cast(trim({raw}) AS {t})"


def decimal_exact_fits(col: Column, raw: str) -> str:
    """Exact decimal text (Canal, Open Protocol): no digits beyond the scale may be lost."""
    t = datatypes.delta_type(col)
    if t == "STRING":
        return fits(raw, raw, rlike(raw, r"^\s*-?[0-9]+(\.[0-9]+)?\s*$"))
    scale = col.scale if col.scale is not None else 0
    frac = (r"(\.[0-9]{0," + str(scale) + r"}0*)?") if scale else r"(\.0*)?"
    return fits(raw, decimal(col, raw), rlike(raw, r"^\s*-?[0-9]*" + frac + r"\s*$"))


def text(raw: str) -> str:
    return f"({raw})"


def iso_8859_1(raw: str) -> str:
    """Canal-JSON binary: each code point U+0000-U+00FF is one byte (codec facts 1.2)."""
    return (
        f"IF(({raw}) RLIKE '[^\\\\x00-\\\\xff]', CAST(NULL AS BINARY), encode({raw}, 'ISO-8859-1'))"
    )


def base64_binary(raw: str) -> str:
    return f"try_to_binary({raw}, 'base64')"


def base64_text(raw: str) -> str:
    """Base64 of UTF-8 text (Open Protocol TEXT codes 249-252). Invalid UTF-8 becomes NULL."""
    b = base64_binary(raw)
    return f"CAST(try_validate_utf8({b}) AS STRING)"


def date(raw: str) -> str:
    return f"try_cast(trim({raw}) AS DATE)"


ZERO_DATE_RE = r"^\s*0000-00-00"
DATE_RE = r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}\s*$"
DATETIME_RE = r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?\s*$"


def date_fits(raw: str) -> str:
    zero = rlike(raw, ZERO_DATE_RE)
    return f"({zero} OR {fits(raw, date(raw), rlike(raw, DATE_RE))})"


def datetime_ntz(raw: str) -> str:
    return f"try_cast(trim({raw}) AS TIMESTAMP_NTZ)"


def datetime_fits(raw: str, value: str) -> str:
    zero = rlike(raw, ZERO_DATE_RE)
    return f"({zero} OR {fits(raw, value, rlike(raw, DATETIME_RE))})"


def zone_suffix(time_zone: str) -> str:
    """The zone text appended to a wall-clock string so that CAST(... AS TIMESTAMP) reads it there."""
    tz = time_zone.strip() or "UTC"
    return tz


def wall_clock_timestamp(raw: str, time_zone: str) -> str:
    """TIMESTAMP wall-clock text in the TiCDC server zone -> TIMESTAMP (codec facts 0.1).

    The zone is appended to the text before the cast, so the result does not depend on the
    Spark session time zone (to_utc_timestamp would).
    """
    guard = rlike(raw, DATETIME_RE)
    zone = sql_string(" " + zone_suffix(time_zone))
    return (
        f"IF({guard}, try_cast(concat(trim({raw}), {zone}) AS TIMESTAMP), CAST(NULL AS TIMESTAMP))"
    )


def time_text(raw: str) -> str:
    return f"IF({rlike(raw, TIME_RE)}, trim({raw}), CAST(NULL AS STRING))"


TIME_RE = r"^\s*-?[0-9]{2,3}:[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?\s*$"


def year(raw: str) -> str:
    return f"try_cast(trim({raw}) AS INT)"


def year_fits(raw: str) -> str:
    v = year(raw)
    return fits(raw, v, f"{rlike(raw, UINT_RE)} AND ({v} = 0 OR {v} BETWEEN 1901 AND 2155)")


def enum_from_index(col: Column, raw: str) -> str:
    """ENUM as 1-based index (Canal, Open Protocol): 0 is the invalid value ''; unknown members keep the text."""
    if not col.members:
        return f"trim({raw})"
    arr = "array(" + ", ".join(sql_string(m) for m in col.members) + ")"
    i = f"try_cast(trim({raw}) AS INT)"
    return (
        f"CASE WHEN {i} = 0 THEN '' WHEN {i} BETWEEN 1 AND {len(col.members)} "
        f"THEN element_at({arr}, {i}) ELSE CAST(NULL AS STRING) END"
    )


def enum_from_index_fits(col: Column, raw: str) -> str:
    return fits(raw, enum_from_index(col, raw), rlike(raw, UINT_RE))


def enum_name_fits(col: Column, raw: str, text: str) -> str:
    """ENUM given by its member's name (Debezium, Dumpling): NULL, '' (MySQL's invalid
    value) or a member. `text` is the SQL for the name as read from `raw`."""
    allowed = ", ".join(sql_string(m) for m in ("", *col.members))
    return f"(({raw}) IS NULL OR ({text}) IN ({allowed}))"


def set_names_fit(col: Column, raw: str, text: str) -> str:
    """SET given by its members' names joined with ',' (Debezium, Dumpling): NULL, '' or
    members only. `text` is the SQL for the names as read from `raw`."""
    arr = "array(" + ", ".join(sql_string(m) for m in col.members) + ")"
    return (
        f"(({raw}) IS NULL OR ({text}) = '' OR "
        f"(({text}) IS NOT NULL AND size(array_except(split({text}, ','), {arr})) = 0))"
    )


def set_from_bitmask(col: Column, raw: str) -> str:
    """SET as bitmask (Canal, Open Protocol): bit i is member i+1, joined in definition order."""
    if not col.members:
        return f"trim({raw})"
    arr = "array(" + ", ".join(sql_string(m) for m in col.members) + ")"
    bits = f"reverse(conv(trim({raw}), 10, 2))"
    n = len(col.members)
    return (
        f"IF({rlike(raw, UINT_RE)} AND length({bits}) <= {n}, "
        f"array_join(filter({arr}, (_m, _i) -> substr({bits}, _i + 1, 1) = '1'), ','), "
        f"CAST(NULL AS STRING))"
    )


def set_from_bitmask_fits(col: Column, raw: str) -> str:
    return fits(raw, set_from_bitmask(col, raw))


def bit_from_uint(col: Column, raw: str) -> str:
    """BIT as an unsigned integer (Canal, Open Protocol): bit(1) BOOLEAN, else BIGINT/DECIMAL(20,0)."""
    t = datatypes.delta_type(col)
    if t == "BOOLEAN":
        return f"CASE trim({raw}) WHEN '0' THEN false WHEN '1' THEN true ELSE CAST(NULL AS BOOLEAN) END"
    return f"IF({rlike(raw, UINT_RE)}, try_cast(trim({raw}) AS {t}), CAST(NULL AS {t}))"


def bit_fits(col: Column, value: str, raw: str) -> str:
    n = col.length if col.length is not None else 1
    t = datatypes.delta_type(col)
    if t == "BOOLEAN":
        return fits(raw, value)
    return fits(raw, value, f"{value} >= 0 AND {value} < {2**n}")


def go_unquote(raw: str) -> str:
    """Undo Go `strconv.Quote` (without the outer quotes) into bytes (codec facts 2.4).

    Open Protocol writes binary CHAR/VARCHAR as Go escape syntax. Spark SQL has no such
    function, so the text is tokenised with `regexp_extract_all` into escapes and single
    characters, each token becomes hex (named escapes by table, `\\xHH` as the byte,
    `\\uHHHH`/`\\UHHHHHHHH` as the code point's UTF-8, other characters as their UTF-8),
    and `unhex` of the joined hex is the value. Invalid escapes make the value NULL.
    """
    tok = "_gq"
    cp = f"conv(substr({tok}, 3), 16, 10)"
    named = (
        f"CASE substr({tok}, 2, 1) WHEN 'a' THEN '07' WHEN 'b' THEN '08' WHEN 'f' THEN '0C' "
        f"WHEN 'n' THEN '0A' WHEN 'r' THEN '0D' WHEN 't' THEN '09' WHEN 'v' THEN '0B' "
        f"WHEN '\\\\' THEN '5C' WHEN '\"' THEN '22' WHEN '\\'' THEN '27' ELSE 'ZZ' END"
    )
    cpv = f"CAST({cp} AS BIGINT)"

    # The code point's UTF-8 bytes, computed arithmetically: Spark 4.2 has no UTF-32BE
    # charset for decode(), and this keeps the expression free of charset tables.
    def byte(expr: str) -> str:
        return f"lpad(hex({expr}), 2, '0')"

    utf8 = (
        f"CASE WHEN {cpv} < 128 THEN {byte(cpv)} "
        f"WHEN {cpv} < 2048 THEN concat({byte(f'192 | shiftright({cpv}, 6)')}, "
        f"{byte(f'128 | ({cpv} & 63)')}) "
        f"WHEN {cpv} < 65536 THEN concat({byte(f'224 | shiftright({cpv}, 12)')}, "
        f"{byte(f'128 | (shiftright({cpv}, 6) & 63)')}, {byte(f'128 | ({cpv} & 63)')}) "
        f"ELSE concat({byte(f'240 | shiftright({cpv}, 18)')}, "
        f"{byte(f'128 | (shiftright({cpv}, 12) & 63)')}, "
        f"{byte(f'128 | (shiftright({cpv}, 6) & 63)')}, {byte(f'128 | ({cpv} & 63)')}) END"
    )
    unicode = f"IF({cpv} BETWEEN 55296 AND 57343 OR {cpv} > 1114111, 'ZZ', {utf8})"
    per_token = (
        f"CASE WHEN length({tok}) = 1 THEN hex(encode({tok}, 'UTF-8')) "
        f"WHEN length({tok}) = 2 THEN {named} "
        f"WHEN length({tok}) = 4 THEN upper(substr({tok}, 3)) "
        f"ELSE {unicode} END"
    )
    pattern = sql_string(r"(?s)\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)|.")
    joined = (
        f"array_join(transform(regexp_extract_all({raw}, {pattern}, 0), {tok} -> {per_token}), '')"
    )
    return f"IF(({raw}) IS NULL, CAST(NULL AS BINARY), IF(instr({joined}, 'Z') > 0, CAST(NULL AS BINARY), unhex({joined})))"


def index_encoded_fits(col: Column, raw: str, value: str) -> str:
    """The fit check shared by Canal-JSON and Open Protocol, which carry numbers, temporal
    text, enum indexes, set bitmasks and bit values the same way (codec facts 1.2, 2.4).
    `value` is the protocol's converted expression for `raw`. Binary types are the
    protocols' own business and are checked before this is called."""
    b = base(col)
    if b in datatypes.INTEGER_TYPES:
        return integer_fits(col, raw)
    if b in ("float", "double"):
        return floating_fits(col, raw)
    if b == "decimal":
        return decimal_exact_fits(col, raw)
    if b == "date":
        return date_fits(raw)
    if b in ("datetime", "timestamp"):
        return datetime_fits(raw, value)
    if b == "time":
        return fits(raw, time_text(raw))
    if b == "year":
        return year_fits(raw)
    if b == "enum":
        return enum_from_index_fits(col, raw)
    if b == "set":
        return set_from_bitmask_fits(col, raw)
    if b == "bit":
        return bit_fits(col, value, raw)
    return "true"
