"""Project state in Delta tables under `<warehouse>/_ticdc_sync/`, and target progress markers.

State tables: `events` (staged decoded events: consumed positions and watermarks are
derived from it, so they are committed atomically with the events themselves; each
staging commit carries the running tallies of what came before it, see `staged.py`),
`quarantine` (bad records with raw bytes and reason), `schema_history` (one row per
upstream table version). Beside them, `events_tallies.json` caches the tallies as of the
staging table's newest commit (local warehouses; ignored once any later commit exists).
A target's progress is the `Marker` in the userMetadata of its latest ticdc-sync commit,
i.e. recorded atomically with its data. Only small aggregates reach the driver here; rows
never do.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.errors import UserError
from ticdc_sync.events import (
    EVENT_FIELDS,
    EVENT_SCHEMA,
    KIND_BAD,
    KIND_DDL,
    KIND_ROW,
    KIND_WATERMARK,
)
from ticdc_sync.model import Project
from ticdc_sync.sqlgen import quote, sql_string, state_location, table_ref
from ticdc_sync.staged import SourceTally, from_user_metadata, to_user_metadata
from ticdc_sync.upstream import TableSchema
from ticdc_sync.window import DdlEvent, Marker

STAGED_SCHEMA = "`source` STRING, " + EVENT_SCHEMA
QUARANTINE_SCHEMA = (
    "`source` STRING, topic STRING, `partition` INT, `offset` BIGINT, idx INT, db STRING, "
    "tbl STRING, commit_ts BIGINT, reason STRING, raw_key BINARY, raw_value BINARY"
)
SCHEMA_HISTORY_SCHEMA = (
    "db STRING, tbl STRING, commit_ts BIGINT, ddl STRING, schema_json STRING, `source` STRING"
)
# File statistics only for the columns staged events are selected by (source, position,
# kind, commit_ts, table): Delta's default covers the first 32 columns, and min/max of the
# row-image text made every staging write about 0.9 s slower per 1M events
# (benchmarks/README.md) for statistics no query uses.
#
# No Parquet dictionary for the staged columns that are (nearly) unique per event: writing
# tried a dictionary for each and dropped it once it grew too big, and where commit_ts kept
# one, every target's read expanded it into a hash set to test its commit_ts range, which
# the file statistics already do. Measured over 1M events: the Parquet write 7.7-8.0 s ->
# 7.3-7.6 s; one target's read of its rows 0.56-0.81 s -> 0.50-0.65 s. The row-image text
# (`before_json`, `after_json`), hashed into a dictionary until it overflowed: decode and
# write of 1M events 9.2-9.9 s -> 8.5-9.0 s (benchmarks/README.md).
# Delta hands a table's properties to the Parquet writer, which reads `#column` settings;
# an older staging table gains them on the next run (`_set_missing_properties`).
STAGED_PROPERTIES = {
    "delta.dataSkippingStatsColumns": "source,topic,partition,offset,idx,kind,commit_ts,db,tbl",
    **{
        f"parquet.enable.dictionary#{c}": "false"
        for c in ("offset", "commit_ts", "kafka_ts", "before_json", "after_json")
    },
}
T = TypeVar("T")
MARKER_COMMIT_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def warehouse_path(project: Project) -> str:
    wh = project.output.warehouse
    if "://" in wh:
        return wh
    p = Path(wh)
    return str(p if p.is_absolute() else (project.root / p).resolve())


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


def local_path(location: str) -> Path:
    """The file-system path of a local location (a plain path or a `file:` URI)."""
    return Path(location.removeprefix("file:"))


@dataclass(frozen=True)
class PartitionProgress:
    topic: str
    partition: int
    last_offset: int
    watermark: int | None  # highest watermark seen (exact sources) or commit_ts (inexact)
    first_bad_offset: int | None  # first bad record not yet quarantined


class State:
    """Access to one project's state tables."""

    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.events_path = state_location(warehouse, "events")
        self.quarantine_path = state_location(warehouse, "quarantine")
        self.history_path = state_location(warehouse, "schema_history")
        tallies = state_location(warehouse, "events_tallies.json")
        self._tallies_file = local_path(tallies) if is_local(tallies) else None
        self._ensure(self.events_path, STAGED_SCHEMA, STAGED_PROPERTIES)
        self._add_missing_columns(self.events_path, EVENT_FIELDS)
        self._set_missing_properties(self.events_path, STAGED_PROPERTIES)
        self._ensure(self.quarantine_path, QUARANTINE_SCHEMA)
        self._ensure(self.history_path, SCHEMA_HISTORY_SCHEMA)
        self._tallies: dict[str, SourceTally] = {}
        self._stored: dict[str, SourceTally] | None = None

    # --- tables -----------------------------------------------------------------

    def _ensure(self, path: str, schema: str, properties: dict[str, str] | None = None) -> None:
        props = {"delta.appendOnly": "false", **(properties or {})}
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {table_ref(path)} ({schema}) USING delta "
            f"TBLPROPERTIES ({_properties_sql(props)})"
        )

    def _set_missing_properties(self, path: str, properties: dict[str, str]) -> None:
        """Table properties a newer ticdc-sync sets, set on a table an older one created."""
        # SHOW TBLPROPERTIES reads the table's metadata only; DESCRIBE DETAIL also rebuilds
        # the snapshot's file list (a Spark job, 0.3-1 s, benchmarks/README.md).
        rows = self.spark.sql(f"SHOW TBLPROPERTIES {table_ref(path)}").collect()
        have = {r["key"]: r["value"] for r in rows}
        missing = {k: v for k, v in properties.items() if have.get(k) != v}
        if missing:
            self.spark.sql(
                f"ALTER TABLE {table_ref(path)} SET TBLPROPERTIES ({_properties_sql(missing)})"
            )

    def _add_missing_columns(self, path: str, fields: tuple[tuple[str, str], ...]) -> None:
        """Columns a newer ticdc-sync stages, added to a table an older one created (at
        its end, which is where `events.EVENT_FIELDS` keeps them)."""
        have = {f.name for f in self.spark.read.format("delta").load(path).schema.fields}
        missing = [(n, t) for n, t in fields if n not in have]
        if missing:
            cols = ", ".join(f"{quote(n)} {t}" for n, t in missing)
            self.spark.sql(f"ALTER TABLE {table_ref(path)} ADD COLUMNS ({cols})")

    def events(self, spark: SparkSession | None = None) -> DataFrame:
        """The staged events, read in `spark` (default: this state's session)."""
        return (spark or self.spark).read.format("delta").load(self.events_path)

    def quarantine(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.quarantine_path)

    def stage(self, source: str, decoded: DataFrame, *, may_repeat: bool = False) -> int:
        """Append decoded events in one Delta commit: positions and events move together.

        The commit carries the tallies of everything staged before it (`staged.py`);
        returns how many events it staged. `may_repeat`: the records may hold the same
        (partition, offset) twice (overlapping capture files); the batch is then checked
        (`_repeats_since`) and, if it does, rewritten with each position once. Copies that
        differ (two records at one offset) are an error, and the batch is unstaged."""
        before = self.tally(source)
        carried = to_user_metadata({**self._stored_tallies(), **self._tallies})
        # Forget the cached tally first: if anything below fails, the next batch must
        # re-derive it from the table instead of re-reading what may have been staged.
        self._tallies.pop(source, None)
        cols = [F.lit(source).alias("source"), *[F.col(quote(c)) for c in decoded.columns]]
        with user_metadata(self.spark, carried):
            decoded.select(*cols).write.format("delta").mode("append").save(self.events_path)
        if may_repeat and self._repeats_since(source, before):
            conflicts = self._conflicting_copies(source, before)
            if conflicts:
                self._unstage_since(source, before, carried)
                raise UserError(
                    f"source {source}: capture files hold different records at the same "
                    f"position: {', '.join(conflicts)} (hint: keep one file per range of "
                    "offsets, delete the wrong line or file, or capture the topic again "
                    "with `ticdc-sync capture`; nothing of this batch was staged)"
                )
            self._stage_once(source, before, carried)
        after = before.copy()
        staged = after.fold(self._increments(source, before))
        self._tallies[source] = after
        self._save_tallies()
        return staged

    def _repeats_since(self, source: str, known: SourceTally) -> bool:
        """Whether an event staged after `known` is staged twice (same position). One narrow
        job over the new events' positions: about 1 s per 1M events, where the check of
        every capture line it replaces took 2.6-4.2 s (benchmarks/README.md)."""
        # A count, not `limit(1)`: where nothing repeats (the usual case) a limit reads
        # the groups in growing rounds, one job each (1.2-1.4 s against 1.0-1.2 s).
        copies = (
            self.events()
            .where(_since_sql(source, known))
            .groupBy("topic", "partition", "offset", "idx")
            .count()
            .where(F.col("count") > 1)
            .count()
        )
        return copies > 0

    def _conflicting_copies(self, source: str, known: SourceTally) -> list[str]:
        """Up to 3 positions (`topic/partition/offset`) staged after `known` whose copies
        differ: two records at one offset, where only one can be the record Kafka held.
        Runs only after `_repeats_since` found copies, so normal runs never pay for it."""
        fields = [f for f in self.events().schema.fields if f.name != "source"]
        # Maps cannot be hashed; their JSON text stands for them.
        content = F.xxhash64(
            *[
                F.to_json(F.col(quote(f.name)))
                if f.dataType.typeName() == "map"
                else F.col(quote(f.name))
                for f in fields
            ]
        )
        rows = (
            self.events()
            .where(_since_sql(source, known))
            .groupBy("topic", "partition", "offset", "idx")
            .agg(F.count_distinct(content).alias("versions"))
            .where(F.col("versions") > 1)
            .select("topic", "partition", "offset")
            .distinct()
            .orderBy("topic", "partition", "offset")
            .limit(3)
            .collect()
        )
        return [f"{r['topic']}/{r['partition']}/{r['offset']}" for r in rows]

    def _unstage_since(self, source: str, before: SourceTally, carried: str) -> None:
        """Remove the events staged after `before`, in one commit carrying the tallies
        from before them: the state is as if the batch had never been staged."""
        nothing = self.spark.createDataFrame([], self.events().schema)
        self._replace_since(source, before, carried, nothing)

    def _stage_once(self, source: str, before: SourceTally, carried: str) -> None:
        """Rewrite the events staged after `before` with each (topic, partition, offset,
        idx) once, in one commit (`replaceWhere`: the batch is replaced atomically).

        Only after a batch that read a record twice. Until this commit, the copies are
        identical events: apply keeps one of them and quarantine takes one, so a run
        killed in between leaves the targets exact; only this batch's counts stay high."""
        batch = self.events().where(_since_sql(source, before))
        once = batch.dropDuplicates(["topic", "partition", "offset", "idx"])
        self._replace_since(source, before, carried, once)

    def _replace_since(
        self, source: str, before: SourceTally, carried: str, rows: DataFrame
    ) -> None:
        """Replace the events staged after `before` with `rows`, in one atomic commit
        (`replaceWhere`) whose userMetadata is `carried`."""
        with user_metadata(self.spark, carried):
            (
                rows.write.format("delta")
                .mode("overwrite")
                .option("replaceWhere", _since_sql(source, before))
                .save(self.events_path)
            )

    # --- progress -----------------------------------------------------------------

    def tally(self, source: str) -> SourceTally:
        """What is staged for a source: the tally the latest staging commit carries, plus
        one narrow aggregate over the events staged since (by offset, so Delta's file
        statistics skip the older files). A run after a run starts from the tallies the
        last one saved at the table's newest commit (`_saved_tallies`), without the
        aggregate."""
        if source not in self._tallies:
            saved = self._saved_tallies().get(source)
            if saved is not None:
                self._tallies[source] = saved
                return saved
            t = self._stored_tallies().get(source, SourceTally()).copy()
            t.fold(self._increments(source, t))
            self._tallies[source] = t
        return self._tallies[source]

    def _save_tallies(self) -> None:
        """Save the tallies known here beside the staging table, keyed by its newest commit.

        A staging commit carries only the tallies from before it, so without this the next
        run re-aggregates the batch staged last (0.7-0.9 s per 1M events,
        benchmarks/README.md). A cache: any later commit (a batch, a rewrite, a user's
        OPTIMIZE) or a table made anew makes it stale, and it is then ignored. Local
        warehouses only; a failed write loses nothing."""
        if self._tallies_file is None:
            return
        at = latest_commit(self.events_path)
        if at is None:
            return
        body = {"version": at[0], "sha256": at[1], "tallies": to_user_metadata(self._tallies)}
        tmp = self._tallies_file.with_name(self._tallies_file.name + ".tmp")
        try:
            tmp.write_text(json.dumps(body, sort_keys=True) + "\n")
            os.replace(tmp, self._tallies_file)
        except OSError:
            return

    def _saved_tallies(self) -> dict[str, SourceTally]:
        """The tallies `_save_tallies` saved, if saved at the staging table's newest commit
        (the same version, and the same bytes of its commit file); else {}."""
        if self._tallies_file is None:
            return {}
        try:
            body = json.loads(self._tallies_file.read_text())
        except (OSError, ValueError):
            return {}
        at = latest_commit(self.events_path)
        if (
            not isinstance(body, dict)
            or at is None
            or (body.get("version"), body.get("sha256")) != at
        ):
            return {}
        return from_user_metadata(body.get("tallies")) or {}

    def _stored_tallies(self) -> dict[str, SourceTally]:
        if self._stored is None:
            found = latest_user_metadata(self.spark, self.events_path, from_user_metadata)
            self._stored = found or {}
        return self._stored

    def _increments(self, source: str, known: SourceTally) -> list:
        """Aggregate rows (`staged.INCREMENT_FIELDS`) of the events staged after `known`."""
        ev = self.events().where(_since_sql(source, known))
        kind = F.col("kind")
        return (
            ev.groupBy("topic", "partition", "db", "tbl")
            .agg(
                F.max("offset").alias("last_offset"),
                F.max(_watermark_ts()).alias("watermark"),
                F.max(_inexact_ts()).alias("inexact_ts"),
                F.min(F.when(kind == KIND_BAD, F.col("offset"))).alias("first_bad"),
                F.count(F.when(kind == KIND_BAD, 1)).alias("bad"),
                F.count(F.when(kind == KIND_ROW, 1)).alias("rows"),
                F.count(F.when(kind == KIND_DDL, 1)).alias("ddls"),
                F.count(F.lit(1)).alias("events"),
            )
            .collect()
        )

    def partitions(self, source: str) -> list[PartitionProgress]:
        """Per partition of a source: last offset staged, highest watermark, first open bad record."""
        tally = self.tally(source)
        open_bad = self._first_open_bad(source) if tally.bad else {}
        return [
            PartitionProgress(p.topic, p.partition, p.last_offset, p.progress_ts, open_bad.get(k))
            for k, p in sorted(tally.partitions.items())
        ]

    def _first_open_bad(self, source: str) -> dict[tuple[str, int], int]:
        ev = self.events().where((F.col("source") == source) & (F.col("kind") == KIND_BAD))
        q = (
            self.quarantine()
            .where(F.col("source") == source)
            .select("topic", "partition", "offset", F.lit(True).alias("__q"))
        )
        rows = (
            ev.join(q, ["topic", "partition", "offset"], "left")
            .where(F.col("__q").isNull())
            .groupBy("topic", "partition")
            .agg(F.min("offset").alias("first_bad"))
            .collect()
        )
        return {(r["topic"], r["partition"]): r["first_bad"] for r in rows}

    def capped_watermark(self, source: str, p: PartitionProgress) -> int | None:
        """Highest watermark (or inexact ts) strictly before the partition's first bad record."""
        if p.first_bad_offset is None:
            return p.watermark
        r = (
            self.events()
            .where(
                (F.col("source") == source)
                & (F.col("topic") == p.topic)
                & (F.col("partition") == p.partition)
                & (F.col("offset") < p.first_bad_offset)
            )
            .agg(F.max(_watermark_ts()).alias("wm"), F.max(_inexact_ts()).alias("ix"))
            .collect()[0]
        )
        return r["wm"] if r["wm"] is not None else r["ix"]

    def open_bad_records(self, source: str, limit: int = 20) -> list:
        if not self.tally(source).bad:
            return []
        ev = self.events().where((F.col("source") == source) & (F.col("kind") == KIND_BAD))
        q = self.quarantine().select("topic", "partition", "offset", F.lit(True).alias("__q"))
        return (
            ev.join(q, ["topic", "partition", "offset"], "left")
            .where(F.col("__q").isNull())
            .orderBy("topic", "partition", "offset", "idx")
            .select("topic", "partition", "offset", "error")
            .limit(limit)
            .collect()
        )

    def quarantine_open_bad(self, source: str) -> int:
        """Move the source's open bad records into the quarantine table (idempotent)."""
        if not self.tally(source).bad:
            return 0
        ev = self.events().where((F.col("source") == source) & (F.col("kind") == KIND_BAD))
        q = self.quarantine().select(
            "topic", "partition", "offset", "idx", F.lit(True).alias("__q")
        )
        fresh = (
            ev.join(q, ["topic", "partition", "offset", "idx"], "left")
            .where(F.col("__q").isNull())
            .select(
                "source",
                "topic",
                "partition",
                "offset",
                "idx",
                "db",
                "tbl",
                "commit_ts",
                F.col("error").alias("reason"),
                "raw_key",
                "raw_value",
            )
            .dropDuplicates(["topic", "partition", "offset", "idx"])
        )
        n = fresh.count()
        if n:
            fresh.write.format("delta").mode("append").save(self.quarantine_path)
        return n

    def upstream_tables(self, source: str) -> list[dict]:
        """{db, tbl, rows, ddls} for every upstream table seen in a source."""
        return [
            {"db": db, "tbl": tbl, "rows": rows, "ddls": ddls}
            for (db, tbl), (rows, ddls) in sorted(self.tally(source).tables.items())
        ]

    def ddl_events(self, source: str, max_ts: int) -> list[DdlEvent]:
        if not self.tally(source).ddls:
            return []
        rows = (
            self.events()
            .where(
                (F.col("source") == source)
                & (F.col("kind") == KIND_DDL)
                & (F.col("commit_ts") <= max_ts)
            )
            .select(
                "db",
                "tbl",
                "commit_ts",
                "ddl_sql",
                "ddl_hint",
                "table_changes",
                "topic",
                "partition",
                "offset",
            )
            .collect()
        )
        return [
            DdlEvent(
                db=r["db"] or "",
                tbl=r["tbl"] or "",
                commit_ts=r["commit_ts"],
                sql=r["ddl_sql"] or "",
                hint=r["ddl_hint"],
                table_changes=r["table_changes"],
                topic=r["topic"],
                partition=r["partition"],
                offset=r["offset"],
            )
            for r in rows
        ]

    def first_meta(self, source: str, db: str, tbl: str):
        """Protocol column metadata and pk names of one row of an upstream table (for inference)."""
        r = (
            self.events()
            .where(
                (F.col("source") == source)
                & (F.col("kind") == KIND_ROW)
                & (F.col("db") == db)
                & (F.col("tbl") == tbl)
                & F.col("col_meta").isNotNull()
            )
            .orderBy("commit_ts", "partition", "offset", "idx")
            # Keys and values as arrays: a map reaches Python through a Java HashMap, which
            # loses the message's column order (the order an inferred schema must keep).
            .select(
                F.map_keys("col_meta").alias("names"),
                F.map_values("col_meta").alias("metas"),
                "pk_names",
            )
            .limit(1)
            .collect()
        )
        if not r:
            return None, None
        meta = dict(zip(r[0]["names"], r[0]["metas"], strict=True))
        return meta, list(r[0]["pk_names"] or [])

    # --- schema history -------------------------------------------------------------

    def schema_versions(self) -> dict[tuple[str, str], list[tuple[int, TableSchema]]]:
        rows = self.spark.read.format("delta").load(self.history_path).collect()
        out: dict[tuple[str, str], dict[int, TableSchema]] = {}
        for r in rows:
            out.setdefault((r["db"], r["tbl"]), {})[r["commit_ts"]] = TableSchema.from_json(
                r["schema_json"]
            )
        return {k: sorted(v.items()) for k, v in out.items()}

    def record_schema(self, source: str, schema: TableSchema, commit_ts: int, ddl: str) -> None:
        self.spark.createDataFrame(
            [(schema.db, schema.table, commit_ts, ddl, schema.to_json(), source)],
            SCHEMA_HISTORY_SCHEMA,
        ).write.format("delta").mode("append").save(self.history_path)


