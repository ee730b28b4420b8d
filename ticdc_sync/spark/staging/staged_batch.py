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

import functools
import operator

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ticdc_sync.core.events import KIND_DDL, KIND_ROW
from ticdc_sync.core.upstream import Key, key
from ticdc_sync.core.window import DdlEvent, staged_order
from ticdc_sync.run.engine import TableSpan
from ticdc_sync.spark.staging.table import StagedBatch, Staging

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
    # First only the rows at that commit_ts: Parquet's statistics on commit_ts then skip
    # most of the batch's `col_meta`, the widest staged column. A table whose rows there
    # carry no metadata is looked up again in the whole batch.
    out = _first_metadata(staging, batch, lo)
    rest = {t: None for t in sorted(lo) if key(*t) not in out}
    if rest:
        out.update(_first_metadata(staging, batch, rest))
    return out


# Up to this many tables a lookup names them in its condition, one OR each, which Parquet's
# statistics use best; past it they are joined in from a small broadcast frame: a run's
# first poll over a few hundred tables made a condition too large to compile, and Spark
# fell back after a failed try (benchmarks/README.md).
FEW_TABLES = 16


def _first_metadata(
    staging: Staging, batch: StagedBatch, tables: dict[tuple[str, str], int | None]
) -> Metadata:
    """Per table of `tables` (db, tbl as `tables` of a batch keys them: NULL as ""), the
    metadata of the first row change (commit order) of the batch that carries metadata,
    at the table's commit_ts in `tables` where one is given. One job."""
    rows = staging.events().where(batch.where())
    rows = rows.where((F.col("kind") == KIND_ROW) & F.col("col_meta").isNotNull())
    db, tbl, ts = F.coalesce("db", F.lit("")), F.coalesce("tbl", F.lit("")), F.col("commit_ts")
    if len(tables) <= FEW_TABLES:
        one = [
            (db == d) & (tbl == t) & (ts == at if at is not None else F.lit(True))
            for (d, t), at in tables.items()
        ]
        rows = rows.where(functools.reduce(operator.or_, one))
    else:
        found = [(d, t, at) for (d, t), at in tables.items()]
        frame = staging.spark.createDataFrame(found, "`__db` STRING, `__tbl` STRING, `__ts` BIGINT")
        match = (db == F.col("__db")) & (tbl == F.col("__tbl"))
        match = match & (F.col("__ts").isNull() | (ts == F.col("__ts")))
        if all(at is not None for at in tables.values()):
            rows = rows.where(ts.isin(sorted(set(tables.values()))))  # for the statistics
        rows = rows.join(F.broadcast(frame), match, "left_semi")
    first = Window.partitionBy("db", "tbl").orderBy("commit_ts", "partition", "offset", "idx")
    rows = (
        rows.withColumn("__n", F.row_number().over(first))
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
