"""Local copies of a MERGE source or a shared window: on local disk, freed as soon as they
are done with.

Must not decide anything about rows: it only says where a copy lives and how it is freed.
"""

from __future__ import annotations

from contextlib import suppress

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from ticdc_sync.spark.runtime.remote import local_checkpoint, release_copy

# The copy of each MERGE source lives on local disk, never in memory: a backlog is
# unbounded, and building the in-memory columnar cache of a 5M-event window ran a 2 GB
# driver out of heap (benchmarks/README.md). A disk block is written streaming.
SOURCE_COPY = StorageLevel.DISK_ONLY


def local_copy(df: DataFrame) -> DataFrame:
    """`df` computed now into a copy on local disk (`localCheckpoint`, SOURCE_COPY), read
    in `df`'s own session."""
    return local_checkpoint(df, SOURCE_COPY)


def drop_checkpoint(df: DataFrame) -> None:
    """Free the disk blocks of a `localCheckpoint` now rather than when the JVM collects
    the RDD (PySpark has no call for it; this is what Delta does with its own copy;
    `remote.release_copy`, which a Spark Connect session does its own way)."""
    # Best effort: Spark's cleaner frees them later anyway.
    with suppress(Exception):
        release_copy(df)
