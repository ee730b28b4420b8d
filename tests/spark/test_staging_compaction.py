"""The staging table's compaction (`Staging.compact`) rewrites only its small files, and only
once enough new ones were added since the last time; the tallies it carries stay as they were.

Each staging commit adds a file or a few. A compacted file at or above the size bound is
left alone by the next compaction, so a compaction costs what was staged since the last
one, not the whole table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from ticdc_sync.events import EVENT_SCHEMA, KIND_ROW
from ticdc_sync.spark.staging import Staging

pytestmark = pytest.mark.spark

SOURCE = "src"


def batch(spark, first: int, n: int = 50):
    """`n` row events of one table, offsets `first`..; two tasks, so two files a commit."""
    rows = [
        (
            "t",
            0,
            first + i,
            0,
            KIND_ROW,
            1000 + first + i,
            True,
            "shop",
            "a",
            "c",
            None,
            {"id": str(first + i)},
            None,
            ["id"],
            None,
            None,
            None,
            None,
            None,
            None,
            0,
            None,
            f'{{"id": "{first + i}"}}',
        )
        for i in range(n)
    ]
    return spark.createDataFrame(rows, EVENT_SCHEMA).repartition(2)


def files(spark, staging: Staging) -> dict[str, int]:
    """The table's data files: path -> size."""
    df = spark.read.format("delta").load(staging.events_path)
    detail = df.select(F.input_file_name().alias("f")).distinct().collect()
    names = {r["f"].rsplit("/", 1)[-1] for r in detail}
    return {n: (Path(staging.events_path) / n).stat().st_size for n in names}


def test_compaction_rewrites_the_new_small_files_only_and_keeps_the_tallies(spark, tmp_path):
    staging = Staging(spark, str(tmp_path / "wh"))
    offset = 0
    for _ in range(4):
        staging.stage(SOURCE, batch(spark, offset))
        offset += 50
    before = staging.tally(SOURCE).to_dict()
    assert len(files(spark, staging)) >= 5
    # Not yet: at most 20 files.
    assert staging.compact([SOURCE], above_files=20) is False
    # Every file is small (under 1 MiB): all into one.
    assert staging.compact([SOURCE], above_files=3, smaller_than=1 << 20) is True
    (compacted,) = files(spark, staging).items()
    # No new files since: nothing to do, whatever the count.
    assert staging.compact([SOURCE], above_files=0, smaller_than=1 << 20) is False

    for _ in range(3):
        staging.stage(SOURCE, batch(spark, offset))
        offset += 50
    added = set(files(spark, staging)) - {compacted[0]}
    assert len(added) >= 4
    # Files under the compacted one's size are rewritten; it stays as it is.
    assert staging.compact([SOURCE], above_files=3, smaller_than=compacted[1]) is True
    now = files(spark, staging)
    assert now[compacted[0]] == compacted[1]
    assert len(now) == 2 and not (set(now) & added)
    # Every event is still there once, and the tallies are those of the stages.
    df = spark.read.format("delta").load(staging.events_path)
    assert df.count() == offset == df.select("offset").distinct().count()
    after = Staging(spark, str(tmp_path / "wh")).tally(SOURCE).to_dict()
    assert after["partitions"] == staging.tally(SOURCE).to_dict()["partitions"]
    assert before != after  # three more batches since
