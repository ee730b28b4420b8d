"""`ticdc-sync verify` in Spark: each selected target, read as of an export's snapshot TSO,
against the export's rows, as `read.verify` decides the comparison.

Per export, one read as of its TSO (`as_of`) of the targets compared with it (a target
absent at that TSO, `read.verify`'s `AbsentTarget`, is reported, never read). Per target,
the export's rows of its upstream tables, read and typed by the initial load's own code
(`apply.load.export_rows`) for the target's columns, and the target's live rows; one Spark
job counts both sides and sums their hashes (the rows', and each column's). When the two
agree, that is all. When they do not, a full outer join on the merge keys finds the
missing, extra and changed keys: their numbers, and the first `show` of them by key, are
the only rows that reach the driver. Nothing is written.

Decides nothing: the export, the columns, the live rows and the normalisation are
`read.verify`'s; the report is `read.verify_report`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core import datatypes
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import BadMessagePolicy, Project
from ticdc_sync.core.sqlgen import quote
from ticdc_sync.read import verify as vf
from ticdc_sync.read.as_of import wall_text
from ticdc_sync.read.verify_report import Difference, Report, Side, TableResult, exports_of
from ticdc_sync.spark.apply.load import bad_row_error, export_rows, failing_on_bad

DEFAULT_SHOW = 10
_HASH = "decimal(38,0)"  # a sum of 64-bit hashes that cannot overflow (non-ANSI: NULL)
_UPSTREAM, _LAKE = "u", "l"


def verify(
    project: Project,
    *,
    export: str | None = None,
    tables: Sequence[str] = (),
    show: int = DEFAULT_SHOW,
    spark: SparkSession | None = None,
    jvm_output: Callable[[str], None] | None = None,
) -> Report:
    """Compare the targets matching `tables` (all by default) with `export` (a Dumpling
    export's folder; by default each source's `initial_load.dumpling`), listing up to `show`
    differing keys per target."""
    from ticdc_sync.plan import build_plan
    from ticdc_sync.spark.as_of import as_of
    from ticdc_sync.spark.runner import run_session
    from ticdc_sync.warehouse.read import read_state

    if show < 0:
        raise UserError(f"verify: --show {show}: give a number of keys, 0 or more")
    plan = build_plan(project, read_state(project))
    found, passed, absent = vf.checks(project, plan, tables, export)
    if not found and not absent:
        why = "; ".join(passed) or "the project has no target"
        raise UserError(f"verify: nothing to compare: {why} (hint: run first, or check --tables)")
    if not found:
        # Only targets absent at the export's TSO: nothing to read, no Spark.
        return Report((), passed, show, exports_of((), absent), absent)
    spark = spark or run_session(project, jvm_output)
    frames: dict[str, DataFrame] = {}
    groups: dict[int, list[vf.Check]] = {}
    for c in found:
        if c.exists:
            groups.setdefault(c.lake_tso, []).append(c)
    for tso, group in sorted(groups.items()):
        try:
            read = as_of(spark, project, tso, [_exact(c.target) for c in group], others=True)
        except UserError as e:
            exports = ", ".join(sorted({f"{c.export.shown} at TSO {c.tso}" for c in group}))
            raise UserError(
                f"verify: the lake cannot be read at TSO {tso} ({wall_text(tso)}) to compare "
                f"it with the Dumpling export {exports}: {e}"
            ) from None
        frames.update(read.frames)
    results = tuple(_compare(spark, c, frames.get(c.target), show) for c in found)
    return Report(results, passed, show, exports_of(results, absent), absent)


def _exact(name: str) -> str:
    """A target's name as an fnmatch pattern that matches it alone."""
    return "".join(f"[{ch}]" if ch in "*?[]" else ch for ch in name)


# --------------------------------------------------------------------------- one target


