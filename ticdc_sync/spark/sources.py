"""Read Kafka records for a source, from capture files or from Kafka, as one DataFrame.

Both transports return `events.RECORD_SCHEMA` rows beginning after the consumed offsets, so
consumption and checkpointing are the same code whatever the transport (DESIGN.md §1).
This module reads; it never decodes or writes.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.errors import UserError
from ticdc_sync.events import RECORD_SCHEMA
from ticdc_sync.model import Project, Source, TransportKind

CAPTURE_LINE_SCHEMA = (
    "partition INT, offset BIGINT, timestamp BIGINT, key STRING, value STRING, encoding STRING"
)

Offsets = dict[tuple[str, int], int]


def captures_root(project: Project) -> Path:
    folder = project.output.transport.captures or "captures"
    p = Path(folder)
    return p if p.is_absolute() else project.root / p


def source_topics(project: Project, source: Source) -> list[str]:
    """Topics of a source; a `topic_pattern` is matched against the capture folders."""
    if source.topics:
        return sorted(source.topics)
    if source.topic_pattern and project.output.transport.kind is TransportKind.FILES:
        import re

        rx = re.compile(source.topic_pattern)
        root = captures_root(project)
        return sorted(p.name for p in root.iterdir() if p.is_dir() and rx.fullmatch(p.name))
    return []


def _after_consumed(lines: DataFrame, consumed: Offsets, topic: str) -> DataFrame:
    """Keep capture lines after the consumed offset of their partition, by the positions
    `_positions` read (a line without a position is kept, so the check reports it)."""
    parts = {p: o for (t, p), o in consumed.items() if t == topic}
    if not parts:
        return lines
    # One lookup, each position once: Spark substitutes `__p`/`__o` by their pattern
    # expressions inside the filter, so a CASE with a branch per partition ran the pattern
    # once per branch. A partition with nothing consumed yet keeps all its lines.
    last = F.create_map(
        *[c for p, o in sorted(parts.items()) for c in (F.lit(p), F.lit(o).cast("bigint"))]
    )
    consumed_already = F.coalesce(
        F.col("__o") <= F.try_element_at(last, F.col("__p")), F.lit(False)
    )
    return lines.where(~consumed_already)


def read_capture_records(
    spark: SparkSession, root: Path, topics: list[str], consumed: Offsets
) -> DataFrame:
    """Records of `topics` from `<root>/<topic>/*.jsonl` after the consumed offsets.

    A capture line that is not a valid record is an error naming file and line, never a skip.
    """
    frames = []
    for topic in topics:
        folder = root / topic
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        if not files:
            continue
        raw = spark.read.text([str(f) for f in files]).withColumn("__file", F.input_file_name())
        part, off = _positions()
        lines = raw.where(F.trim(F.col("value")) != "").select(
            "value", "__file", part.alias("__p"), off.alias("__o")
        )
        # Consumed lines are dropped by their positions alone, before the full parse: a
        # filter on the parsed columns would make Spark parse every line twice (the filter
        # is pushed below the projection and does not share its from_json).
        lines = _after_consumed(lines, consumed, topic)
        dup = _check_lines(lines, files)
        parsed = lines.select(
            F.from_json("value", CAPTURE_LINE_SCHEMA).alias("r"),
            F.col("value").alias("v"),
            "__file",
            "__p",
            "__o",
        )
        b64 = F.col("r.encoding") == "base64"

        def raw_bytes(col: str, is_b64=b64):
            return F.when(F.col(f"r.{col}").isNull(), F.lit(None).cast("binary")).otherwise(
                F.when(is_b64, F.unbase64(F.col(f"r.{col}"))).otherwise(
                    F.encode(F.col(f"r.{col}"), "UTF-8")
                )
            )

        # The check above reads positions by pattern; a line whose positions look right but
        # which is not valid JSON fails the job here, naming its file, rather than vanish.
        broken = F.col("r.partition").isNull() | F.col("r.offset").isNull()
        df = parsed.select(
            F.lit(topic).alias("topic"),
            F.when(
                broken,
                F.raise_error(
                    F.concat(
                        F.lit("ticdc-sync: "),
                        F.col("__file"),
                        F.lit(f": a line is not a capture record {LINE_HINT}"),
                    )
                ),
            )
            .otherwise(F.col("__p"))
            .alias("partition"),
            F.col("__o").alias("offset"),
            F.col("r.timestamp").alias("timestamp"),
            raw_bytes("key").alias("key"),
            raw_bytes("value").alias("value"),
        )
        if dup:
            # The same record captured twice (overlapping capture files) is one record.
            df = df.dropDuplicates(["topic", "partition", "offset"])
        frames.append(df)
    if not frames:
        return spark.createDataFrame([], RECORD_SCHEMA)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


# A capture line written by `ticdc-sync capture` has sorted keys: `"offset": N, "partition":
# N` come before the value (capture.record_line). A JSON string cannot hold an unescaped
# quote, so the first match is the record's own position.
_POSITION_RE = r'"offset": ?(-?[0-9]+), ?"partition": ?(-?[0-9]+)[,}]'


def _positions() -> tuple[Column, Column]:
    """(partition, offset) of a capture line, by a pattern at the start of the line (the
    full JSON parser only for lines written some other way)."""
    off = F.regexp_extract("value", _POSITION_RE, 1)
    part = F.regexp_extract("value", _POSITION_RE, 2)
    parsed = F.from_json("value", "partition INT, offset BIGINT")
    return (
        F.when(off != "", part.cast("int")).otherwise(parsed["partition"]),
        F.when(off != "", off.cast("bigint")).otherwise(parsed["offset"]),
    )


def _check_lines(lines: DataFrame, files: list[Path]) -> bool:
    """One narrow pass over a topic's unconsumed capture lines (with `__p`, `__o` from
    `_positions`): raise on a line that is not a record; return whether some (partition,
    offset) occurs more than once.

    Only positions are shuffled, so the records need no shuffle unless there really are
    duplicates.
    """
    pos = lines.select(F.col("__p").alias("partition"), F.col("__o").alias("offset"))
    broken = F.col("__p").isNull() | F.col("__o").isNull()
    found = (
        pos.groupBy("partition", "offset")
        .count()
        .where((F.col("count") > 1) | F.col("partition").isNull() | F.col("offset").isNull())
        .limit(4)
        .collect()
    )
    if any(r["partition"] is None or r["offset"] is None for r in found):
        _raise_broken_lines(files, lines.where(broken).select("value", "__file").limit(3).collect())
    return bool(found)


def _raise_broken_lines(files: list[Path], broken: list) -> None:
    msgs = []
    for row in broken:
        text = row["value"]
        for f in files:
            if not str(row["__file"]).endswith(f.name):
                continue
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
                if line == text:
                    msgs.append(f"{f}:{i}: not a capture record (need partition and offset)")
                    break
            break
    raise UserError("; ".join(msgs or ["capture file has an invalid line"]) + " " + LINE_HINT)


LINE_HINT = (
    "(hint: each line must be a JSON object "
    '{"partition":N,"offset":N,"timestamp":N,"key":...,"value":...}; regenerate it with '
    "`ticdc-sync capture`)"
)


def read_records(
    spark: SparkSession, project: Project, source: Source, consumed: Offsets
) -> DataFrame:
    """Records of `source` after `consumed`, from the profile's transport."""
    transport = project.output.transport
    if transport.kind is TransportKind.FILES:
        return read_capture_records(
            spark, captures_root(project), source_topics(project, source), consumed
        )
    from ticdc_sync.spark.kafka import read_kafka_records

    topics = tuple(sorted(source.topics)) or None
    df, _ends = read_kafka_records(
        spark, transport, topics, source.topic_pattern, consumed_next(consumed)
    )
    return df


def consumed_next(consumed: Offsets) -> Offsets:
    """Kafka wants the next offset to read; state keeps the last offset consumed."""
    return {k: v + 1 for k, v in consumed.items()}
