"""Durations as project files write them (`0`, `500ms`, `30s`, `1m`, `2h`, `1d`), in
milliseconds, and back to the shortest such text.

The JSON Schema (`$defs/duration`) checks the form before anything here reads it, so
`parse_ms` trusts its input. Pure: no I/O.
"""

from __future__ import annotations

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_ms(value: str | int) -> int:
    """`7d`, `12h`, `30m`, `45s`, `500ms`, or `0` (a YAML integer or text) in milliseconds."""
    if isinstance(value, int):
        return value  # only 0 passes the schema: a number without a unit is ambiguous
    text = value.strip()
    if text == "0":
        return 0
    if text.endswith("ms"):
        return int(text[:-2])
    return int(text[:-1]) * UNIT_MS[text[-1]]


def render_ms(ms: int) -> str:
    """The shortest text of `ms` in one unit: 0, 500ms, 30s, 90s, 1m, 36h, 2d."""
    if ms == 0:
        return "0"
    for unit in ("d", "h", "m", "s"):
        if ms % UNIT_MS[unit] == 0:
            return f"{ms // UNIT_MS[unit]}{unit}"
    return f"{ms}ms"
