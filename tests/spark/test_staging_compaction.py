"""The staging table's compaction (`Staging.compact`) rewrites only its small files, and only
once enough new ones were added since the last time; it runs beside staging
(`maintenance.Maintenance`) without losing an event or a tally. A run stopped in its OPTIMIZE
or its VACUUM is tested at their crash points (`tests/spark/crash_scenario.py`).

Each staging commit adds a file or a few. A compacted file at or above the size bound is
left alone by the next compaction, so a compaction costs what was staged since the last
one, not the whole table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.spark.staged_batches import BATCH_EVENTS, SOURCE, batch
from ticdc_sync.spark.staging.maintenance import Maintenance
from ticdc_sync.spark.staging.table import Staging

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def files(spark, staging: Staging) -> dict[str, int]:
    """The table's data files: path -> size."""
    df = spark.read.format("delta").load(staging.events_path)
    detail = df.select(F.input_file_name().alias("f")).distinct().collect()
    names = {r["f"].rsplit("/", 1)[-1] for r in detail}
    return {n: (Path(staging.events_path) / n).stat().st_size for n in names}


def stage_batches(spark, staging: Staging, n: int, offset: int = 0) -> int:
    """Stage `n` batches from `offset` on, one commit each; the offset after them."""
    for _ in range(n):
        staging.stage(SOURCE, batch(spark, offset))
        offset += BATCH_EVENTS
    return offset


def test_compaction_rewrites_the_new_small_files_only_and_keeps_the_tallies(spark, tmp_path):
    staging = Staging(spark, str(tmp_path / "wh"))
    offset = stage_batches(spark, staging, 4)
    before = staging.tally(SOURCE).to_dict()
    assert len(files(spark, staging)) >= 5
    # Not yet: at most 20 files.
    assert not staging.compaction_due(above_files=20)
    # Every file is small (under 1 MiB): all into one.
    assert staging.compaction_due(above_files=3)
    staging.compact(smaller_than=1 << 20)
    (compacted,) = files(spark, staging).items()
    # No new files since: nothing to do, whatever the count.
    assert not staging.compaction_due(above_files=0)

    offset = stage_batches(spark, staging, 3, offset)
    added = set(files(spark, staging)) - {compacted[0]}
    assert len(added) >= 4
    # Files under the compacted one's size are rewritten; it stays as it is.
    assert staging.compaction_due(above_files=3)
    staging.compact(smaller_than=compacted[1])
    now = files(spark, staging)
    assert now[compacted[0]] == compacted[1]
    assert len(now) == 2 and not (set(now) & added)
    # Every event is still there once, and the tallies are those of the stages.
    df = spark.read.format("delta").load(staging.events_path)
    assert df.count() == offset == df.select("offset").distinct().count()
    after = Staging(spark, str(tmp_path / "wh")).tally(SOURCE).to_dict()
    assert after["partitions"] == staging.tally(SOURCE).to_dict()["partitions"]
    assert before != after  # three more batches since


def history(spark, staging: Staging) -> list:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{staging.events_path}`").collect()
    return sorted(rows, key=lambda r: r["version"])


def assert_each_event_once_and_tallied(spark, staging: Staging, last: int) -> None:
    """Offsets 0..`last` staged once each, and a new process's tally says so."""
    df = spark.read.format("delta").load(staging.events_path)
    assert df.count() == last + 1 == df.select("offset").distinct().count()
    assert df.agg(F.max("offset")).collect()[0][0] == last
    fresh = Staging(spark, staging.warehouse).tally(SOURCE)
    (p,) = fresh.partitions.values()
    assert p.last_offset == last
    assert fresh.tables[("shop", "a")][0] == last + 1  # rows counted once each


def test_staging_goes_on_beside_a_compaction_and_loses_nothing(spark, tmp_path):
    staging = Staging(spark, str(tmp_path / "wh"))
    offset = stage_batches(spark, staging, 4)
    compactor = Maintenance(staging, spark.newSession)
    assert not compactor.start_if_due(above_files=20)
    assert compactor.start_if_due(above_files=3)
    # Stage while it runs, as a `--follow` run's polls do (bounded: it ends on its own).
    for _ in range(40):
        if not compactor.busy():
            break
        staging.stage(SOURCE, batch(spark, offset))
        offset += BATCH_EVENTS
    assert compactor.wait(timeout=300)
    (ended,) = compactor.ended()
    assert ended.compacted is not None and ended.compacted.error is None, ended
    assert not ended.trimmed and not ended.failed
    assert compactor.ended() == []  # reported once

    commits = history(spark, staging)
    optimize = [c for c in commits if c["operation"] == "OPTIMIZE"]
    assert len(optimize) == 1
    # Its commits carry no tallies: they stage nothing.
    assert all(c["userMetadata"] is None for c in commits if c["operation"] != "WRITE")
    # Staging commits landed between the snapshot OPTIMIZE read and its own commit (Delta
    # retried it over them): the compaction ran beside the polls, not between them.
    (o,) = optimize
    beside = [
        c["version"]
        for c in commits
        if c["operation"] == "WRITE" and o["readVersion"] < c["version"] < o["version"]
    ]
    assert beside, [(c["version"], c["operation"], c["readVersion"]) for c in commits]
    # The newest commits may be the compaction's: a new process skips them for the tallies.
    staging.stage(SOURCE, batch(spark, offset))
    offset += BATCH_EVENTS
    assert_each_event_once_and_tallied(spark, staging, offset - 1)
