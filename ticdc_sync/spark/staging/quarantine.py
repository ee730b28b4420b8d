"""The quarantine table `<warehouse>/_ticdc_sync/quarantine`: bad records kept with their raw
bytes and reason, and the staged bad records not yet quarantined ("open").

An open bad record stops its partition's resolved TSO just before it (`Staging.partitions`);
quarantining it (by policy) lets the partition go on. Which records are quarantined is
decided by the caller; this module only moves and counts them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core.events import KIND_BAD
from ticdc_sync.spark.runtime.conf import before_commit
from ticdc_sync.spark.staging.state_table import LazyTable
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse.locations import state_location

QUARANTINE_SCHEMA = (
    "`source` STRING, topic STRING, `partition` INT, `offset` BIGINT, idx INT, db STRING, "
    "tbl STRING, commit_ts BIGINT, reason STRING, raw_key BINARY, raw_value BINARY"
)
# Where a quarantined record or value came from: one row per position.
POSITION = ("source", "topic", "partition", "offset", "idx")


class Quarantine:
    """The quarantine table of one warehouse, beside its staging table."""

    def __init__(self, spark: SparkSession, staging: Staging) -> None:
        self.spark = spark
        self.staging = staging
        self._table = LazyTable(
            spark, state_location(staging.warehouse, "quarantine"), QUARANTINE_SCHEMA
        )

    @property
    def path(self) -> str:
        """The table's location, the table created on first use (most runs never quarantine;
        readers without Spark take a missing table as an empty one)."""
        return self._table.path()

    def table(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def first_open(self, source: str) -> dict[tuple[str, int], int]:
        """The offset of the first open bad record per (topic, partition)."""
        rows = (
            self._open(source)
            .groupBy("topic", "partition")
            .agg(F.min("offset").alias("first_bad"))
            .collect()
        )
        return {(r["topic"], r["partition"]): r["first_bad"] for r in rows}

    def _open(self, source: str) -> DataFrame:
        """The source's staged bad records that are not in the quarantine."""
        ev = self.staging.events().where((F.col("source") == source) & (F.col("kind") == KIND_BAD))
        q = self.table().select("topic", "partition", "offset", "idx", F.lit(True).alias("__q"))
        return ev.join(q, ["topic", "partition", "offset", "idx"], "left").where(
            F.col("__q").isNull()
        )

    def open_tables(self, source: str) -> list[tuple[str, str]]:
        """The upstream tables (db, table; "" when unknown) the open bad records name."""
        if not self.staging.tally(source).bad:
            return []
        rows = (
            self._open(source)
            .select(
                F.coalesce("db", F.lit("")).alias("db"), F.coalesce("tbl", F.lit("")).alias("tbl")
            )
            .distinct()
            .collect()
        )
        return sorted((r["db"], r["tbl"]) for r in rows)

    def open_bad_records(self, source: str, limit: int = 20) -> list:
        """Up to `limit` open bad records, in position order."""
        if not self.staging.tally(source).bad:
            return []
        return (
            self._open(source)
            .orderBy("topic", "partition", "offset", "idx")
            .select("topic", "partition", "offset", "db", "tbl", "error")
            .limit(limit)
            .collect()
        )

    def append_new(self, rows: DataFrame, target: str) -> int:
        """Append the quarantine rows of `rows` whose position (source, topic, partition,
        offset, idx) the table does not hold yet; how many. An apply that quarantined a
        segment's bad values and died before its own commit quarantines them again when
        it is resumed: each stays once. A position can also come twice in `rows` (a staged
        batch left behind by a run that died before its dedupe, then staged again: staging
        is at-least-once), and stays once too."""
        held = self.table().select(*POSITION)
        fresh = (
            rows.join(held, list(POSITION), "left_anti")
            .dropDuplicates(list(POSITION))
            .select(*rows.columns)
            .cache()
        )
        try:
            n = fresh.count()
            if n:
                before_commit("quarantine.append", target=target)
                fresh.write.format("delta").mode("append").save(self.path)
        finally:
            fresh.unpersist()
        return n

    def quarantine_open_bad(self, source: str, tables: list[tuple[str, str]]) -> int:
        """Move the source's open bad records of `tables` ((db, table), "" for a record that
        names none) into the quarantine table; idempotent. The caller decides which."""
        if not tables or not self.staging.tally(source).bad:
            return 0
        which = F.lit(False)
        for db, tbl in tables:
            which = which | (
                (F.coalesce("db", F.lit("")) == db) & (F.coalesce("tbl", F.lit("")) == tbl)
            )
        fresh = (
            self._open(source)
            .where(which)
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
            before_commit("quarantine.append")
            fresh.write.format("delta").mode("append").save(self.path)
        return n