def _compare(spark: SparkSession, c: vf.Check, frame: DataFrame | None, show: int) -> TableResult:
    if frame is not None:
        target_cols = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
    else:
        # No table in the lake: the export's rows are counted as the load would type them,
        # each column of the shards once.
        found: dict[str, tuple[str, str]] = {}
        for lt in c.load.tables:
            for col in lt.schema.columns:
                found.setdefault(col.name.lower(), (col.name, datatypes.delta_type(col).lower()))
        target_cols = list(found.values())
    cols = vf.columns(c, target_cols)
    names = list(cols.names)
    up = _upstream(spark, c, cols)
    lake = None
    if frame is not None:
        live = vf.live_rows_sql(c.mode, c.tso)
        lake = (frame.where(live) if live else frame).select(*[quote(n) for n in names])
    sides = _sums(spark, c, cols, up, lake)
    u = sides[_UPSTREAM]
    lk = sides.get(_LAKE) if lake is not None else None
    u_side = Side(u["n"], vf.checksum_text(u["h"]), _column_sums(u, names))
    l_side = None
    if lake is not None:
        lk = lk or {"n": 0, "h": None}
        l_side = Side(lk["n"], vf.checksum_text(lk["h"]), _column_sums(lk, names))
    bad = int(u.get("bad") or 0)
    result = TableResult(c, cols, u_side, l_side, bad_rows=bad)
    if l_side is None or not cols.keys:
        return result
    if u_side.rows == l_side.rows and u_side.checksum == l_side.checksum:
        return TableResult(c, cols, u_side, l_side, dict.fromkeys(vf.KINDS, 0), (), bad)
    assert lake is not None
    counts, first = _differences(cols, up.where(~F.col("__bad")), lake, show)
    return TableResult(c, cols, u_side, l_side, counts, first, bad)


def _upstream(spark: SparkSession, c: vf.Check, cols: vf.Columns) -> DataFrame:
    """The export's rows of the target's upstream tables, typed for the compared columns:
    those columns, `__bad` (a row the load would not load) and `__ts` (the snapshot, or the
    error a bad row raises under on_bad_message: fail)."""
    typed = export_rows(spark, c.load, list(cols.compared))
    if c.on_bad_message is not BadMessagePolicy.QUARANTINE:
        typed = failing_on_bad(typed, c.load)
    return typed.select(
        *[F.col(quote(f"v_{n}")).alias(n) for n in cols.names],
        F.col("__err").isNotNull().alias("__bad"),
        F.col("commit_ts").alias("__ts"),
    )


def _sums(
    spark: SparkSession, c: vf.Check, cols: vf.Columns, up: DataFrame, lake: DataFrame | None
) -> dict[str, dict[str, Any]]:
    """Per side: its live rows `n`, the sum of its row hashes `h`, of each column's hashes
    `c<i>`, and (upstream) its bad rows `bad`: one job over both sides."""
    names = [quote(n) for n in cols.names]
    both = up.select(F.lit(_UPSTREAM).alias("__side"), *names, "__bad", "__ts")
    if lake is not None:
        both = both.unionByName(
            lake.select(
                F.lit(_LAKE).alias("__side"),
                *names,
                F.lit(False).alias("__bad"),
                F.lit(None).cast("bigint").alias("__ts"),
            )
        )
    good = ~F.col("__bad")

    def total(sql: str, alias: str) -> Column:
        return F.sum(F.when(good, F.expr(sql).cast(_HASH))).alias(alias)

    agg = both.groupBy("__side").agg(
        F.count_if(good).alias("n"),
        total(vf.row_hash_sql(cols.compared), "h"),
        *[total(vf.column_hash_sql(n, t), f"c{i}") for i, (n, t) in enumerate(cols.compared)],
        F.count_if(F.col("__bad")).alias("bad"),
        # Every export row's `__ts` is computed: under on_bad_message: fail, a bad row
        # raises here, naming its file and line.
        F.max("__ts").alias("__ts"),
    )
    try:
        rows = agg.collect()
    except Exception as e:  # noqa: BLE001 - a bad export row raised inside the job
        err = bad_row_error(
            spark,
            e,
            f"target {c.target}: the export's row cannot be typed as its load types it (hint: "
            "set on_bad_message: quarantine on the table entry to leave such rows out, as "
            "its load does)",
        )
        if err is None:
            raise
        raise err from None
    out = {r["__side"]: r.asDict() for r in rows}
    out.setdefault(_UPSTREAM, {"n": 0, "h": None, "bad": 0})
    return out