def _properties_sql(properties: dict[str, str]) -> str:
    """`'k' = 'v', ...` for TBLPROPERTIES, in key order (same properties, same SQL)."""
    return ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in sorted(properties.items()))


def _since_sql(source: str, known: SourceTally) -> str:
    """SQL: a source's events staged after `known` (by offset per partition, so Delta's
    file statistics skip the older files; a partition `known` lacks is new throughout)."""
    cond = f"`source` = {sql_string(source)}"
    if not known.partitions:
        return cond
    newer, seen = [], []
    for (topic, part), p in sorted(known.partitions.items()):
        same = f"topic = {sql_string(topic)} AND `partition` = {int(part)}"
        seen.append(f"({same})")
        newer.append(f"({same} AND `offset` > {int(p.last_offset)})")
    return f"{cond} AND ({' OR '.join(newer)} OR NOT ({' OR '.join(seen)}))"


def _watermark_ts() -> Column:
    """commit_ts of a watermark event, else NULL (what a partition's progress is for
    sources with commit_ts)."""
    return F.when(F.col("kind") == KIND_WATERMARK, F.col("commit_ts"))


def _inexact_ts() -> Column:
    """The approximate ts of a row/DDL event of a source without commit_ts, else NULL."""
    return F.when(F.col("kind").isin(KIND_ROW, KIND_DDL) & ~F.col("exact_ts"), F.col("commit_ts"))


