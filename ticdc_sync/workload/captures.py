"""Capture files (DESIGN.md §1): `<dir>/<topic>/<name>.jsonl`, one Kafka record a line.

Each line is `{"key":..,"offset":..,"partition":..,"timestamp":..,"value":..}` with sorted
keys. Key and value are UTF-8 text when both decode as UTF-8 (null stays null); otherwise
the line carries `"encoding":"base64"` and both as base64 of the raw bytes (Open Protocol is
binary). The same records always give the same bytes. Reads files of a topic in name order.
Pure Python; does not interpret the records.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path

from .encode import Record


def _utf8(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8")


def record_line(r: Record) -> str:
    obj: dict[str, object] = {
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp_ms,
    }
    try:
        obj["key"], obj["value"] = _utf8(r.key), _utf8(r.value)
    except UnicodeDecodeError:
        obj["encoding"] = "base64"
        obj["key"] = None if r.key is None else base64.b64encode(r.key).decode()
        obj["value"] = None if r.value is None else base64.b64encode(r.value).decode()
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    # keep one record per line for every line splitter (NEL, LS, PS are line breaks to some)
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def parse_line(topic: str, line: str) -> Record:
    obj = json.loads(line)
    key, value = obj.get("key"), obj.get("value")
    if obj.get("encoding") == "base64":
        kb = None if key is None else base64.b64decode(key)
        vb = None if value is None else base64.b64decode(value)
    else:
        kb = None if key is None else key.encode("utf-8")
        vb = None if value is None else value.encode("utf-8")
    return Record(
        topic, int(obj["partition"]), int(obj["offset"]), int(obj.get("timestamp") or 0), kb, vb
    )


def write_captures(
    directory: str | Path, records: Iterable[Record], name: str = "capture"
) -> list[Path]:
    """Write records to `<directory>/<topic>/<name>.jsonl` (one file per topic, records in
    the given order). Returns the files written."""
    by_topic: dict[str, list[str]] = {}
    for r in records:
        by_topic.setdefault(r.topic, []).append(record_line(r))
    out = []
    for topic, lines in sorted(by_topic.items()):
        p = Path(directory) / topic / f"{name}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        out.append(p)
    return out


def read_captures(directory: str | Path) -> dict[str, list[Record]]:
    """All records under `directory`, per topic folder, files in name order."""
    out: dict[str, list[Record]] = {}
    root = Path(directory)
    for tdir in sorted(p for p in root.iterdir() if p.is_dir()):
        recs: list[Record] = []
        for f in sorted(tdir.glob("*.jsonl")):
            for line in f.read_text(encoding="utf-8").split("\n"):
                if line.strip():
                    recs.append(parse_line(tdir.name, line))
        out[tdir.name] = recs
    return out
