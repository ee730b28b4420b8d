"""A prototype of #57's round writer, measured before it is built: what a round costs per
added target when its plan does not depend on the targets.

Usage: python benchmarks/round_writer.py [--tables 3,50] [--rows 2000] [--batch 10000]
                                         [--rounds 2] [--collapse spark|arrow]

For each table count, `--tables` small `mirror`-shaped Delta tables (Spark-created, no
column mapping, `--rows` rows each) and a staging table of `--batch` Canal-like events over
them (raw text in a map, as the engine stages row images: half updates of existing keys,
a tenth deletes, the rest new keys). One round lands every table's events:

1. **One Spark query, the same for 3 tables or 300**: the staged events of the due tables
   (a broadcast semi-join with a frame of them, not a condition per table), each event's
   values typed by the real codec SQL (`codecs.value_sql`) through a `CASE` over the
   *distinct* column typings of the round (a signature per (type, parameters), looked up
   per table from a broadcast catalog) into a canonical text (integers and decimals as
   text, timestamps as microseconds); the last change per (table, key) chosen by one
   window over the key's canonical text, as the engine's collapse orders changes
   (`--collapse arrow`: in each table's function instead); grouped by table into
   `applyInArrow`;
2. **per table, inside that job's tasks (pyarrow)**: the canonical text cast to the
   table's Arrow types, the table's
   current Parquet files read, rows of changed keys dropped, upserts added, one Parquet
   file written into `rs-<uuid>/` in the table's folder; a row of file facts returned;
3. **per table, on the driver**: one delta-rs commit removing the old files and adding the
   new one.

The figure is the round's wall time per added table, (T(many) - T(few)) / (many - few),
each the median of `--rounds` rounds after a warm-up round, the table counts alternating.
A check after the rounds compares one table with what Spark computes from the same
inputs. What this leaves out (the engine's collapse handles key moves; the mirror's
never-regress rule; bad-value detection; markers and the lease) costs per row, not per
table. Not part of the test suite; it touches only its own temporary tables.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as R  # noqa: E402
from commit_floor import _rs_commit  # noqa: E402

from ticdc_sync.codecs import value_sql  # noqa: E402
from ticdc_sync.core import datatypes  # noqa: E402
from ticdc_sync.core.model import SourceOptions  # noqa: E402
from ticdc_sync.core.upstream import Column  # noqa: E402

# Two shapes of table, so that the round has several typings of one base type.
SHAPES = [
    [
        Column("id", "bigint"),
        Column("name", "varchar", length=32),
        Column("amount", "decimal", precision=12, scale=2),
        Column("at", "timestamp"),
    ],
    [
        Column("id", "bigint"),
        Column("name", "varchar", length=32),
        Column("amount", "decimal", precision=10, scale=3),
        Column("at", "timestamp"),
    ],
]
RAW = "__raw"


def _canonical(col: Column) -> str:
    """SQL: the column's typed value (the codec's own conversion of `__raw`) as the text
    the Arrow side casts back without loss."""
    typed = value_sql("canal-json", col, RAW, SourceOptions())
    t = datatypes.delta_type(col)
    if t == "TIMESTAMP":
        return f"CAST(unix_micros({typed}) AS STRING)"
    return f"CAST({typed} AS STRING)"


def _arrow_type(col: Column):
    import pyarrow as pa

    t = datatypes.delta_type(col)
    if t == "BIGINT":
        return pa.int64()
    if t.startswith("DECIMAL"):
        return pa.decimal128(col.precision, col.scale)
    if t == "TIMESTAMP":
        return pa.timestamp("us", tz="UTC")
    return pa.string()


def _from_canonical(text, col: Column):
    """The canonical text of `col`'s values (`_canonical`) as its Arrow type."""
    import pyarrow as pa

    t = _arrow_type(col)
    if isinstance(t, pa.TimestampType):  # microseconds since the epoch
        return text.cast(pa.int64()).cast(t)
    return text.cast(t)


