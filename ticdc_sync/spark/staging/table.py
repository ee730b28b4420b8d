"""The staging table `<warehouse>/_ticdc_sync/events`: decoded events, appended one commit a batch.

Consumed positions and watermarks are derived from the staged events, so they are committed
atomically with the events themselves; each staging commit carries the running tallies of
everything staged up to and including its own batch (`staged.py`), so `plan`, `status` and
a read as of `latest` know what is staged from the newest commit alone. A trim's bound
travels in those tallies too (`intend_trim`); its DELETE follows later, beside the polls
(`trim.py`). Only small aggregates and DDL events reach the driver here; rows never do. Knows nothing of
targets. One class, `Staging`, whose appends, carried tallies, trim intents, compaction and
page layout share one table's lock (`rewrite_lock`) and its carried tallies; apart from it
are the trim's DELETE (`trim.py`), the thread beside the polls (`maintenance.py`), the
check for records staged twice (`repeats.py`) and the creation of state tables
(`state_table.py`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.events import (
    EVENT_FIELDS,
    EVENT_SCHEMA,
    KIND_BAD,
    KIND_DDL,
    KIND_ROW,
    KIND_WATERMARK,
)
from ticdc_sync.core.sqlgen import quote, sql_string, table_ref
from ticdc_sync.core.staged import Carried, SourceTally, read_carried, to_user_metadata
from ticdc_sync.spark.runtime.conf import (
    before_commit,
    session_confs,
    user_metadata,
    without_user_metadata,
)
from ticdc_sync.spark.runtime.delta_log import (
    TableFacts,
    checksum_facts,
    checksum_num_files,
    latest_user_metadata,
    newest_version,
)
from ticdc_sync.spark.runtime.labels import job_name, read_job
from ticdc_sync.spark.runtime.remote import default_parallelism, is_connect
from ticdc_sync.spark.staging.repeats import POSITION, refuse_conflicts, repeats
from ticdc_sync.spark.staging.state_table import ensure_table, properties_sql
from ticdc_sync.warehouse.locations import state_location

STAGED_SCHEMA = "`source` STRING, " + EVENT_SCHEMA
# Each staging commit adds a file or a few per task: past this many new ones, OPTIMIZE
# bin-packs them.
COMPACT_ABOVE_FILES = 200
# OPTIMIZE rewrites only files smaller than this, into files of up to COMPACT_TO. Its
# defaults (both 1 GiB) rewrite every file under 1 GiB each time, compacted ones included,
# so each compaction grew with the table, and `--follow`'s staging waited for it: 28-39 s
# after three minutes at 2,000 ev/s (benchmarks/README.md). Bounded, a compaction rewrites
# what was staged since the last one (and compacted files still under this size).
COMPACT_SMALLER_THAN = 32 << 20
COMPACT_TO = 128 << 20
OPTIMIZE_MIN_FILE = "spark.databricks.delta.optimize.minFileSize"
OPTIMIZE_MAX_FILE = "spark.databricks.delta.optimize.maxFileSize"
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
# Delta skips the commit of a write that adds no file; the commit that carries a catch-up
# batch's tallies adds none.
RECORD_EMPTY_COMMIT = {"spark.databricks.delta.skipRecordingEmptyCommits": "false"}

# File statistics only for the columns staged events are selected by (source, position,
# kind, commit_ts, table): Delta's default covers the first 32 columns, and min/max of the
# row-image text made every staging write measurably slower (benchmarks/README.md) for
# statistics no query uses.
#
# No Parquet dictionary for the staged columns that are (nearly) unique per event: writing
# tried a dictionary for each and dropped it once it grew too big, and where commit_ts kept
# one, every target's read expanded it into a hash set to test its commit_ts range, which
# the file statistics already do; the row-image text (`before_json`, `after_json`) was
# hashed into a dictionary until it overflowed. Both the write and the targets' reads got
# faster without them (benchmarks/README.md).
#
# Pages of at most PAGE_ROWS rows, in files each sorted by LAYOUT (`_laid_out`): a reader of
# one table's changes in a commit_ts range (a target's apply, a read as of a TSO) then reads
# only the pages that hold them. File statistics skip whole files by commit_ts, but every
# file holds every table's events of its batch; Parquet's page index (min/max per page,
# which Spark's and delta-rs's readers use) skips the other tables' pages within a file,
# once a table's rows are together and the pages small enough to fall inside them (Parquet's
# default is 20,000 rows). Compaction (OPTIMIZE) keeps each file's rows together, in order.
#
# Delta hands a table's properties to the Parquet writer, which reads `#column` settings and
# the page size; an older staging table gains them on the next run (`_set_missing_properties`).
PAGE_ROWS = 1000
STAGED_PROPERTIES = {
    "delta.dataSkippingStatsColumns": "source,topic,partition,offset,idx,kind,commit_ts,db,tbl",
    **{
        f"parquet.enable.dictionary#{c}": "false"
        for c in ("offset", "commit_ts", "kafka_ts", "before_json", "after_json")
    },
    "parquet.page.row.count.limit": str(PAGE_ROWS),
}
# The order of the events within each staged file: a table's events together, by commit_ts.
# Not by `source`: a batch is one source's.
LAYOUT = ("db", "tbl", "commit_ts")


@dataclass(frozen=True)
class StagedBatch:
    """One staging commit of a source: the tally before it and its aggregate rows
    (`staged.INCREMENT_FIELDS` per topic, partition and table)."""

    source: str
    before: SourceTally
    increments: tuple

    def where(self) -> str:
        """SQL: the events of this batch."""
        return _since_sql(self.source, self.before)


@dataclass(frozen=True)
class PartitionProgress:
    topic: str
    partition: int
    last_offset: int
    watermark: int | None  # highest watermark seen (exact sources) or commit_ts (inexact)
    first_bad_offset: int | None  # first bad record not yet quarantined


class Staging:
    """The staging table of one warehouse."""

    def __init__(self, spark: SparkSession, warehouse: str) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.events_path = state_location(warehouse, "events")
        self._tallies: dict[str, SourceTally] = {}
        self._stored: Carried | None = None
        ensure_table(spark, self.events_path, STAGED_SCHEMA, STAGED_PROPERTIES)
        # What the table has, from its version checksum without a job where it can be read:
        # columns and properties a newer ticdc-sync adds to a table an older one made.
        facts = checksum_facts(self.events_path)
        self._add_missing_columns(self.events_path, EVENT_FIELDS, facts)
        self._set_missing_properties(self.events_path, STAGED_PROPERTIES, facts)
        # Only its CREATE (version 0, no files): nothing was ever staged, so every source's
        # tally is empty, known without reading the table (a run on a new warehouse).
        self._new = facts is not None and facts.files == 0 and newest_version(self.events_path) == 0
        if self._new:
            self._stored = Carried({}, complete=True)
        # Per source, what its newest `stage` added (`StagedBatch`), for the run loop.
        self.last_batch: dict[str, StagedBatch] = {}
        # The table's data files right after this process's last compaction (None: none
        # yet): compacted files stay, so only the files added since count toward the next.
        self._compacted_files: int | None = None
        # Held while the table's files are rewritten beside the polls (a trim's DELETE,
        # `compact`: `maintenance.Maintenance`, on a thread of its own) and while a batch is
        # rewritten (`_replace`): any two of them would conflict (each removes files the
        # other rewrites); a blind append does not, so staging goes on beside them.
        self.rewrite_lock = threading.Lock()

    def _set_missing_properties(
        self, path: str, properties: dict[str, str], facts: TableFacts | None
    ) -> None:
        """Table properties a newer ticdc-sync sets, set on a table an older one created."""
        if facts is not None:
            have = dict(facts.properties)
        else:
            # SHOW TBLPROPERTIES reads the table's metadata only; DESCRIBE DETAIL also
            # rebuilds the snapshot's file list (a Spark job per call).
            rows = self.spark.sql(f"SHOW TBLPROPERTIES {table_ref(path)}").collect()
            have = {r["key"]: r["value"] for r in rows}
        missing = {k: v for k, v in properties.items() if have.get(k) != v}
        if missing:
            before_commit("staging.layout")
            self.spark.sql(
                f"ALTER TABLE {table_ref(path)} SET TBLPROPERTIES ({properties_sql(missing)})"
            )

    def _add_missing_columns(
        self, path: str, fields: tuple[tuple[str, str], ...], facts: TableFacts | None
    ) -> None:
        """Columns a newer ticdc-sync stages, added to a table an older one created (at
        its end, which is where `events.EVENT_FIELDS` keeps them)."""
        if facts is not None:
            have = {name for name, _ in facts.columns}
        else:
            have = {f.name for f in self.spark.read.format("delta").load(path).schema.fields}
        missing = [(n, t) for n, t in fields if n not in have]
        if missing:
            before_commit("staging.layout")
            cols = ", ".join(f"{quote(n)} {t}" for n, t in missing)
            self.spark.sql(f"ALTER TABLE {table_ref(path)} ADD COLUMNS ({cols})")

    def events(self, spark: SparkSession | None = None) -> DataFrame:
        """The staged events, read in `spark` (default: this state's session)."""
        return (spark or self.spark).read.format("delta").load(self.events_path)

    def stage(
        self, source: str, decoded: DataFrame, *, may_repeat: bool = False, keep: bool = True
    ) -> int:
        """Append decoded events in one Delta commit: positions and events move together;
        returns how many events it staged.

        The newest commit carries the tallies of everything staged up to and including it
        (`staged.Carried`), so whoever reads it sees this batch's watermarks. `keep` (a
        poll's batch): the batch is read once and kept (persisted) for its aggregate
        (`_aggregate`), taken before the write, so that its one commit carries them, the
        moment it lands. Otherwise (a catch-up's batch, costlier to keep than to read back)
        the write carries the tallies from before it, the aggregate reads the batch back
        from the table, and a second, empty commit carries the tallies with it.

        `may_repeat`: the records may hold the same (partition, offset) twice (overlapping
        capture files); the batch is then checked, and each position staged once. Copies
        that differ (two records at one offset) are an error, and nothing of the batch stays
        staged."""
        before = self.tally(source)
        cols = [F.lit(source).alias("source"), *[F.col(quote(c)) for c in decoded.columns]]
        batch = decoded.select(*cols)
        try:
            if keep:
                increments = self._stage_kept(source, before, batch, may_repeat)
            else:
                increments = self._stage_then_count(source, before, batch, may_repeat)
            after = before.copy()
            staged = after.fold(increments)
        except BaseException:
            # Whether the batch was committed is not known here: the next tally is read
            # from the table again rather than re-reading what may have been staged. Until
            # then (and while the batch is staged) the tally is `before`, which apply
            # threads may read (`tally`), so it is only replaced, never absent.
            self._tallies.pop(source, None)
            self._stored = None
            raise
        self._tallies[source] = after
        self.last_batch[source] = StagedBatch(source, before, tuple(increments))
        return staged

    def _stage_kept(
        self, source: str, before: SourceTally, batch: DataFrame, may_repeat: bool
    ) -> list:
        """Stage `batch` kept in memory: its aggregate first, then one commit carrying the
        tallies with it. Its aggregate rows."""
        kept = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            # Named, so that progress reports can tell the read of the source (done by
            # the first job over the batch, which keeps it) from the jobs around it.
            with job_name(self.spark, read_job(source)):
                increments = self._aggregate(kept)
            # Nothing read (a poll or run with nothing new): nothing can be there twice.
            if may_repeat and increments and repeats(kept):
                refuse_conflicts(source, kept)
                batch = kept.dropDuplicates(list(POSITION))
                increments = self._aggregate(batch)
            else:
                batch = kept
            after = before.copy()
            after.fold(increments)
            tallies = self._tallies_after(source, after)
            # A batch of nothing makes no commit (Delta skips it), unless the newest
            # commit's tallies leave out its own batch (an earlier version's, or a
            # catch-up's write whose tallies' commit never came): this one completes them.
            # Nor when a trim waits for a commit to carry its bound (`intend_trim`).
            carries = increments or (self._carried().complete and not self._unpublished())
            complete = {} if carries else RECORD_EMPTY_COMMIT
            self._new = False
            with (
                user_metadata(self.spark, to_user_metadata(tallies), "staging.append"),
                session_confs(self.spark, complete),
            ):
                _laid_out(batch).write.format("delta").mode("append").save(self.events_path)
            self._stored = Carried(tallies, complete=True)
        finally:
            kept.unpersist()
        return increments

    def _stage_then_count(
        self, source: str, before: SourceTally, batch: DataFrame, may_repeat: bool
    ) -> list:
        """Stage `batch` in a commit carrying the tallies from before it, aggregate it back
        from the table (and stage its repeated positions once), then commit nothing but the
        tallies with it. Its aggregate rows."""
        earlier = to_user_metadata(
            {**self._others(source), **self._tallies, source: before}, own_events=False
        )
        self._new = False
        with (
            user_metadata(self.spark, earlier, "staging.append"),
            job_name(self.spark, read_job(source)),
        ):
            _laid_out(batch).write.format("delta").mode("append").save(self.events_path)
        since = _since_sql(source, before)
        increments = self._aggregate(self.events().where(since))
        if may_repeat and increments and repeats(self.events().where(since)):
            try:
                refuse_conflicts(source, self.events().where(since))
            except UserError:
                # Nothing of the batch stays: as if it had never been staged.
                self._replace(since, earlier, self.spark.createDataFrame([], self.events().schema))
                raise
            once = self.events().where(since).dropDuplicates(list(POSITION))
            self._replace(since, earlier, once)
            increments = self._aggregate(self.events().where(since))
        after = before.copy()
        after.fold(increments)
        self._commit_tallies(self._tallies_after(source, after))
        return increments

    def _replace(self, where: str, carried: str, rows: DataFrame) -> None:
        """Replace the staged events `where` selects with `rows`, in one atomic commit
        (`replaceWhere`) whose userMetadata is `carried`. Waits for a trim's DELETE or a
        compaction in progress (`rewrite_lock`), which may be rewriting the same files."""
        with self.rewrite_lock, user_metadata(self.spark, carried, "staging.dedupe"):
            (
                _laid_out(rows)
                .write.format("delta")
                .mode("overwrite")
                .option("replaceWhere", where)
                .save(self.events_path)
            )

    def _others(self, source: str) -> dict[str, SourceTally]:
        """Every other source's tally as it is now: from the newest commit, completed by an
        aggregate where an earlier version's commit left out its own batch."""
        return {s: self.tally(s) for s in self._carried().sources if s != source}

    def _tallies_after(self, source: str, after: SourceTally) -> dict[str, SourceTally]:
        """The tallies of a commit that brings `source` to `after`."""
        return {**self._others(source), **self._tallies, source: after}

    # --- trims ---------------------------------------------------------------------

    def intend_trim(self, source: str, upto_ts: int) -> bool:
        """Raise `source`'s trimmed bound (`SourceTally.trimmed`) to `upto_ts` in its tally,
        which the next staging commit carries (a poll's, or `publish`'s). Its events at or
        below it are deleted only once that commit has landed (`published`, then
        `trim.delete` beside the polls): every reader that could read them knows by then
        that they may be gone. Whether the bound rose."""
        tally = self.tally(source)
        if tally.trimmed is not None and tally.trimmed >= upto_ts:
            return False
        raised = tally.copy()
        raised.trimmed = int(upto_ts)
        # A new tally, not the old one changed: the newest commit's (`_carried`) may be
        # that very object, and it must keep saying what that commit carried.
        self._tallies[source] = raised
        return True

    def published(self, source: str) -> SourceTally | None:
        """`source`'s tally as the table's newest commit with tallies carries it (None: it
        names no such source): its `trimmed` is the bound readers know of."""
        return self._carried().sources.get(source)

    def _unpublished(self) -> bool:
        """Whether a trimmed bound was raised (`intend_trim`) that no commit carries yet."""
        carried = self._carried().sources
        return any(
            t.trimmed is not None and (s not in carried or carried[s].trimmed != t.trimmed)
            for s, t in self._tallies.items()
        )

    def publish(self) -> bool:
        """Commit nothing but the tallies when they hold a trimmed bound no commit carries
        yet (a run's last trim: no poll follows to carry it); whether it committed."""
        if not self._unpublished():
            return False
        tallies = {**{s: self.tally(s) for s in self._carried().sources}, **self._tallies}
        self._commit_tallies(tallies)
        return True

    def _commit_tallies(self, tallies: dict[str, SourceTally]) -> None:
        """One commit of no events that carries `tallies` (counting everything staged)."""
        # No partition, so no task: a commit of nothing but the tallies. (Over Spark
        # Connect, without RDDs, an empty local relation, which the server scans as one.)
        schema = self.events().schema
        nothing = (
            self.spark.createDataFrame([], schema)
            if is_connect(self.spark)
            else self.spark.createDataFrame(self.spark.sparkContext.emptyRDD(), schema)
        )
        with (
            user_metadata(self.spark, to_user_metadata(tallies), "staging.tallies"),
            session_confs(self.spark, RECORD_EMPTY_COMMIT),
        ):
            nothing.write.format("delta").mode("append").save(self.events_path)
        self._stored = Carried(tallies, complete=True)

    def compaction_due(self, above_files: int = COMPACT_ABOVE_FILES) -> bool:
        """Whether more than `above_files` data files were added since this process last
        compacted the table (a run or poll adds a few each; in a new process, more than that
        many in all)."""
        return self._num_files() > (self._compacted_files or 0) + above_files

    def compact(
        self, spark: SparkSession | None = None, smaller_than: int = COMPACT_SMALLER_THAN
    ) -> None:
        """OPTIMIZE the staging table's files smaller than `smaller_than` bytes, then VACUUM
        what no version within Delta's retention needs, in `spark` (default: this staging's
        session; `maintenance.Maintenance` gives it one of its own, to run beside the polls).

        Neither commit carries tallies: they change no event, and every reader of the
        tallies takes the newest commit that carries them (`latest_user_metadata`,
        `LakeTable.newest_user_metadata`), so they may land between any two stages. Holds
        `rewrite_lock`: a trim's DELETE or a batch's rewrite of the same files would
        conflict with it."""
        spark = spark or self.spark
        sizes = {OPTIMIZE_MIN_FILE: str(smaller_than), OPTIMIZE_MAX_FILE: str(COMPACT_TO)}
        # VACUUM lists the table's folders in a job of this many tasks (Spark's default:
        # 10,000), which made a VACUUM of a dozen files cost many times its OPTIMIZE; the
        # staging table has one folder (benchmarks/README.md).
        listing = {LISTING_PARALLELISM: str(max(1, default_parallelism(spark)))}
        with self.rewrite_lock, without_user_metadata(spark):
            before_commit("staging.compact")
            with session_confs(spark, sizes):
                spark.sql(f"OPTIMIZE {table_ref(self.events_path)}").collect()
            before_commit("staging.vacuum")
            with session_confs(spark, listing):
                spark.sql(f"VACUUM {table_ref(self.events_path)}").collect()
        self._compacted_files = self._num_files()

    def _num_files(self) -> int:
        files = checksum_num_files(self.events_path)
        if files is None:
            detail = self.spark.sql(f"DESCRIBE DETAIL {table_ref(self.events_path)}").collect()
            files = int(detail[0]["numFiles"] or 0)
        return files

    # --- progress -----------------------------------------------------------------

    def tally(self, source: str) -> SourceTally:
        """What is staged for a source: the tally the table's newest staging commit carries
        (`staged.Carried`), which counts that commit's own events. Only a commit of an
        earlier version (whose tally ends before its own batch), or a source its tallies do
        not name, costs one narrow aggregate over the events after it (by offset, so Delta's
        file statistics skip the older files)."""
        if source not in self._tallies and self._new:
            self._tallies[source] = SourceTally()
        if source not in self._tallies:
            carried = self._carried()
            known = carried.sources.get(source)
            t = SourceTally() if known is None else known.copy()
            if known is None or not carried.complete:
                t.fold(self._aggregate(self.events().where(_since_sql(source, t))))
            self._tallies[source] = t
        return self._tallies[source]

    def _carried(self) -> Carried:
        """The tallies of the table's newest commit that carries any (compactions carry
        none: they change no event); empty and complete for a table never staged to. Read
        once, and again after a failed stage: while a run holds the lease no other process
        writes the table, and `_tallies` keeps every source this one staged since."""
        if self._stored is None:
            found = latest_user_metadata(self.spark, self.events_path, read_carried)
            self._stored = found or Carried({}, complete=self._new)
        return self._stored

    def _aggregate(self, events: DataFrame) -> list:
        """Aggregate rows (`staged.INCREMENT_FIELDS`) of `events`, per topic, partition and
        upstream table."""
        kind = F.col("kind")
        return (
            events.groupBy("topic", "partition", "db", "tbl")
            .agg(
                F.max("offset").alias("last_offset"),
                F.max(_watermark_ts()).alias("watermark"),
                F.max(_inexact_ts()).alias("inexact_ts"),
                F.min(F.when(kind == KIND_BAD, F.col("offset"))).alias("first_bad"),
                F.count(F.when(kind == KIND_BAD, 1)).alias("bad"),
                F.count(F.when(kind == KIND_ROW, 1)).alias("rows"),
                F.count(F.when(kind == KIND_DDL, 1)).alias("ddls"),
                F.count(F.lit(1)).alias("events"),
                F.min(F.when(kind == KIND_ROW, F.col("commit_ts"))).alias("row_lo"),
                F.max(F.when(kind == KIND_ROW, F.col("commit_ts"))).alias("row_hi"),
            )
            .collect()
        )

    def partitions(
        self, source: str, open_bad: dict[tuple[str, int], int]
    ) -> list[PartitionProgress]:
        """Per partition of a source: last offset staged, highest watermark, and the first
        open bad record (`open_bad`: offset per (topic, partition), `Quarantine.first_open`)."""
        tally = self.tally(source)
        return [
            PartitionProgress(p.topic, p.partition, p.last_offset, p.progress_ts, open_bad.get(k))
            for k, p in sorted(tally.partitions.items())
        ]

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


def _laid_out(events: DataFrame) -> DataFrame:
    """`events` sorted by LAYOUT within each task, so each file it writes holds a table's
    events together (no shuffle: the files are the ones the write made anyway)."""
    return events.sortWithinPartitions(*LAYOUT)


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
