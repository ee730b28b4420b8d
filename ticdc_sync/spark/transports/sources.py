"""Read Kafka records for a source, from capture files or from Kafka, as one DataFrame.

Both transports return `events.RECORD_SCHEMA` rows beginning after the consumed offsets, so
consumption and checkpointing are the same code whatever the transport (DESIGN.md §1).
This module reads; it never decodes or writes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.events import RECORD_SCHEMA
from ticdc_sync.core.model import Project, Source, TransportKind
from ticdc_sync.spark.runtime import raised
from ticdc_sync.spark.runtime.conf import session_conf
from ticdc_sync.spark.runtime.remote import default_parallelism
from ticdc_sync.spark.transports.splits import best_split

CAPTURE_LINE_SCHEMA = (
    "partition INT, offset BIGINT, timestamp BIGINT, key STRING, value STRING, encoding STRING"
)

Offsets = dict[tuple[str, int], int]


def captures_root(project: Project) -> Path:
    """The capture folder, absolute: a relative one is the project's (a Spark Connect
    server resolves a relative path against its own working folder)."""
    folder = project.output.transport.captures or "captures"
    p = Path(folder)
    return p if p.is_absolute() else (project.root / p).resolve()


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


def _after_consumed(records: DataFrame, consumed: Offsets, topic: str) -> DataFrame:
    """Keep capture records after the consumed offset of their partition (a line without
    a position is kept: it is a broken line, and the read fails on it).

    A plain OR of `partition = p AND offset <= o` terms, so that the JSON reader takes it
    as a pushed filter: it decides after the line's `offset` and `partition` keys and
    skips the rest of the line (`ticdc-sync capture` writes them before `value`)."""
    parts = {p: o for (t, p), o in consumed.items() if t == topic}
    if not parts:
        return records
    part, off = F.col("partition"), F.col("offset")
    done = F.lit(False)
    for p, o in sorted(parts.items()):
        done = done | ((part == p) & (off <= o))
    return records.where(part.isNull() | off.isNull() | ~done)


def _capture_files(root: Path, topic: str) -> list[Path]:
    folder = root / topic
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def _lines(spark: SparkSession, files: list[Path]) -> DataFrame:
    """The non-blank lines of `files` (`value`) with the file each came from (`__file`)."""
    raw = spark.read.text([str(f) for f in files]).withColumn("__file", F.input_file_name())
    return raw.where(F.trim(F.col("value")) != "")


def _records(spark: SparkSession, files: list[Path]) -> DataFrame:
    """The capture lines of `files` parsed by Spark's JSON reader (blank lines skipped), with
    `__bad_line` set for a line that is not JSON of the line schema, and `__file`.

    The JSON reader, not `read.text` + `from_json`: it parses each line's bytes directly,
    where `from_json` decodes the text through a `Reader` first, and it takes the consumed
    filter while parsing (`_after_consumed`): faster (benchmarks/README.md). One leniency comes with it: a line that
    holds a JSON array is read as the records in it (an empty one holds none), where
    `from_json` refused it."""
    return (
        spark.read.schema(f"{CAPTURE_LINE_SCHEMA}, {BAD_LINE} STRING")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", BAD_LINE)
        .json([str(f) for f in files])
        # The metadata column, not input_file_name(): that one is nondeterministic, and
        # Spark keeps a filter above it instead of pushing it into the reader.
        .withColumn("__file", F.col("_metadata.file_path"))
    )


BAD_LINE = "__bad_line"


def _broken(partition: Column, offset: Column, bad_line: Column) -> Column:
    """A capture line that is not a record: no position, or refused by the JSON parser. A
    refused line keeps the fields read before the fault (`"timestamp": "soon"` after good
    positions), so its `bad_line` text is what marks it."""
    return partition.isNull() | offset.isNull() | bad_line.isNotNull()


def read_capture_records(
    spark: SparkSession, root: Path, topics: list[str], consumed: Offsets
) -> DataFrame:
    """Records of `topics` from `<root>/<topic>/*.jsonl` after the consumed offsets.

    Lazy, and one pass over the lines, made by the job that consumes the records (staging):
    a separate pass to check the lines first read every capture line twice
    (benchmarks/README.md). A line that is not a capture record fails that job, never a
    skip; `read_failure` then names its file and line. A record captured twice (overlapping
    capture files) is read twice here; staging keeps it once (`staging.Staging.stage`).
    """
    frames = []
    for topic in topics:
        files = _capture_files(root, topic)
        if not files:
            continue
        parsed = _after_consumed(_records(spark, files), consumed, topic)
        b64 = F.col("encoding") == "base64"

        def raw_bytes(col: str, is_b64=b64):
            # A cast, not `encode(.., 'UTF-8')`: the same bytes, since a string the JSON
            # parser produced is always valid UTF-8, but `encode` scans every byte to check
            # that first (a visible share of a pass's CPU, benchmarks/README.md).
            return F.when(F.col(col).isNull(), F.lit(None).cast("binary")).otherwise(
                F.when(is_b64, F.unbase64(F.col(col))).otherwise(F.col(col).cast("binary"))
            )

        broken = _broken(F.col("partition"), F.col("offset"), F.col(BAD_LINE))
        df = parsed.select(
            F.lit(topic).alias("topic"),
            F.when(
                broken,
                F.raise_error(
                    F.concat(
                        F.lit(raised.PREFIX),
                        F.col("__file"),
                        F.lit(f": {BROKEN_LINE} {LINE_HINT}"),
                    )
                ),
            )
            .otherwise(F.col("partition"))
            .alias("partition"),
            "offset",
            "timestamp",
            raw_bytes("key").alias("key"),
            raw_bytes("value").alias("value"),
        )
        frames.append(df)
    if not frames:
        return spark.createDataFrame([], RECORD_SCHEMA)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


BROKEN_LINE = "a line is not a capture record"


def read_failure(spark: SparkSession, project: Project, source: Source, e: Exception) -> Exception:
    """What to raise for a failed job over `source`'s records: for a capture line that is
    not a record, a UserError naming its file and line; else the job's own UserError
    (`raised`), or `e` itself."""
    err = raised.user_error(e)
    if err is None or BROKEN_LINE not in str(err):
        return err or e
    if project.output.transport.kind is not TransportKind.FILES:
        return err
    root = captures_root(project)
    return broken_lines_error(spark, root, source_topics(project, source)) or err


def broken_lines_error(spark: SparkSession, root: Path, topics: list[str]) -> UserError | None:
    """A UserError naming file and line of (up to 3 of) the capture lines of `topics` that
    are not records, or None if there is none. Runs only after a read failed: it reads
    the lines again."""
    msgs: list[str] = []
    for topic in topics:
        files = _capture_files(root, topic)
        if not files:
            continue
        # What the JSON reader refuses (`_records`): no position, not JSON of the line
        # schema, or bytes that are not UTF-8 (`read.text` would show them replaced).
        r = F.from_json(
            "value",
            f"{CAPTURE_LINE_SCHEMA}, {BAD_LINE} STRING",
            {"columnNameOfCorruptRecord": BAD_LINE},
        )
        rows = (
            _lines(spark, files)
            .where(
                _broken(r["partition"], r["offset"], r[BAD_LINE]) | ~F.expr("is_valid_utf8(value)")
            )
            .select("value", "__file")
            .limit(3)
            .collect()
        )
        msgs.extend(_name_lines(files, rows))
    if not msgs:
        return None
    return UserError("; ".join(msgs) + " " + LINE_HINT)


def _name_lines(files: list[Path], broken: list) -> list[str]:
    msgs = []
    for row in broken:
        text = row["value"]
        for f in files:
            if not str(row["__file"]).endswith(f.name):
                continue
            with open(f, encoding="utf-8", errors="replace") as fh:
                for i, line in enumerate(fh, start=1):
                    if line.rstrip("\r\n") == text:
                        msgs.append(f"{f}:{i}: not a capture record (need partition and offset)")
                        break
            break
    return msgs or ["a capture file has a line that is not a record"]


LINE_HINT = (
    "(hint: each line must be a JSON object "
    '{"partition":N,"offset":N,"timestamp":N,"key":...,"value":...}; regenerate it with '
    "`ticdc-sync capture`)"
)


def read_records(
    spark: SparkSession,
    project: Project,
    source: Source,
    consumed: Offsets,
    on_size: Callable[[int], None] | None = None,
) -> DataFrame:
    """Records of `source` after `consumed`, from the profile's transport. `on_size`
    hears how many records Kafka holds in the ranges read (for progress reports)."""
    transport = project.output.transport
    if transport.kind is TransportKind.FILES:
        return read_capture_records(
            spark, captures_root(project), source_topics(project, source), consumed
        )
    from ticdc_sync.spark.transports.kafka import read_kafka_records

    topics = tuple(sorted(source.topics)) or None
    df, _ends = read_kafka_records(
        spark, transport, topics, source.topic_pattern, consumed_next(consumed), on_size
    )
    return df


def capture_bytes(project: Project, source: Source) -> int | None:
    """The bytes of `source`'s capture files (a read scans all of them), or None for Kafka."""
    if project.output.transport.kind is not TransportKind.FILES:
        return None
    root = captures_root(project)
    return sum(
        f.stat().st_size for t in source_topics(project, source) for f in _capture_files(root, t)
    )


def balanced_splits(spark: SparkSession, project: Project, source: Source):
    """A context in which a read of `source`'s capture files is cut into the tasks that
    finish soonest on the session's cores (`splits.best_split`); the plan of the read is
    made when a job runs, so the job must run inside it. Kafka reads are cut by partition,
    and are left alone, as is a split size the profile sets."""
    key = "spark.sql.files.maxPartitionBytes"
    if project.output.transport.kind is not TransportKind.FILES or spark.conf.get(key, None):
        return nullcontext()
    root = captures_root(project)
    sizes = [
        f.stat().st_size for t in source_topics(project, source) for f in _capture_files(root, t)
    ]
    split = best_split(sizes, default_parallelism(spark))
    return session_conf(spark, key, str(split))


def consumed_next(consumed: Offsets) -> Offsets:
    """Kafka wants the next offset to read; state keeps the last offset consumed."""
    return {k: v + 1 for k, v in consumed.items()}
