"""Capture files (DESIGN.md §1): `<dir>/<topic>/<name>.jsonl`, one Kafka record a line.

Lines are written and read by `ticdc_sync.core.capture_format`, the same code `ticdc-sync
capture` uses. Reads files of a topic in name order. Pure Python; does not interpret the
records.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ticdc_sync.core import capture_format

from .encode import Record


def record_line(r: Record) -> str:
    return capture_format.record_line(r.partition, r.offset, r.timestamp_ms, r.key, r.value)


def parse_line(topic: str, line: str) -> Record:
    c = capture_format.parse_line(line)
    return Record(topic, c.partition, c.offset, c.timestamp or 0, c.key, c.value)


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
