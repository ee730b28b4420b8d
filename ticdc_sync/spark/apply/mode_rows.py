"""The MERGE source of one row segment of a `soft_delete` or `history` target, from its
per-key changes (`rows.TargetWriter` explodes them; the mirror collapses them itself).

- soft_delete: one row per key, its last change, carrying the values the row had last in
  the segment (a DELETE carries those of the key's last upsert before it, when there is
  one; else only its key, and the target keeps its own values) and `__has_row`.
- history: every upsert is its own version (no collapse to the last change), chained:
  `_valid_to` is the key's next change's commit_ts, NULL for the last unless deleted; a
  version valid for no time (two changes of one key at one commit_ts, a redelivered
  change) is not kept. Plus one close row per key at its first change in the segment.

Changes of a key are ordered as the mirror orders them: commit_ts, then DELETE before
INSERT at one commit_ts, then position. One window over the changes, no extra pass. The
SQL that applies the source is `sqlgen_history`; the decisions are the plan's. Rows stay
in Spark.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ticdc_sync.core.model import Mode
from ticdc_sync.core.sqlgen import COMMIT_TS, OP_COL, quote
from ticdc_sync.core.sqlgen_history import (
    CLOSE,
    DELETED_AT,
    DELETED_TS,
    HAS_ROW,
    IS_DELETED,
    OPEN,
    VALID_FROM,
    VALID_FROM_AT,
    VALID_TO,
    VALID_TO_AT,
)

# The position columns of a change (`rows.TargetWriter._changes`); the change is `__c`.
POSITION = ("commit_ts", "partition", "offset", "idx")


def _ordered(keys: list[str]) -> Window:
    change = F.col("__c")
    return Window.partitionBy(*[change[k] for k in keys]).orderBy(
        F.col("commit_ts"),
        change["__rank"],
        F.col("partition"),
        F.col("offset"),
        F.col("idx"),
    )


def source(mode: Mode, changes: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    """The MERGE source of `mode` from `changes` (POSITION + `__c`: the change's columns,
    `__op` 'U' or 'D', `__rank`)."""
    if mode is Mode.SOFT_DELETE:
        return _soft_delete(changes, keys, columns)
    if mode is Mode.HISTORY:
        return _history(changes, keys, columns)
    raise ValueError(f"mode {mode} has no source of its own")


def _soft_delete(changes: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    w = _ordered(keys)
    change = F.col("__c")
    upsert = F.when(change[OP_COL] != "D", change)
    # The row's values last in the segment: the last upsert up to this change.
    last_row = F.last(upsert, ignorenulls=True).over(
        w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    last = (
        changes.select(
            "commit_ts",
            change.alias("__c"),
            last_row.alias("__row"),
            F.lead(F.lit(1)).over(w).isNull().alias("__last"),
        )
        .where(F.col("__last"))
        .select(
            "commit_ts",
            F.col("__c")[OP_COL].alias(OP_COL),
            F.coalesce(F.col("__row"), F.col("__c")).alias("__v"),
            F.col("__row").isNotNull().alias(HAS_ROW),
        )
    )
    return last.select(
        *[F.col("__v")[c].alias(c) for c in columns],
        F.col("commit_ts").alias(COMMIT_TS),
        OP_COL,
        HAS_ROW,
    )


def _history(changes: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    w = _ordered(keys)
    change = F.col("__c")
    ts = F.col("commit_ts")
    next_ts = F.lead(ts).over(w)
    first = F.lag(F.lit(1)).over(w).isNull()
    types = {f.name: f.dataType for f in changes.schema["__c"].dataType.fields}  # type: ignore[attr-defined]

    def row(values: list[Column], frm: Column, to: Column, op: str) -> Column:
        return F.struct(
            *[v.alias(c) for v, c in zip(values, columns, strict=True)],
            frm.cast("bigint").alias(VALID_FROM),
            to.cast("bigint").alias(VALID_TO),
            F.lit(op).alias(OP_COL),
        )

    key_set = {k for k in keys}
    close = row(
        [change[c] if c in key_set else F.lit(None).cast(types[c]) for c in columns],
        ts,
        F.lit(None),
        CLOSE,
    )
    version = row([change[c] for c in columns], ts, F.col("__next"), OPEN)
    # A version valid for no time (the key changed again at the same commit_ts) is not kept.
    lasts = F.col("__next").isNull() | (F.col("__next") > ts)
    out = changes.select(
        ts, change.alias("__c"), next_ts.alias("__next"), first.alias("__first")
    ).select(
        F.explode(
            F.array_compact(
                F.array(
                    F.when(F.col("__first"), close),
                    F.when((change[OP_COL] != "D") & lasts, version),
                )
            )
        ).alias("__r")
    )
    r = F.col("__r")
    return out.select(
        *[r[c].alias(c) for c in columns],
        r[VALID_FROM].alias(VALID_FROM),
        r[VALID_TO].alias(VALID_TO),
        r[OP_COL].alias(OP_COL),
    )


def with_mode_columns(rows: DataFrame, mode: Mode) -> DataFrame:
    """Rows of an initial load (each with `_commit_ts`, the export's snapshot) as `mode`
    keeps them: live, or a version opened at the snapshot."""
    ts = F.col(quote(COMMIT_TS))
    wall = F.timestamp_millis(F.shiftright(ts, 18))
    if mode is Mode.SOFT_DELETE:
        return rows.select(
            "*",
            F.lit(False).alias(IS_DELETED),
            F.lit(None).cast("bigint").alias(DELETED_TS),
            F.lit(None).cast("timestamp").alias(DELETED_AT),
        )
    if mode is Mode.HISTORY:
        return rows.select(
            "*",
            ts.alias(VALID_FROM),
            F.lit(None).cast("bigint").alias(VALID_TO),
            wall.alias(VALID_FROM_AT),
            F.lit(None).cast("timestamp").alias(VALID_TO_AT),
        )
    return rows
