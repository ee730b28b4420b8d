"""A target's maintenance, carried out: what its table holds (files, bytes, when it was last
compacted and vacuumed), then what `plan.maintenance.due` says is due: OPTIMIZE (bin-packing
its small files; a clustered table is clustered by it), VACUUM of the files removed longer
ago than the retention, and a checkpoint when its log has gone long without one (commits
written by delta-rs write none).

Runs on an apply worker while no apply of the target runs (`run.loop_maintenance`), so its
commits race none of the run's; each names its crash point. Neither OPTIMIZE nor VACUUM
carries a marker: a read as of a TSO takes an OPTIMIZE's version for the one before it
(`read.as_of`), and the next apply's commit carries the marker on. Decides nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from pyspark.sql import SparkSession

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.lake import LakeTable
from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.plan.maintenance import TableFacts, due, vacuum_hours
from ticdc_sync.run.engine import MaintainJob, TargetMaintained
from ticdc_sync.spark.runtime.conf import before_commit, session_confs, without_user_metadata
from ticdc_sync.spark.runtime.delta_log import checksum_size, data_size, newest_version
from ticdc_sync.spark.runtime.remote import default_parallelism, is_connect
from ticdc_sync.spark.staging.table import (
    COMPACT_SMALLER_THAN,
    COMPACT_TO,
    LISTING_PARALLELISM,
    OPTIMIZE_MAX_FILE,
    OPTIMIZE_MIN_FILE,
)
from ticdc_sync.warehouse.locations import is_local, local_path

# A VACUUM shorter than Delta's own default retention (7 days) is refused by Delta unless
# this check is off; the retention passed is the plan's, never shorter than it.
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# Commits without a checkpoint after which the target is checkpointed (Delta's Spark writer
# checkpoints every `delta.checkpointInterval`, 10 by default; delta-rs commits do not).
CHECKPOINT_AFTER = 50
# How far back DESCRIBE HISTORY looks for the last OPTIMIZE and VACUUM.
HISTORY = 200


class Memory:
    """What this process did per target (wall ms of its last compaction and VACUUM), so that
    a look reads the history only the first time."""

    def __init__(self) -> None:
        self.compacted: dict[str, int] = {}
        self.vacuumed: dict[str, int] = {}


def maintain(spark: SparkSession, job: MaintainJob, memory: Memory) -> TargetMaintained:
    """Look at `job`'s target and do what is due (see the module)."""
    t0 = time.monotonic()
    loc = job.location
    now = int(time.time() * 1000)
    m = job.maintenance
    files, size = _data_size(spark, loc)
    last_c, last_v = memory.compacted.get(job.target), memory.vacuumed.get(job.target)
    if last_v is None:
        created = _created_ms(loc)
        if created is not None and now - created < m.vacuum_every_ms:
            last_v = created  # nothing was removed before it
        else:
            last_c, last_v = _history(spark, loc, created)
            for known, ms in ((memory.compacted, last_c), (memory.vacuumed, last_v)):
                if ms is not None:
                    known.setdefault(job.target, ms)
    d = due(m, TableFacts(files, size, last_c, last_v), now, job.held_tso)
    compacted = vacuumed = False
    with without_user_metadata(spark):
        if d.compact:
            sizes = {
                OPTIMIZE_MIN_FILE: str(COMPACT_SMALLER_THAN),
                OPTIMIZE_MAX_FILE: str(COMPACT_TO),
            }
            before_commit("maintenance.compact", target=job.target)
            with session_confs(spark, sizes):
                spark.sql(f"OPTIMIZE {table_ref(loc)}").collect()
            last_c = memory.compacted[job.target] = int(time.time() * 1000)
            compacted = True
            files, size = _data_size(spark, loc)
        if d.vacuum:
            hours = vacuum_hours(d.retain_ms)
            confs = {
                RETENTION_CHECK: "false",
                LISTING_PARALLELISM: str(max(1, default_parallelism(spark))),
            }
            before_commit("maintenance.vacuum", target=job.target)
            with session_confs(spark, confs):
                spark.sql(f"VACUUM {table_ref(loc)} RETAIN {hours} HOURS").collect()
            last_v = memory.vacuumed[job.target] = now
            vacuumed = True
        _checkpoint(spark, job.target, loc)
    return TargetMaintained(
        job.target,
        files=files,
        bytes=size,
        removed_bytes=_removed_bytes(loc, size),
        compacted=compacted,
        vacuumed=vacuumed,
        last_compacted=None if last_c is None else last_c / 1000,
        last_vacuumed=None if last_v is None else last_v / 1000,
        seconds=time.monotonic() - t0,
    )


