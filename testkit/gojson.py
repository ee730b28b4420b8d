"""Go-compatible JSON text and number formatting, so encoded messages match TiCDC byte for byte.

TiCDC is written in Go: its JSON writers keep field order, escape `& < >` as `\\u0026 \\u003c
\\u003e` (codec facts 1.2), print floats with `strconv` shortest formatting, and quote binary
strings with `strconv.Quote` (codec facts 2.4). Python's `json` differs on all of these, so
the workload encoders build JSON through this module. Pure Python; no I/O; must not be used
to *decode* (decoders live in `ticdc_sync.codecs`).
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any


class Raw(str):
    """A JSON fragment written verbatim (a Go-formatted number, say)."""


def f32(v: float) -> float:
    """Round a Python float to the nearest float32 (what a FLOAT column holds)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def _shortest_sci(v: float, bits: int) -> str:
    """Shortest `%e` text that parses back to the same float32/float64 (Go's -1 precision)."""
    if v == 0:
        return "0e+00"
    target = f32(v) if bits == 32 else v
    for p in range(0, 17):
        s = f"{v:.{p}e}"
        back = float(s)
        if (f32(back) if bits == 32 else back) == target:
            return s
    return repr(v)


def format_float_f(v: float, bits: int) -> str:
    """Go `strconv.FormatFloat(v, 'f', -1, bits)`: shortest digits, never exponent."""
    if math.isnan(v) or math.isinf(v):
        return "0"  # codec facts 0.1: TiCDC's mounter turns NaN/Inf into 0
    s = _shortest_sci(v, bits)
    d = Decimal(s)
    out = format(d, "f")
    if "." in out:
        out = out.rstrip("0").rstrip(".")
    if out in ("-0", ""):
        out = "-0" if math.copysign(1.0, v) < 0 else "0"
    return out


def format_float_json(v: float, bits: int, clean_exp: bool = True) -> str:
    """Go `encoding/json` float text: 'f' form unless |v| < 1e-6 or >= 1e21, then 'e' form.

    `clean_exp` reproduces encoding/json turning `e-07` into `e-7` (jsoniter does not).
    """
    if math.isnan(v) or math.isinf(v):
        return "0"
    a = abs(v)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        s = _shortest_sci(v, bits)
        mant, exp = s.split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        sign = exp[0]
        digits = exp[1:].lstrip("0")
        digits = digits.rjust(2, "0")
        if clean_exp and sign == "-" and len(digits) == 2 and digits[0] == "0":
            digits = digits[1:]
        return f"{mant}e{sign}{digits}"
    return format_float_f(v, bits)


_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def quote(s: str) -> str:
    """A JSON string as Go writes it: `\\n \\r \\t \\" \\\\` short escapes, other control
    characters as `\\u00XX`, HTML-sensitive characters escaped (codec facts 1.2), the rest
    literal UTF-8."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20:
            out.append(f"\\u{o:04x}")
        elif ch in _HTML:
            out.append(_HTML[ch])
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(obj: Any) -> str:
    """Compact JSON preserving dict insertion order (Go struct field order)."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, Raw):
        return str(obj)
    if isinstance(obj, str):
        return quote(obj)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return format_float_json(obj, 64)
    if isinstance(obj, dict):
        return "{" + ",".join(quote(str(k)) + ":" + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot encode {type(obj).__name__}")


_GO_SHORT = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}


def go_quote_inner(data: bytes) -> str:
    """Go `strconv.Quote(string(data))` without the outer quotes (codec facts 2.4).

    Valid printable UTF-8 stays literal; invalid bytes become `\\xHH`; non-printable runes
    become `\\a..\\v`, `\\xHH` (< 0x80... as Go: `\\x` for < space and DEL), `\\uHHHH` or
    `\\UHHHHHHHH`.
    """
    out: list[str] = []
    i = 0
    n = len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            ch = chr(b)
            if ch == '"':
                out.append('\\"')
            elif ch == "\\":
                out.append("\\\\")
            elif b in _GO_SHORT:
                out.append(_GO_SHORT[b])
            elif b < 0x20 or b == 0x7F:
                out.append(f"\\x{b:02x}")
            else:
                out.append(ch)
            i += 1
            continue
        # decode one UTF-8 rune, as Go's utf8.DecodeRune does
        size = 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 0
        rune = None
        if size and i + size <= n:
            try:
                rune = data[i : i + size].decode("utf-8")
            except UnicodeDecodeError:
                rune = None
        if rune is None or len(rune) != 1:
            out.append(f"\\x{b:02x}")
            i += 1
            continue
        cp = ord(rune)
        if _go_printable(rune):
            out.append(rune)
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
        i += size
    return "".join(out)


def _go_printable(ch: str) -> bool:
    """Approximation of Go `strconv.IsPrint` for non-ASCII runes via Unicode categories."""
    import unicodedata

    cat = unicodedata.category(ch)
    if ch == "\u00a0" or ch == "\u00ad":
        return False
    return not (cat.startswith("C") or cat in ("Zl", "Zp") or (cat == "Zs" and ch != " "))