def target_marker(spark: SparkSession, location: str) -> Marker | None:
    """The marker of the latest ticdc-sync commit of a target, or None if it has none."""
    return latest_user_metadata(spark, location, Marker.from_user_metadata)


def latest_user_metadata(spark: SparkSession, location: str, parse: Callable[[str | None], T]) -> T:
    """`parse` of the newest commit's userMetadata that parses to something (or None)."""
    # The newest commits first, widening the look-back only while none parses (commits
    # by others, e.g. OPTIMIZE, carry none): the history grows with every run.
    limit = 4
    while True:
        # The command's rows are collected as they are and ordered here: a projection or
        # sort in Spark ran three small jobs per call (0.1-0.2 s, benchmarks/README.md).
        rows = spark.sql(f"DESCRIBE HISTORY {table_ref(location)} LIMIT {limit}").collect()
        for r in sorted(rows, key=lambda r: r["version"], reverse=True):
            found = parse(r["userMetadata"])
            if found is not None:
                return found
        if len(rows) < limit:
            return None  # type: ignore[return-value]
        limit *= 4


def table_exists(spark: SparkSession, location: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, location)


def has_data_files(spark: SparkSession, location: str) -> bool:
    """Whether the Delta table at `location` has data files: the file count of its latest
    version.

    An empty table is known from that version's checksum file (local tables), without the
    Spark job of 0.5-1 s that rebuilds the snapshot's file list: an INSERT or a skipped
    backfill follows, which needs no file list. Otherwise `DESCRIBE DETAIL` answers: a
    MERGE or UPDATE follows, which rebuilds the file list anyway, and rebuilding it here
    first measured faster than leaving it to the MERGE (benchmarks/README.md)."""
    if checksum_num_files(location) == 0:
        return False
    detail = spark.sql(f"DESCRIBE DETAIL {table_ref(location)}").collect()[0]
    return int(detail["numFiles"] or 0) > 0