def _data_size(spark: SparkSession, location: str) -> tuple[int, int]:
    """(data files, bytes) of the target now: its version checksum, else delta-rs's list of
    its files (commits by delta-rs write no checksum, and `DESCRIBE DETAIL` would be a Spark
    job per target per look), else Delta."""
    found = checksum_size(location)
    if found is None:
        with contextlib.suppress(UserError):
            found = LakeTable(location).data_files()
    return found if found is not None else data_size(spark, location)


def _created_ms(location: str) -> int | None:
    """Wall ms of a local table's first commit, while its log still holds it."""
    if not is_local(location):
        return None
    try:
        text = (local_path(location) / "_delta_log" / f"{0:020d}.json").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        try:
            info = json.loads(line).get("commitInfo")
        except ValueError:
            return None
        if isinstance(info, dict) and info.get("timestamp") is not None:
            return int(info["timestamp"])
    return None


def _history(
    spark: SparkSession, location: str, created: int | None
) -> tuple[int | None, int | None]:
    """Wall ms of the newest OPTIMIZE and VACUUM in the table's recent history; without a
    VACUUM there, its creation when the history reaches it (None: not known)."""
    rows = spark.sql(f"DESCRIBE HISTORY {table_ref(location)} LIMIT {HISTORY}").collect()
    stamps: dict[str, int] = {}
    for r in rows:
        op = str(r["operation"] or "")
        ms = int(r["timestamp"].timestamp() * 1000)
        key = "c" if op == "OPTIMIZE" else "v" if op.startswith("VACUUM") else None
        if key is not None and ms > stamps.get(key, -1):
            stamps[key] = ms
    if "v" not in stamps and len(rows) < HISTORY:
        oldest = min((int(r["timestamp"].timestamp() * 1000) for r in rows), default=None)
        found = created if created is not None else oldest
        if found is not None:
            stamps["v"] = found
    return stamps.get("c"), stamps.get("v")


def _checkpoint(spark: SparkSession, target: str, location: str) -> None:
    """Checkpoint a local table whose log has gone `CHECKPOINT_AFTER` commits without one
    (a checkpoint also lets Delta clean up log entries older than its log retention)."""
    if is_connect(spark) or not is_local(location):
        return
    newest = newest_version(location)
    if newest is None or newest - _last_checkpoint(location) < CHECKPOINT_AFTER:
        return
    before_commit("maintenance.checkpoint", target=target)
    jvm = spark.sparkContext._jvm  # type: ignore[union-attr]
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, location)
    log.checkpoint()


def _last_checkpoint(location: str) -> int:
    try:
        text = (local_path(location) / "_delta_log" / "_last_checkpoint").read_text()
        return int(json.loads(text)["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def _removed_bytes(location: str, live: int) -> int | None:
    """Bytes of a local table's data files on disk beyond its newest version's: files
    removed and not vacuumed yet (and any a killed writer left). None: a remote table."""
    if not is_local(location):
        return None
    total = 0
    root = local_path(location)
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith("_delta_log")]
        for n in names:
            if n.endswith(".parquet"):
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(folder, n))
    return max(0, total - live)
