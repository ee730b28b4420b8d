"""What one staging commit added, as the run loop needs it: each upstream table's row
changes (how many, lowest and highest commit_ts), the DDL events, and the protocol column
metadata of tables first seen in it.

The loop folds these into its in-memory state (`loop`, `engine.StageOutcome`), so a
re-plan after each poll reads nothing from the staging table. Each query reads only the
batch's own events (`StagedBatch.where`, by offset, so Delta's file statistics skip older
files), and runs only when the batch has what it looks for: DDL, or a new table. Only DDL
and small aggregates reach the driver; rows never do. Decides nothing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ticdc_sync.engine import TableSpan
from ticdc_sync.events import KIND_DDL, KIND_ROW
from ticdc_sync.spark.staging import StagedBatch, Staging
from ticdc_sync.upstream import Key, key
from ticdc_sync.window import DdlEvent, staged_order

Metadata = dict[Key, tuple[dict[str, str], tuple[str, ...]]]


def tables(batch: StagedBatch) -> dict[tuple[str, str], TableSpan]:
    """Row changes per upstream table (as staged: db, tbl) in the batch."""
    out: dict[tuple[str, str], TableSpan] = {}
    for r in batch.increments:
        if not int(r["rows"]) or r["row_lo"] is None:
            continue
        t = (r["db"] or "", r["tbl"] or "")
        lo, hi, rows = int(r["row_lo"]), int(r["row_hi"]), int(r["rows"])
        old = out.get(t)
        if old is not None:
            lo, hi, rows = min(lo, old.lo), max(hi, old.hi), rows + old.rows
        out[t] = TableSpan(rows, lo, hi)
    return out


def ddl_events(staging: Staging, batch: StagedBatch) -> tuple[DdlEvent, ...]:
    """The batch's DDL events (broadcast copies included: the timeline removes them)."""
    if not any(int(r["ddls"]) for r in batch.increments):
        return ()
    rows = (
        staging.events()
        .where(batch.where())
        .where(F.col("kind") == KIND_DDL)
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
    return tuple(DdlEvent.from_staged(r) for r in sorted(rows, key=staged_order))


def new_table_metadata(staging: Staging, batch: StagedBatch) -> Metadata:
    """Protocol column metadata and primary-key names of the first row change (in commit
    order) of each table whose first rows this batch staged: what a schema is inferred
    from where nothing else describes the table (`plan.build`)."""
    # Each new table's lowest row commit_ts in the batch, from the staging aggregate.
    lo: dict[tuple[str, str], int] = {}
    for r in batch.increments:
        t = (r["db"] or "", r["tbl"] or "")
        if int(r["rows"]) and r["row_lo"] is not None and t not in batch.before.tables:
            lo[t] = min(lo.get(t, int(r["row_lo"])), int(r["row_lo"]))
    if not lo:
        return {}
    spark = staging.spark
    # First only the rows at that commit_ts: Parquet's statistics on commit_ts then skip
    # most of the batch's `col_meta`, the widest staged column. A table whose rows there
    # carry no metadata is looked up again in the whole batch. The tables are joined in
    # from a small frame, not listed in a predicate: at a few hundred new tables (a
    # changefeed's first poll) one OR per table made a condition too large to compile,
    # and Spark fell back after a failed try (benchmarks/README.md).
    firsts = spark.createDataFrame(
        [(db, tbl, ts) for (db, tbl), ts in sorted(lo.items())], _TABLES_SCHEMA + ", `lo` BIGINT"
    )
    out = _first_metadata(
        staging,
        batch,
        F.col("commit_ts").isin(sorted(set(lo.values()))),
        firsts,
        F.col("commit_ts") == F.col("lo"),
    )
    rest = [t for t in sorted(lo) if key(*t) not in out]
    if rest:
        out.update(
            _first_metadata(
                staging, batch, F.lit(True), spark.createDataFrame(rest, _TABLES_SCHEMA)
            )
        )
    return out


# The tables a lookup is for, keyed as `tables` keys them (db, tbl; NULL as "").
_TABLES_SCHEMA = "`__db` STRING, `__tbl` STRING"


def _first_metadata(
    staging: Staging,
    batch: StagedBatch,
    where: Column,
    tables: DataFrame,
    also: Column | None = None,
) -> Metadata:
    """Per table of `tables` (`_TABLES_SCHEMA`, and what `also` compares with), the
    metadata of the first row change (commit order) of the batch that matches `where` and
    `also` and carries metadata. One job; `tables` is broadcast."""
    match = (F.coalesce("db", F.lit("")) == F.col("__db")) & (
        F.coalesce("tbl", F.lit("")) == F.col("__tbl")
    )
    if also is not None:
        match = match & also
    first = Window.partitionBy("db", "tbl").orderBy("commit_ts", "partition", "offset", "idx")
    rows = (
        staging.events()
        .where(batch.where())
        .where(where)
        .where((F.col("kind") == KIND_ROW) & F.col("col_meta").isNotNull())
        .join(F.broadcast(tables), match, "left_semi")
        .withColumn("__n", F.row_number().over(first))
        .where(F.col("__n") == 1)
        # Keys and values as arrays: a map reaches Python through a Java HashMap, which
        # loses the message's column order (the order an inferred schema must keep).
        .select(
            "db",
            "tbl",
            F.map_keys("col_meta").alias("names"),
            F.map_values("col_meta").alias("metas"),
            "pk_names",
        )
        .collect()
    )
    out: Metadata = {}
    for r in rows:
        meta = dict(zip(r["names"], r["metas"], strict=True))
        out[key(r["db"] or "", r["tbl"] or "")] = (meta, tuple(r["pk_names"] or ()))
    return out