def checksum_num_files(location: str) -> int | None:
    """`numFiles` of the newest commit's version checksum (`_delta_log/<version>.crc`, a
    required field of that file in the Delta protocol), or None where it cannot be read:
    a remote table, a version without a checksum, a file being written."""
    found = _newest_log_file(location, ".crc")
    if found is None:
        return None
    try:
        return int(json.loads(found[1])["numFiles"])
    except (ValueError, KeyError, TypeError):
        return None


def latest_commit(location: str) -> tuple[int, str] | None:
    """(version, SHA-256 of its commit file) of a local Delta table's newest commit, or None
    (a remote table, no commit yet). Commit files are never rewritten, so the pair names
    one commit of one table, also across a table deleted and made anew."""
    found = _newest_log_file(location, ".json")
    if found is None:
        return None
    version, data = found
    return version, hashlib.sha256(data).hexdigest()


def _newest_log_file(location: str, suffix: str) -> tuple[int, bytes] | None:
    """(version, bytes of `_delta_log/<version><suffix>`) for a local table's newest commit,
    or None: a remote table, no commit yet, a file that cannot be read."""
    if not is_local(location):
        return None
    log = local_path(location) / "_delta_log"
    try:
        versions = [int(f.name[:20]) for f in log.iterdir() if _is_commit_file(f.name)]
        if not versions:
            return None
        version = max(versions)
        return version, (log / f"{version:020d}{suffix}").read_bytes()
    except OSError:
        return None


