"""Capture files (DESIGN.md §1): one Kafka record a line, the one writer and reader of a line.

A line is `{"key":..,"offset":..,"partition":..,"timestamp":..,"value":..}` with sorted
keys. Key and value are UTF-8 text when both decode as UTF-8 (null stays null); otherwise
the line carries `"encoding": "base64"` and both as base64 of the raw bytes (Open Protocol
is binary). The same record always gives the same bytes. `ticdc-sync capture` writes lines
with this module and the test kit does too, so the two can never disagree. Pure Python;
does not interpret the records and does no I/O.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CapturedRecord:
    """One Kafka record as a capture line holds it."""

    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None


def record_line(
    partition: int, offset: int, timestamp: int | None, key: bytes | None, value: bytes | None
) -> str:
    """One capture line (without its newline)."""
    obj: dict[str, object] = {"partition": partition, "offset": offset, "timestamp": timestamp}
    try:
        obj["key"] = None if key is None else bytes(key).decode("utf-8")
        obj["value"] = None if value is None else bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        # Open Protocol is binary: both fields as base64 of the raw bytes (DESIGN.md §1).
        obj["encoding"] = "base64"
        obj["key"] = None if key is None else base64.b64encode(bytes(key)).decode()
        obj["value"] = None if value is None else base64.b64encode(bytes(value)).decode()
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    # One record per line for every line splitter: NEL, LS and PS are line breaks to some
    # readers (Python's str.splitlines among them), so they are written escaped.
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def parse_line(line: str) -> CapturedRecord:
    """A capture line back into its record (raises ValueError/KeyError on a bad line)."""
    obj = json.loads(line)
    key, value = obj.get("key"), obj.get("value")
    if obj.get("encoding") == "base64":
        kb = None if key is None else base64.b64decode(key)
        vb = None if value is None else base64.b64decode(value)
    else:
        kb = None if key is None else key.encode("utf-8")
        vb = None if value is None else value.encode("utf-8")
    ts = obj.get("timestamp")
    return CapturedRecord(
        int(obj["partition"]), int(obj["offset"]), None if ts is None else int(ts), kb, vb
    )