def _setup(spark, root: Path, tables: int, rows: int, batch: int, seed: int):
    """The tables (paths, shapes) and the staging table's path."""
    paths, shapes = [], []
    for i in range(tables):
        p = root / f"t{i:03d}"
        cols = SHAPES[i % len(SHAPES)]
        ddl = ", ".join(f"`{c.name}` {datatypes.delta_type(c)}" for c in cols)
        spark.sql(
            f"CREATE TABLE delta.`{p}` ({ddl}, `_commit_ts` BIGINT) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
        )
        spark.range(rows).selectExpr(
            "id",
            "concat('n', id) AS name",
            f"CAST(id / 7 AS {datatypes.delta_type(cols[2])}) AS amount",
            "timestamp_micros(1700000000000000 + id * 1000000) AS at",
            "0L AS _commit_ts",
        ).coalesce(1).write.format("delta").mode("append").save(str(p))
        paths.append(p)
        shapes.append(cols)
    rnd = random.Random(seed)
    events = []
    for n in range(batch):
        t = rnd.randrange(tables)
        r = rnd.random()
        key = rnd.randrange(rows) if r < 0.6 else rows + n
        op = "d" if r < 0.1 else "u"
        after = {
            "id": str(key),
            "name": f"e{n}",
            "amount": f"{rnd.randrange(10**6) / 100:.2f}",
            "at": f"2026-11-{1 + n % 28:02d} 10:{n % 60:02d}:00",
        }
        events.append((f"t{t:03d}", 1000 + n, 0, n, 0, op, after))
    staged = root / "staging"
    spark.createDataFrame(
        events,
        "tbl STRING, commit_ts BIGINT, `partition` INT, `offset` BIGINT, idx INT, op STRING, "
        "after MAP<STRING, STRING>",
    ).repartition(2).write.format("delta").save(str(staged))
    return paths, shapes, staged