def _is_commit_file(name: str) -> bool:
    return len(name) == 25 and name.endswith(".json") and name[:20].isdigit()


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set a session conf inside the block; restore what was there after."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def user_metadata(spark: SparkSession, text: str) -> AbstractContextManager[None]:
    """Attach `text` as the userMetadata of every Delta commit made inside the block."""
    return session_conf(spark, MARKER_COMMIT_CONF, text)


def commit_marker(spark: SparkSession, marker: Marker) -> AbstractContextManager[None]:
    """Attach a target's progress marker to every Delta commit made inside the block."""
    return user_metadata(spark, marker.to_json())


class RunLock:
    """One `run` per project at a time: an exclusive lock file in the warehouse state folder."""

    def __init__(self, warehouse: str) -> None:
        self.path = local_path(state_location(warehouse, "run.lock"))
        self.held = False

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale():
                    self.path.unlink(missing_ok=True)
                    continue
                owner = self.path.read_text(errors="replace").strip()
                raise UserError(
                    f"another `ticdc-sync run` holds {self.path} ({owner}) "
                    "(hint: wait for it to finish; if no run is active, delete the lock file)"
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(f"pid {os.getpid()}\n")
            self.held = True
            return self
        raise UserError(f"cannot take the run lock {self.path}")

    def _stale(self) -> bool:
        try:
            text = self.path.read_text()
            pid = int(text.split()[1])
        except (OSError, ValueError, IndexError):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def __exit__(self, *exc: object) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
