"""A trim's DELETE of the staging table: a source's row, watermark and empty events at or below a
bound that a staging commit has already published (`Staging.intend_trim`, `published`).

It runs beside the polls (`maintenance.Maintenance`), and must neither make them wait nor
lose to them. Open-source Delta holds every table at Serializable isolation, under which a
commit that changes data in an unpartitioned table conflicts with any file appended after
the snapshot it read: a SQL DELETE, which reads, rewrites and commits in one statement of
seconds, fails whenever a poll commits meanwhile, which at a poll every few seconds is
nearly always (measured: every time). So the work and the commit are apart here: the files
holding events to delete are found and their other events written anew, in a transaction
opened on one snapshot, beside the polls; then a new transaction on the newest snapshot
commits the removal of those files and the addition of the new ones at once, which leaves
a window of milliseconds for a poll to land in (it is tried again if one does). Both go
through Delta's own transaction (`DeltaLog`, `OptimisticTransaction`: its writer keeps the
table's statistics and checksums), reached through the JVM.

That is exact because the trim touches nothing a poll adds: it deletes only events at
positions the publishing commit's tally counts (each partition's last offset then), which
rules out every event staged after it, whatever its commit_ts (a change TiCDC sent again
after a restart may be older than the bound); and the files it replaces are ones only
maintenance rewrites, one at a time (`Staging.rewrite_lock`), so they are still there, as
they were read, when the commit lands. Its commit carries no tallies: it changes nothing
they count (deleted events stay counted, as they always were), and every reader takes the
newest commit that carries them. DDL and bad events stay. Without a JVM (a Spark Connect
session) the DELETE is a SQL statement, tried again after a poll's commit lands in it.
Decides nothing about the bound (`warehouse.retention` does).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core.events import KIND_EMPTY, KIND_ROW, KIND_WATERMARK
from ticdc_sync.core.sqlgen import sql_string, table_ref
from ticdc_sync.core.staged import SourceTally
from ticdc_sync.spark.runtime.conf import before_commit, session_confs, without_user_metadata

KINDS = (KIND_ROW, KIND_WATERMARK, KIND_EMPTY)
# Commits of the trim tried, each on the newest snapshot, before it is given up for this
# round (a poll landing in each window of milliseconds between snapshot and commit).
COMMIT_ATTEMPTS = 20
HISTORY_METRICS = "spark.databricks.delta.history.metricsEnabled"


class LostToPolls(RuntimeError):
    """Polls committed in every attempt's window: the trim is tried again later."""


@dataclass(frozen=True)
class TrimJob:
    """Delete `source`'s events at or below `upto_ts` staged at or before `positions`:
    (topic, partition, last offset) of each partition the publishing commit counted."""

    source: str
    upto_ts: int
    positions: tuple[tuple[str, int, int], ...]

    @staticmethod
    def of(source: str, published: SourceTally) -> TrimJob | None:
        """The trim `published` (a commit's tally, `Staging.published`) announces, if any."""
        if published.trimmed is None or not published.partitions:
            return None
        positions = tuple(
            (topic, part, p.last_offset)
            for (topic, part), p in sorted(published.partitions.items())
        )
        return TrimJob(source, int(published.trimmed), positions)

    def where(self) -> str:
        """SQL: the events this trim deletes."""
        kinds = ", ".join(sql_string(k) for k in KINDS)
        staged = " OR ".join(
            f"(topic = {sql_string(t)} AND `partition` = {int(p)} AND `offset` <= {int(o)})"
            for t, p, o in self.positions
        )
        return (
            f"`source` = {sql_string(self.source)} AND kind IN ({kinds}) "
            f"AND commit_ts <= {int(self.upto_ts)} AND ({staged})"
        )


def may_delete(events_path: str, source: str, upto_ts: int) -> bool:
    """Whether the staging table may hold a `source` event a trim to `upto_ts` deletes.
    Asked of delta-rs, which answers from the files' statistics without a Spark job (the
    staged events of a warehouse younger than the retention never are); where it cannot
    answer, it says yes and the DELETE finds out itself."""
    from ticdc_sync.core.lake import LakeTable

    where = [
        ("source", "=", source),
        ("kind", "in", list(KINDS)),
        ("commit_ts", "<=", int(upto_ts)),
    ]
    try:
        return LakeTable(events_path).read(["commit_ts"], where, limit=1).num_rows > 0
    except Exception:  # noqa: BLE001 - only a shortcut: the DELETE decides
        return True


