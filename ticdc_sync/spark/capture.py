"""`ticdc-sync capture`: record Kafka topics into capture files (DESIGN.md §1), appending.

Writes `<out>/<topic>/part-<partition>.jsonl`, one record a line, in the exact line format
of `ticdc_sync.core.capture_format.record_line` (sorted keys, `"encoding": "base64"` with
both key and value base64 when either is not UTF-8). A second capture appends only records after
the highest offset the topic's capture files already hold, per partition; a partition whose
next records Kafka no longer has is an error (ticdc_sync.spark.transports.kafka), never a silent gap.

Lines are written by the driver: records are range-partitioned by (partition, offset) into
chunks of about CHUNK_RECORDS and fetched one chunk at a time with `toLocalIterator`, so the
driver never holds a whole topic. That is fine for a development tool; it is not a bulk
export path. This module must not decode records or touch Delta tables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from ticdc_sync.core.capture_format import record_line
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Project, TransportKind
from ticdc_sync.spark.transports import kafka

CHUNK_RECORDS = 50_000


def captured_next(folder: Path) -> dict[int, int]:
    """Next offset per partition after what `folder/*.jsonl` holds (any file layout).

    A last line cut short by an interrupted capture (no newline, not JSON) is truncated
    away so the file stays valid; any other bad line is an error naming it.
    """
    nxt: dict[int, int] = {}
    for f in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        with open(f, "rb+") as fh:
            good_end = 0
            last = b"\n"
            for lineno, raw in enumerate(fh, start=1):
                last = raw
                text = raw.strip()
                if text:
                    try:
                        obj = json.loads(text)
                        p, o = int(obj["partition"]), int(obj["offset"])
                    except (ValueError, KeyError, TypeError) as e:
                        if not raw.endswith(b"\n"):
                            fh.truncate(good_end)
                            last = b"\n"
                            break
                        raise UserError(
                            f"{f}:{lineno}: not a capture record ({e}) (hint: fix or delete "
                            "the line, or move the file away and capture again)"
                        ) from e
                    nxt[p] = max(nxt.get(p, 0), o + 1)
                good_end += len(raw)
            if not last.endswith(b"\n"):
                # A complete last record without its newline: end it before appending.
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
    return nxt


def _topics(spark: Any, project: Project, topics: Sequence[str] | None) -> list[str]:
    transport = project.output.transport
    if topics:
        return sorted(set(topics))
    names: set[str] = set()
    for s in project.sources:
        names |= set(s.topics)
        if s.topic_pattern:
            names |= set(kafka.list_partitions(spark, transport, None, s.topic_pattern))
    if not names:
        raise UserError("no topics to capture (hint: pass --topic, or declare sources' topics)")
    return sorted(names)


def _out_root(project: Project, out_dir: str | Path | None) -> Path:
    if out_dir is not None:
        return Path(out_dir)
    folder = Path(project.output.transport.captures or "captures")
    return folder if folder.is_absolute() else (project.root / folder).resolve()


def capture_topic(
    spark: Any,
    project: Project,
    topic: str,
    root: Path,
    max_records: int | None = None,
) -> tuple[int, dict[int, int]]:
    """Append `topic`'s new records to `root/topic/part-<p>.jsonl`; (count, next offsets)."""
    transport = project.output.transport
    folder = root / topic
    have = captured_next(folder)
    start = {(topic, p): o for p, o in have.items()}
    df, ends = kafka.read_kafka_records(spark, transport, (topic,), None, start)
    span = sum(max(0, e - start.get(tp, 0)) for tp, e in ends.items())
    chunks = max(1, min(span // CHUNK_RECORDS + 1, 1000))
    rows: Iterable[Any] = (
        df.repartitionByRange(chunks, "partition", "offset")
        .sortWithinPartitions("partition", "offset")
        .toLocalIterator(prefetchPartitions=False)
    )
    files: dict[int, IO[str]] = {}
    written = 0
    try:
        for r in rows:
            if max_records is not None and written >= max_records:
                break
            fh = files.get(r.partition)
            if fh is None:
                folder.mkdir(parents=True, exist_ok=True)
                fh = open(folder / f"part-{r.partition}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
                files[r.partition] = fh
            fh.write(record_line(r.partition, r.offset, r.timestamp, r.key, r.value) + "\n")
            have[r.partition] = r.offset + 1
            written += 1
    finally:
        for fh in files.values():
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
    return written, have


def capture(
    project: Project,
    topics: Sequence[str] | None = None,
    out_dir: str | Path | None = None,
    max_records: int | None = None,
    out: Callable[[str], None] = print,
    spark: Any = None,
    jvm_output: Callable[[str], None] | None = None,
) -> int:
    """Record `topics` (default: every source's) into capture files; exit code 0.

    `max_records` caps the records written per topic in this call (lowest partitions,
    then offsets, first; each partition's file stays a gap-free run of offsets).
    `jvm_output` takes the output of the JVM this call starts (`session.build_session`).
    """
    transport = project.output.transport
    if transport.kind is not TransportKind.KAFKA:
        raise UserError(
            f"capture reads from Kafka, but target {project.output.name!r} uses the "
            f"{transport.kind.value} transport (hint: select a profile target whose transport "
            "is kafka, e.g. --target with type: kafka)"
        )
    if max_records is not None and max_records < 0:
        raise UserError("--max-records must be 0 or more")
    own = spark is None
    if own:
        from ticdc_sync.spark.runtime.session import build_session

        spark = build_session(
            project.output, app_name="ticdc-sync-capture", kafka=True, jvm_output=jvm_output
        )
    try:
        root = _out_root(project, out_dir)
        for topic in _topics(spark, project, topics):
            n, nxt = capture_topic(spark, project, topic, root, max_records)
            where = ", ".join(f"{p}:{o}" for p, o in sorted(nxt.items())) or "-"
            out(f"{topic}: {n} new record(s) -> {root / topic} (next offsets {where})")
    finally:
        if own:
            spark.stop()
    return 0
