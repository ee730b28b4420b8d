"""The round's one Spark query: the staged row changes of every target in the round, typed
by the codecs' own SQL, collapsed to each key's last change, as text that Arrow reads back
without loss (`round_arrow` merges it into each target).

Why one query: a target's own query (its planning, analysis and job) was its whole fixed
cost (benchmarks/README.md); here the plan of the query is the same for 3 targets or 300.
What differs per target is data, not plan: a broadcast frame (`Catalog.frame`) holds, per
(target, upstream table, schema span), each column's *signature* (the codec's conversion of
the raw value and its fit check, for the column's type) and where its raw value is read
from; the query types every value through ONE `CASE` over the round's distinct signatures.
A value leaves as its canonical text (`canonical`): numbers, decimals and strings as Spark
renders them, dates as days and timestamps as microseconds since the epoch (zone free),
which Arrow casts back exactly.

The rows, as `rows.TargetWriter` types them (`_typed_one`) and collapses them
(`TargetWriter.collapse`): a raw value is the row image's (the staged map, or its JSON text
parsed to a map), a key's old value its `before` else its `after`; an UPDATE that moves its
key also deletes the old key (codec facts 0.4); the last change per (target, key) is chosen
by commit_ts, then DELETE before INSERT, then position. A row with a value that does not fit
or a column its schema lacks marks its target `bad`: the round does not write that target,
whose segment the rewrite then lands under its `on_bad_message` (the error or quarantine is
the rewrite's, word for word).

Builds SQL text and one DataFrame; runs no job, writes nothing, decides no path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ticdc_sync import codecs
from ticdc_sync.core import datatypes
from ticdc_sync.core.events import KIND_ROW
from ticdc_sync.core.model import Source
from ticdc_sync.plan.model import Rows

# Where a signature's SQL reads the raw value: replaced by the lambda's variable.
RAW = "__ticdc_sync_raw"
# What the query gives each target's Arrow function (`round_arrow.land`).
CHANGES = "tid INT, op STRING, k ARRAY<STRING>, v ARRAY<STRING>, commit_ts BIGINT, bad BOOLEAN"


def canonical(spark_type: str, typed: str) -> str:
    """SQL: the text of a value of `spark_type` (Spark's simpleString) that Arrow casts back
    to the same value (`round_arrow.arrow_type`)."""
    if spark_type == "date":
        return f"CAST(unix_date({typed}) AS STRING)"
    if spark_type == "timestamp":
        return f"CAST(unix_micros({typed}) AS STRING)"
    if spark_type == "timestamp_ntz":
        # Zone free: the wall clock's microseconds from the epoch's wall clock.
        return (
            f"CAST(timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {typed}) "
            "AS STRING)"
        )
    return f"CAST({typed} AS STRING)"


@dataclass(frozen=True)
class RoundSegment:
    """One target's segment in the round: `tid` its number in the round, `columns` its
    upstream columns as the table has them (name, Spark type), in the table's order."""

    tid: int
    source: Source
    step: Rows
    columns: tuple[tuple[str, str], ...]
    ignored: tuple[str, ...] = ()

    def key_positions(self) -> list[int]:
        """Where each key is among `columns`."""
        lower = [n.lower() for n, _ in self.columns]
        return [lower.index(k.lower()) for k in self.step.keys]


class Catalog:
    """The round's signatures (distinct typings of a raw value) and, per segment span, which
    signature types each column and key."""

    def __init__(self) -> None:
        self._sigs: dict[tuple[str, str], int] = {}
        self.rows: list[tuple] = []

    def _sig(self, value: str, fits: str) -> int:
        return self._sigs.setdefault((value, fits), len(self._sigs))

    def add(self, seg: RoundSegment) -> None:
        codec = codecs.module_for(seg.source.protocol)
        opts = seg.source.options
        types = dict(seg.columns)
        for table in seg.step.tables:
            for span in table.spans:
                schema, fill = span.schema, dict(span.fill)
                cols = []
                for name, ttype in seg.columns:
                    col = schema.column(name)
                    if col is None:
                        value = f"CAST({fill.get(name.lower(), 'NULL')} AS {ttype})"
                        cols.append((None, self._sig(canonical(ttype, value), "true")))
                        continue
                    typed = f"CAST({codec.value_sql(col, RAW, opts)} AS {ttype})"
                    fits = codec.fits_sql(col, RAW, opts)
                    cols.append((col.name, self._sig(canonical(ttype, typed), fits)))
                keys = []
                for k in seg.step.keys:
                    col = schema.column(k)
                    assert col is not None, "the plan checks that each key is a column"
                    ktype = types.get(col.name) or datatypes.delta_type(col).lower()
                    typed = f"CAST({codec.value_sql(col, RAW, opts)} AS {ktype})"
                    fits = codec.fits_sql(col, RAW, opts)
                    keys.append((col.name, self._sig(canonical(ktype, typed), fits)))
                known = sorted({c.name.lower() for c in schema.columns} | set(seg.ignored))
                self.rows.append(
                    (
                        seg.source.name,
                        table.db,
                        table.table,
                        span.lo,
                        span.hi,
                        seg.tid,
                        cols,
                        keys,
                        known,
                    )
                )

    def frame(self, spark: SparkSession) -> DataFrame:
        return spark.createDataFrame(
            self.rows,
            "d_source STRING, d_db STRING, d_tbl STRING, d_lo BIGINT, d_hi BIGINT, tid INT, "
            "cols ARRAY<STRUCT<name: STRING, sig: INT>>, "
            "keys ARRAY<STRUCT<name: STRING, sig: INT>>, known ARRAY<STRING>",
        )

    def case(self, which: int) -> str:
        """SQL over a lambda variable `x` (sig `x.s`, raw `x.r`): each signature's typed text
        (`which` 0) or fit check (1)."""
        whens = " ".join(
            f"WHEN {i} THEN {sig[which].replace(RAW, 'x.r')}"
            for sig, i in sorted(self._sigs.items(), key=lambda s: s[1])
        )
        return f"CASE x.s {whens} END"


def round_changes(
    spark: SparkSession, events: DataFrame, segments: Sequence[RoundSegment]
) -> DataFrame:
    """Each segment's last change per key (`CHANGES`), from the staged `events`."""
    catalog = Catalog()
    for seg in segments:
        catalog.add(seg)
    sources = sorted({s.source.name for s in segments})
    lo = min(s.step.lo for s in segments)
    hi = max(s.step.hi for s in segments)
    ev = events.where(
        (F.col("kind") == KIND_ROW)
        & F.col("source").isin(sources)
        & (F.col("commit_ts") > lo)
        & (F.col("commit_ts") <= hi)
    )
    due = F.broadcast(catalog.frame(spark))
    joined = ev.join(
        due,
        (F.col("source") == F.col("d_source"))
        & (F.col("db") == F.col("d_db"))
        & (F.col("tbl") == F.col("d_tbl"))
        & (F.col("commit_ts") > F.col("d_lo"))
        & (F.col("commit_ts") <= F.col("d_hi")),
    )
    pos = ["commit_ts", "`partition`", "`offset`", "idx"]
    images = joined.selectExpr(
        "tid",
        "op",
        *pos,
        "cols",
        "keys",
        "known",
        "coalesce(after, from_json(after_json, 'map<string,string>')) AS am",
        "coalesce(before, from_json(before_json, 'map<string,string>')) AS bm",
        "before IS NOT NULL OR before_json IS NOT NULL AS has_before",
        "coalesce(json_object_keys(after_json), map_keys(after)) AS names",
    )
    # Each raw value looked up once (a map lookup scans the row's keys), then typed.
    raws = images.selectExpr(
        "tid",
        "op",
        *pos,
        "has_before",
        "transform(cols, c -> named_struct('s', c.sig, 'r', am[c.name])) AS rv",
        "transform(keys, c -> named_struct('s', c.sig, 'r', am[c.name])) AS ra",
        "transform(keys, c -> named_struct('s', c.sig, 'r', coalesce(bm[c.name], am[c.name]))) "
        "AS rb",
        "op <> 'D' AND exists(names, n -> NOT array_contains(known, lower(n))) AS unknown",
    )
    value, fits = catalog.case(0), catalog.case(1)
    typed = raws.selectExpr(
        "tid",
        "op",
        *pos,
        "has_before",
        f"transform(rv, x -> {value}) AS v",
        f"transform(ra, x -> {value}) AS k",
        f"transform(rb, x -> {value}) AS kb",
        f"unknown OR NOT (forall(rv, x -> coalesce({fits}, false)) "
        f"AND forall(rb, x -> coalesce({fits}, false))) AS bad",
    )
    upsert = "named_struct('k', k, 'v', v, 'op', 'U', 'rank', 1)"
    delete = "named_struct('k', kb, 'v', CAST(NULL AS ARRAY<STRING>), 'op', 'D', 'rank', 0)"
    # An UPDATE that moves its key deletes the old key (codec facts 0.4).
    moved = "op = 'D' OR (op <> 'D' AND has_before AND NOT (k <=> kb))"
    both = typed.selectExpr(
        "tid",
        *pos,
        "bad",
        f"explode(array_compact(array(IF(op <> 'D', {upsert}, NULL), IF({moved}, {delete}, "
        "NULL)))) AS c",
    )
    per_key = Window.partitionBy("tid", F.col("c.k"))
    last = per_key.orderBy(
        F.col("commit_ts").desc(),
        F.col("c.rank").desc(),
        F.col("partition").desc(),
        F.col("offset").desc(),
        F.col("idx").desc(),
    )
    # A key with a bad row anywhere marks its last change bad: the target is not written.
    return (
        both.withColumn("__n", F.row_number().over(last))
        .withColumn("__bad", F.max("bad").over(per_key))
        .where(F.col("__n") == 1)
        .select(
            "tid",
            F.col("c.op").alias("op"),
            F.col("c.k").alias("k"),
            F.col("c.v").alias("v"),
            "commit_ts",
            F.col("__bad").alias("bad"),
        )
    )