def delete(spark: SparkSession, events_path: str, job: TrimJob) -> int:
    """Delete `job`'s events in `spark` (see the module docstring), in a commit without
    tallies; how many it deleted. The caller holds `Staging.rewrite_lock`. Raises
    `LostToPolls` when polls took every window it had to commit in."""
    with without_user_metadata(spark):
        if getattr(spark, "_jsparkSession", None) is None:
            return _delete_sql(spark, events_path, job)
        return _delete_apart(spark, events_path, job)


def _delete_apart(spark: SparkSession, events_path: str, job: TrimJob) -> int:
    jvm = spark._jvm
    assert jvm is not None
    jspark = spark._jsparkSession
    # The commit reads its settings (userMetadata among them: none here) from the JVM
    # thread's active session.
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(jspark)
    delta = jvm.org.apache.spark.sql.delta
    log = delta.DeltaLog.forTable(jspark, events_path)
    work = log.startTransaction()
    events = spark.read.format("delta").option("versionAsOf", work.readVersion()).load(events_path)
    where = job.where()
    path = F.col("_metadata.file_path")
    hits = events.where(where).groupBy(path.alias("f")).count().collect()
    if not hits:
        return 0
    paths = sorted(r["f"] for r in hits)
    names = [p.rsplit("/", 1)[-1] for p in paths]
    deleted = sum(int(r["count"]) for r in hits)
    # What those files keep: everything but the trim's events (a NULL condition keeps).
    # Read as the Parquet files they are (the staging table maps no columns and has no
    # deletion vectors), so that only they are read; a column a file predates reads NULL,
    # as Delta reads it.
    keep: DataFrame = (
        spark.read.schema(events.schema).parquet(*paths).where(f"NOT coalesce(({where}), false)")
    )
    added = work.writeFiles(keep._jdf)
    in_names = F.substring_index(F.col("path"), "/", -1).isin(names)
    old = list(work.snapshot().allFiles().filter(in_names._jc).collectAsList())
    if len(old) != len(names):
        raise RuntimeError(f"staging table: {len(names) - len(old)} file(s) of the trim not found")
    now = int(time.time() * 1000)
    actions = jvm.java.util.ArrayList()
    for f in old:
        actions.add(f.removeWithTimestamp(now, True))
    actions.addAll(jvm.scala.jdk.javaapi.CollectionConverters.asJava(added))
    converters = jvm.scala.jdk.javaapi.CollectionConverters
    commit_actions = converters.asScala(actions).toList()
    condition = jspark.sessionState().sqlParser().parseExpression(where)
    conditions = jvm.java.util.ArrayList()
    conditions.add(condition)
    op = getattr(delta, "DeltaOperations$Delete")(converters.asScala(conditions).toList())
    # A DELETE's history metrics come from its SQL command; this commit has none to give.
    with session_confs(spark, {HISTORY_METRICS: "false"}):
        for _ in range(COMMIT_ATTEMPTS):
            before_commit("staging.trim", partial_in=events_path)
            txn = log.startTransaction()
            try:
                txn.commit(commit_actions, op)
            except Exception as e:  # noqa: BLE001 - a poll in the window: a newer snapshot
                if not _concurrent(e):
                    raise
                continue
            return deleted
    raise LostToPolls(f"polls committed in each of {COMMIT_ATTEMPTS} windows")


def _delete_sql(spark: SparkSession, events_path: str, job: TrimJob) -> int:
    """The DELETE as one SQL statement (no JVM to reach: Spark Connect)."""
    before_commit("staging.trim")
    try:
        rows = spark.sql(f"DELETE FROM {table_ref(events_path)} WHERE {job.where()}")
        return int(rows.collect()[0][0] or 0)
    except Exception as e:  # noqa: BLE001 - lost to a poll: tried again later
        if _concurrent(e):
            raise LostToPolls("a poll committed while it ran") from None
        raise


def _concurrent(e: BaseException) -> bool:
    """Whether `e` is Delta's conflict with a commit made meanwhile."""
    text = str(e)
    return "Concurrent" in text or "DELTA_CONCURRENT" in text
