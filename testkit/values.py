"""Logical Python values to TiCDC's internal column values (codec facts 0.1).

The workload speaks typed Python values (int, Decimal, float, str, bytes, date, naive
datetime, TIME as "[-]HH:MM:SS[.f]" or timedelta, enum member name, set of names, bit int,
json str). TiCDC's mounter first turns every datum into one internal Go value (a string for
temporal types and DECIMAL, an index for ENUM, a bitmask for SET, raw bytes for strings);
all three encoders render from that. This module builds those internal values, storing them
the way TiDB would (fsp rounding, BINARY(n) zero padding, FLOAT to float32).

TIMESTAMP: a naive datetime is a UTC instant (an aware one is converted to UTC); the
internal value is the wall clock in the TiCDC server time zone (codec facts 0.1). A string
is taken as that wall clock already. Pure Python; no I/O; does not decode anything.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from zoneinfo import ZoneInfo

from ticdc_sync.core.datatypes import BINARY_TYPES, INTEGER_TYPES, TEXT_TYPES, normalize_base
from ticdc_sync.core.upstream import Column

from .gojson import f32

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1)
BLOB_TYPES = ("tinytext", "text", "mediumtext", "longtext") + (
    "tinyblob",
    "blob",
    "mediumblob",
    "longblob",
)


def zone(name: str) -> dt.tzinfo:
    return UTC if name.upper() in ("UTC", "Z", "+00:00") else ZoneInfo(name)


def base_of(col: Column) -> str:
    return normalize_base(col.base)


def is_string_type(col: Column) -> bool:
    b = base_of(col)
    return b in TEXT_TYPES or b in BINARY_TYPES


def is_binary(col: Column) -> bool:
    """Charset `binary` string column (codec facts 1.2: BINARY/VARBINARY/*BLOB)."""
    b = base_of(col)
    return b in BINARY_TYPES or (b in TEXT_TYPES and col.binary)


def fsp_of(col: Column) -> int:
    return int(col.fsp or 0)


def _round_micro(micro: int, fsp: int) -> int:
    """MySQL rounds half up to `fsp` fractional digits when storing."""
    unit = 10 ** (6 - fsp)
    return ((micro + unit // 2) // unit) * unit


def round_datetime(v: dt.datetime, fsp: int) -> dt.datetime:
    micro = _round_micro(v.microsecond, fsp)
    return v.replace(microsecond=0) + dt.timedelta(microseconds=micro)


def fmt_datetime(v: dt.datetime, fsp: int) -> str:
    """TiDB `Time.String()`: `YYYY-MM-DD HH:MM:SS[.f]` with exactly fsp digits."""
    v = round_datetime(v, fsp)
    s = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    if fsp > 0:
        s += "." + f"{v.microsecond:06d}"[:fsp]
    return s


_TIME_RE = re.compile(r"^(-)?(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$")


def time_micros(v: str | dt.timedelta) -> int:
    if isinstance(v, dt.timedelta):
        return (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
    m = _TIME_RE.match(v.strip())
    if not m:
        raise ValueError(f"bad TIME value {v!r}")
    sign, h, mi, s, frac = m.groups()
    micro = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int((frac or "").ljust(6, "0"))
    return -micro if sign else micro


def fmt_time(v: str | dt.timedelta, fsp: int) -> str:
    """TiDB `Duration.String()`: `[-]HH:MM:SS[.f]`, hours may exceed 24 (codec facts 0.1)."""
    micro = time_micros(v)
    neg = micro < 0
    micro = _round_micro(abs(micro), fsp)
    secs, frac = divmod(micro, 1_000_000)
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    out = f"{'-' if neg else ''}{h:02d}:{mi:02d}:{s:02d}"
    if fsp > 0:
        out += "." + f"{frac:06d}"[:fsp]
    return out


def fmt_decimal(v: Any, scale: int) -> str:
    """`MyDecimal.String()` keeps the column scale (codec facts 0.1)."""
    d = v if isinstance(v, Decimal) else Decimal(str(v))
    q = (
        d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        if scale
        else d.quantize(Decimal(1), rounding=ROUND_HALF_UP)
    )
    s = format(q, "f")
    return "0" + s[1:] if s.startswith("-0") and q == 0 else s


def enum_index(col: Column, v: Any) -> int:
    """ENUM is a 1-based index; 0 is the invalid/empty value (codec facts 0.1)."""
    if isinstance(v, int):
        return v
    if v == "":
        return 0
    low = [m.lower() for m in col.members]
    return low.index(str(v).lower()) + 1


def set_names(v: Any) -> list[str]:
    if isinstance(v, str):
        return [p for p in v.split(",") if p]
    return [str(p) for p in v]


def set_mask(col: Column, v: Any) -> int:
    """SET is a bitmask: bit i stands for member i+1 (codec facts 0.1)."""
    if isinstance(v, int):
        return v
    low = [m.lower() for m in col.members]
    mask = 0
    for name in set_names(v):
        mask |= 1 << low.index(name.lower())
    return mask


def timestamp_wall(v: Any, tz: dt.tzinfo, fsp: int) -> str:
    """TIMESTAMP as the mounter gives it: wall clock in the TiCDC server tz (codec facts 0.1)."""
    if isinstance(v, str):
        return v
    if v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    local = round_datetime(v.astimezone(tz), fsp).replace(tzinfo=None)
    return fmt_datetime(local, fsp)


def internal(col: Column, v: Any, tz: dt.tzinfo) -> Any:
    """The mounter's internal value for `v` in column `col` (codec facts 0.1 table)."""
    if v is None:
        return None
    b = base_of(col)
    if b in INTEGER_TYPES or b == "year":
        return int(v)
    if b == "float":
        return f32(float(v))
    if b == "double":
        return float(v)
    if b == "decimal":
        return fmt_decimal(v, int(col.scale or 0))
    if b in TEXT_TYPES or b in BINARY_TYPES:
        raw = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        if b == "binary" and col.length:
            raw = raw.ljust(col.length, b"\x00")  # BINARY(n) is stored zero-padded
        return raw
    if b == "date":
        if isinstance(v, str):
            return v
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    if b == "datetime":
        if isinstance(v, str):
            return v
        return fmt_datetime(v, fsp_of(col))
    if b == "timestamp":
        return timestamp_wall(v, tz, fsp_of(col))
    if b == "time":
        return fmt_time(v, fsp_of(col))
    if b == "enum":
        return enum_index(col, v)
    if b == "set":
        return set_mask(col, v)
    if b == "bit":
        if isinstance(v, (bytes, bytearray)):
            return int.from_bytes(v, "big")
        return int(v)
    if b == "json":
        return v if isinstance(v, str) else json.dumps(v)
    if b == "vector":
        return v if isinstance(v, str) else "[" + ",".join(str(x) for x in v) + "]"
    return v if isinstance(v, (str, bytes)) else str(v)


def default_value(col: Column) -> Any:
    """The column DEFAULT as a logical value (None when there is none or it is NULL)."""
    if not col.has_default or col.default is None:
        return None
    d = col.default
    b = base_of(col)
    if d.upper().startswith("CURRENT_TIMESTAMP") or d.upper().startswith("NOW("):
        return "CURRENT_TIMESTAMP"  # the encoders apply TiCDC's special cases (codec facts 3.2)
    if b in INTEGER_TYPES or b == "year":
        return int(Decimal(d))
    if b in ("float", "double"):
        return float(d)
    if b == "decimal":
        return Decimal(d)
    if b == "bit":
        if d.lower().startswith("b'"):
            return int(d[2:-1], 2)
        return int(d)
    if b == "enum":
        return d
    if b == "set":
        return tuple(set_names(d))
    if b in BINARY_TYPES or (b in TEXT_TYPES and col.binary):
        return d.encode("latin-1", "replace")
    if b == "date":
        return dt.date.fromisoformat(d) if not d.startswith("0000") else d
    if b == "datetime":
        return dt.datetime.fromisoformat(d) if not d.startswith("0000") else d
    return d


def iter_columns(cols: Iterable[Column], row: dict[str, Any]) -> Iterable[tuple[Column, Any]]:
    for c in cols:
        yield c, row.get(c.name)