def _round(spark, paths, shapes, staged: Path, lo: int, hi: int, collapse: str) -> dict[str, float]:
    """One round over every table; its phases' seconds."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    # What the tasks need of each table: location, current files, columns.
    sigs: dict[str, int] = {}
    catalog, facts = [], {}
    for p, cols in zip(paths, shapes, strict=True):
        name = p.name
        per = {}
        for c in cols:
            per[c.name] = sigs.setdefault(_canonical(c), len(sigs))
        catalog.append((name, per))
        dt = DeltaTable(str(p))
        adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
        facts[name] = {
            "location": str(p),
            "files": [(a["path"], a["size_bytes"]) for a in adds],
            "columns": [(c.name, c) for c in cols],
        }
    t_facts = time.perf_counter()

    due = spark.createDataFrame(
        catalog, "tbl STRING, sigs MAP<STRING, INT>"
    )  # one row per due table, the same plan whatever their number
    case = " ".join(
        f"WHEN {i} THEN {sql.replace(RAW, 'e.value')}"
        for sql, i in sorted(sigs.items(), key=lambda x: x[1])
    )
    canon = F.expr(
        f"map_from_entries(transform(map_entries(after), e -> struct(e.key AS k, "
        f"CASE element_at(sigs, e.key) {case} END AS v)))"
    )
    events = (
        spark.read.format("delta")
        .load(str(staged))
        .where((F.col("commit_ts") >= lo) & (F.col("commit_ts") <= hi))
        .join(F.broadcast(due), "tbl")
        .select("tbl", "commit_ts", "partition", "offset", "idx", "op", canon.alias("vals"))
    )
    if collapse == "spark":
        # As the engine collapses (`TargetWriter.collapse`), keyed by the key's canonical
        # text: one window for every table, the last change per (table, key).
        from pyspark.sql import Window

        last = Window.partitionBy("tbl", F.col("vals")["id"]).orderBy(
            *[F.col(c).desc() for c in ("commit_ts", "partition", "offset", "idx")]
        )
        events = events.withColumn("__n", F.row_number().over(last)).where("__n = 1").drop("__n")

    def land(batch: pa.Table) -> pa.Table:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        name = batch.column("tbl")[0].as_py()
        f = facts[name]
        loc = f["location"]
        latest = batch
        if collapse == "arrow":
            # The last event per key in commit order.
            keys = pc.map_lookup(batch.column("vals"), "id", "first").cast(pa.int64())
            batch = batch.append_column("__key", keys).sort_by(
                [
                    ("__key", "ascending"),
                    ("commit_ts", "ascending"),
                    ("partition", "ascending"),
                    ("offset", "ascending"),
                    ("idx", "ascending"),
                ]
            )
            k = batch.column("__key").combine_chunks()
            last = pc.not_equal(k.slice(0, len(k) - 1), k.slice(1)) if len(k) > 1 else None
            keep = (
                pa.concat_arrays([last, pa.array([True])]) if last is not None else pa.array([True])
            )
            latest = batch.filter(keep)
        vals = latest.column("vals")
        upserts = latest.filter(pc.equal(latest.column("op"), "u"))
        uvals = upserts.column("vals")
        cols = {
            c.name: _from_canonical(pc.map_lookup(uvals, c.name, "first"), c)
            for _, c in f["columns"]
        }
        cols["_commit_ts"] = upserts.column("commit_ts")
        new = pa.table(cols)
        current = pq.read_table([os.path.join(loc, p) for p, _ in f["files"]])
        current = current.cast(new.schema)
        changed = pc.map_lookup(vals, "id", "first").cast(pa.int64())
        kept = current.filter(pc.invert(pc.is_in(current.column("id"), changed)))
        out = pa.concat_tables([kept, new])
        folder = f"rs-{uuid.uuid4().hex}"
        os.makedirs(os.path.join(loc, folder))
        rel = f"{folder}/part-00000.parquet"
        pq.write_table(out, os.path.join(loc, rel))
        return pa.table(
            {
                "tbl": [name],
                "path": [rel],
                "size": [os.path.getsize(os.path.join(loc, rel))],
                "rows": [out.num_rows],
            }
        )

    written = (
        events.groupBy("tbl")
        .applyInArrow(land, "tbl STRING, path STRING, size BIGINT, rows BIGINT")
        .collect()
    )
    t_job = time.perf_counter()
    from deltalake.transaction import AddAction, RemoveAction

    now = int(time.time() * 1000)
    for w in written:
        f = facts[w["tbl"]]
        actions = [RemoveAction(p, True, now, size, {}) for p, size in f["files"]]
        stats = json.dumps({"numRecords": w["rows"]})
        actions.append(AddAction(w["path"], w["size"], {}, now, True, stats))
        _rs_commit(Path(f["location"]), actions, lo)
    t_commit = time.perf_counter()
    assert len(written) == len(paths), (len(written), len(paths))
    return {
        "facts": t_facts - t0,
        "job": t_job - t_facts,
        "commits": t_commit - t_job,
        "total": t_commit - t0,
    }


def _check(spark, path: Path, cols: list[Column], staged: Path, before, lo: int, hi: int) -> None:
    """The table equals its rows before the round with the round's last event per key
    applied, as Spark computes it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ev = (
        spark.read.format("delta")
        .load(str(staged))
        .where((F.col("tbl") == path.name) & F.col("commit_ts").between(lo, hi))
    )
    w = Window.partitionBy("key").orderBy(F.desc("commit_ts"), F.desc("offset"))
    last = (
        ev.withColumn("key", F.col("after")["id"].cast("bigint"))
        .withColumn("n", F.row_number().over(w))
        .where("n = 1")
    )
    kept = before.join(last.select(F.col("key").alias("id")), "id", "left_anti")
    # The engine's typing of each value: the codec's SQL over the raw text.
    typed = [
        F.expr(
            value_sql("canal-json", c, RAW, SourceOptions()).replace(RAW, f"after['{c.name}']")
        ).alias(c.name)
        for c in cols
    ]
    ups = last.where("op = 'u'").select(*typed, F.col("commit_ts").alias("_commit_ts"))
    names = [c.name for c in cols] + ["_commit_ts"]
    want = sorted(tuple(r) for r in kept.select(*names).unionByName(ups).collect())
    got = sorted(
        tuple(r) for r in spark.read.format("delta").load(str(path)).select(*names).collect()
    )
    assert got == want, f"{path.name}: {len(got)} rows, expected {len(want)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="3,50")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--collapse",
        choices=("spark", "arrow"),
        default="spark",
        help="where the last change per key is chosen: the round's query (a window, as the "
        "engine does) or each table's pyarrow function",
    )
    args = ap.parse_args()
    counts = [int(x) for x in args.tables.split(",")]

    spark = R.session()
    root = Path(tempfile.mkdtemp(prefix="round-writer-"))
    try:
        sets = {
            n: _setup(spark, root / f"n{n}", n, args.rows, args.batch * (args.rounds + 2), n)
            for n in counts
        }
        times: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
        for rnd in range(args.rounds + 1):
            lo, hi = 1000 + rnd * args.batch, 1000 + (rnd + 1) * args.batch - 1
            order = counts if rnd % 2 == 0 else counts[::-1]
            for n in order:
                paths, shapes, staged = sets[n]
                before = None
                if rnd == args.rounds:
                    before = spark.read.format("delta").load(str(paths[0])).localCheckpoint()
                phases = _round(spark, paths, shapes, staged, lo, hi, args.collapse)
                if rnd:  # the first round warms the JVM and the Python workers
                    times[n].append(phases)
                if before is not None:
                    _check(spark, paths[0], shapes[0], staged, before, lo, hi)
        print(
            f"{args.batch:,} events per round, tables of {args.rows:,} rows, "
            f"{args.rounds} rounds (median seconds), collapsed in {args.collapse}"
        )
        for n in counts:
            med = {k: statistics.median(t[k] for t in times[n]) for k in times[n][0]}
            print(
                f"  {n:4d} tables: round {med['total']:.2f} s (facts {med['facts']:.2f}, "
                f"job {med['job']:.2f}, commits {med['commits']:.2f}); rounds "
                + ", ".join(f"{t['total']:.2f}" for t in times[n])
            )
        few, many = counts[0], counts[-1]
        per = (
            statistics.median(t["total"] for t in times[many])
            - statistics.median(t["total"] for t in times[few])
        ) / (many - few)
        print(f"  per added table: {per:.3f} s")
        print("  check: one table equals, value for value, Spark's own result from the same inputs")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
