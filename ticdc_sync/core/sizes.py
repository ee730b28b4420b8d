"""Sizes as project files write them (`0`, `512KiB`, `100MiB`, `1GiB`, `2TiB`, or a plain
number of bytes), in bytes, and back to the shortest such text.

The JSON Schema (`$defs/size`) checks the form before anything here reads it, so
`parse_bytes` trusts its input. Pure: no I/O.
"""

from __future__ import annotations

UNIT_BYTES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def parse_bytes(value: str | int) -> int:
    """`1GiB`, `100MiB`, `512KiB`, `10B`, `0`, or a YAML integer (bytes), in bytes."""
    if isinstance(value, int):
        return value
    text = value.strip()
    for unit in ("KiB", "MiB", "GiB", "TiB", "B"):
        if text.endswith(unit):
            return int(text[: -len(unit)].strip()) * UNIT_BYTES[unit]
    return int(text)


def render_bytes(n: int) -> str:
    """A size for people: `0 B`, `812 B`, `12.3 KiB`, `1 GiB`, `3.2 GiB`."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if n >= UNIT_BYTES[unit]:
            value = n / UNIT_BYTES[unit]
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"