def _column_sums(row: dict[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    return tuple(vf.checksum_text(row.get(f"c{i}")) for i in range(len(names)))


def _differences(
    cols: vf.Columns, up: DataFrame, lake: DataFrame, show: int
) -> tuple[dict[str, int], tuple[Difference, ...]]:
    """The number of missing, extra and changed keys, and the first `show` of them by key,
    each with both sides' values as text."""
    compared = list(cols.compared)
    row_hash = F.expr(vf.row_hash_sql(compared))

    def side(df: DataFrame, p: str) -> DataFrame:
        return df.select(
            *[F.col(quote(n)).alias(f"{p}{i}") for i, (n, _) in enumerate(compared)],
            row_hash.alias(f"__{p}h"),
            F.lit(True).alias(f"__{p}"),
        )

    index = {n: i for i, (n, _) in enumerate(compared)}
    on = None
    for k in cols.keys:
        i = index[k]
        cond = F.col(f"{_UPSTREAM}{i}").eqNullSafe(F.col(f"{_LAKE}{i}"))
        on = cond if on is None else on & cond
    j = side(up, _UPSTREAM).join(side(lake, _LAKE), on, "full_outer")
    kind = (
        F.when(F.col(f"__{_LAKE}").isNull(), F.lit(vf.MISSING))
        .when(F.col(f"__{_UPSTREAM}").isNull(), F.lit(vf.EXTRA))
        .when(F.col(f"__{_UPSTREAM}h") != F.col(f"__{_LAKE}h"), F.lit(vf.CHANGED))
    )
    diff = j.select("*", kind.alias("__kind")).where(F.col("__kind").isNotNull()).persist()
    try:
        counts = dict.fromkeys(vf.KINDS, 0)
        for r in diff.groupBy("__kind").count().collect():
            counts[r["__kind"]] = int(r["count"])
        first: tuple[Difference, ...] = ()
        if show and any(counts.values()):
            first = _first(diff, cols, show)
    finally:
        diff.unpersist()
    return counts, first


def _first(diff: DataFrame, cols: vf.Columns, show: int) -> tuple[Difference, ...]:
    compared = list(cols.compared)
    index = {n: i for i, (n, _) in enumerate(compared)}
    order = [
        F.coalesce(F.col(f"{_UPSTREAM}{index[k]}"), F.col(f"{_LAKE}{index[k]}")).asc_nulls_first()
        for k in cols.keys
    ] + [F.col("__kind"), F.col(f"__{_UPSTREAM}h"), F.col(f"__{_LAKE}h")]

    def text(p: str, i: int, t: str) -> Column:
        return F.expr(vf.shown_sql(quote(f"{p}{i}"), t)).alias(f"__{p}s{i}")

    differing = F.array_compact(
        F.array(
            *[
                F.when(
                    ~F.expr(vf.normalised_sql(quote(f"{_UPSTREAM}{i}"), t)).eqNullSafe(
                        F.expr(vf.normalised_sql(quote(f"{_LAKE}{i}"), t))
                    ),
                    F.lit(n),
                )
                for i, (n, t) in enumerate(compared)
            ]
        )
    )
    rows = (
        diff.orderBy(*order)
        .limit(show)
        .select(
            "__kind",
            F.col(f"__{_UPSTREAM}").isNotNull().alias("__has_u"),
            F.col(f"__{_LAKE}").isNotNull().alias("__has_l"),
            differing.alias("__cols"),
            *[text(_UPSTREAM, i, t) for i, (_, t) in enumerate(compared)],
            *[text(_LAKE, i, t) for i, (_, t) in enumerate(compared)],
        )
        .collect()
    )
    out: list[Difference] = []
    for r in rows:
        u = tuple((n, r[f"__{_UPSTREAM}s{i}"]) for i, (n, _) in enumerate(compared))
        lk = tuple((n, r[f"__{_LAKE}s{i}"]) for i, (n, _) in enumerate(compared))
        has_u = bool(r["__has_u"])
        by_key = dict(u if has_u else lk)
        out.append(
            Difference(
                kind=r["__kind"],
                key=tuple((k, by_key[k]) for k in cols.keys),
                columns=tuple(r["__cols"]) if r["__kind"] == vf.CHANGED else (),
                upstream=u if has_u else None,
                lake=lk if r["__has_l"] else None,
            )
        )
    return tuple(out)
