"""A target's layout (`cluster_by` / `partition_by` on its table entry, #69): what it buys.

Usage: python benchmarks/layout.py [--rows 10000000] [--repeat 2] [--days 60]
                                  [--only merge,range]

merge  A 10,000-event batch (updates, inserts and deletes by key: the generator's stream of
       one table, `accounts_000`) applied by `ticdc_sync.spark.runner.run` into a target
       that holds about `--rows` rows, clustered by its key (`cluster_by: [id]`, OPTIMIZEd
       after the load, so its files are clustered) against the same target without a
       layout. Each project: pass 1 of the capture creates and fills the target through
       ticdc-sync; its rows and `--rows` more (copies of them under keys above the
       stream's) are then written back in random key order, in files of about 125k rows,
       as a target's rows stand after many MERGEs (a copy-on-write MERGE rewrites the files
       it touches in join order) or a load in another order; then the clustered one is
       OPTIMIZEd (to files of the unclustered one's mean size). Pass 2 (the batch) is the
       run timed, each repetition on a fresh copy of both projects, alternating; both use
       `rewrite_below: 0` (the MERGE path whatever the size). Figures: the best run and the
       target's apply seconds (run_results), the files the MERGE rewrote, the ratio.
range  The files a one-day query (`WHERE day = DATE'...'`) reads, from the scan's
       "number of files read" metric (after Delta's partition pruning and data skipping),
       on `--rows` rows spread over `--days` days, as tables created with the clauses
       ticdc-sync's create step gives a `partition_by: [day]` / `cluster_by: [day]` entry
       (`PARTITIONED BY (day)`, `CLUSTER BY (day)`, OPTIMIZEd) and with neither, the
       same rows written in random order and in day order (a target filled in commit
       order); files of about 125k rows each. Also the query's best time.

Row counts are checked (merge: the generator's live rows plus the copies). Not part of the
test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as R  # noqa: E402
import workload as W  # noqa: E402
from bench_projects import make_project  # noqa: E402
from growth import _run_pass  # noqa: E402

ROWS_PER_FILE = 125_000
BATCH = 10_000
KEY_GAP = 1_000_000  # copies' keys: above every key of the stream


def _target(root: Path) -> str:
    from ticdc_sync.warehouse.locations import target_location

    return target_location(str(root / "warehouse"), "accounts_000")


def _detail(spark, path: str) -> dict:
    d = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().asDict()
    return {
        "files": d["numFiles"],
        "bytes": d["sizeInBytes"],
        "clustering": list(d.get("clusteringColumns") or []),
        "partitions": list(d.get("partitionColumns") or []),
    }


def _fill(spark, root: Path, rows: int, clustered: bool) -> dict:
    """Write the target back as its rows plus about `rows` copies, in random key order."""
    from pyspark.sql import functions as F

    path = _target(root)
    have = spark.read.format("delta").load(path).cache()
    live = have.count()
    copies = max(0, -(-rows // max(1, live)) - 1)
    more = have.crossJoin(spark.range(1, copies + 1).withColumnRenamed("id", "_copy"))
    more = more.withColumn("id", F.col("id") + F.col("_copy") * KEY_GAP).drop("_copy")
    total = live * (copies + 1)
    files = max(1, total // ROWS_PER_FILE)
    allrows = have.unionByName(more).repartition(files, F.xxhash64("id", F.lit(7)))
    allrows = allrows.sortWithinPartitions(F.xxhash64("id", F.lit(11)))
    allrows.write.format("delta").mode("overwrite").save(path)
    have.unpersist()
    if clustered:
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (id)")
    return {"rows": total, "live": live, "copies": copies}


def _optimize(spark, path: str, file_bytes: int) -> None:
    key = "spark.databricks.delta.optimize.maxFileSize"
    old = spark.conf.get(key, None)
    spark.conf.set(key, str(file_bytes))
    try:
        spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    finally:
        spark.conf.unset(key) if old is None else spark.conf.set(key, old)


def _last_merge(spark, path: str) -> dict:
    h = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    for r in h:
        if r["operation"] == "MERGE":
            m = r["operationMetrics"]
            return {
                "files_removed": int(m.get("numTargetFilesRemoved", 0)),
                "rows_copied": int(m.get("numTargetRowsCopied", 0)),
            }
    return {"files_removed": -1, "rows_copied": -1, "ops": [r["operation"] for r in h[:5]]}


def measure_merge(spark, rows: int, repeat: int, tmp: Path) -> dict:
    cap = W.ensure_captures(W.Params(pass_events=(2 * BATCH, BATCH), ddl_count=0, tables=1))
    bases: dict[str, Path] = {}
    out: dict = {"rows": rows, "batch": BATCH, "runs": {}}
    for name, layout in (("clustered", "    cluster_by: [id]\n"), ("plain", "")):
        t0 = time.perf_counter()
        root = make_project(tmp / f"base-{name}", cap, rewrite_below="0")
        (root / "tables" / "t.yml").write_text(
            f'tables:\n  - upstream: "{W.DB}.*"\n    name: "{{table}}"\n{layout}'
        )
        _run_pass(spark, root, cap, 1)
        fill = _fill(spark, root, rows, name == "clustered")
        bases[name] = root
        out[name] = {"fill": fill, "built": time.perf_counter() - t0}
    plain = _detail(spark, _target(bases["plain"]))
    _optimize(spark, _target(bases["clustered"]), max(1, plain["bytes"] // plain["files"]))
    for name, root in bases.items():
        out[name]["detail"] = _detail(spark, _target(root))
        print(
            f"  {name}: {out[name]['fill']['rows']:,} rows, {out[name]['detail']} "
            f"(built in {out[name]['built']:.0f}s)",
            flush=True,
        )
    want = cap.meta["passes"][1]["live_rows"]["accounts_000"]
    want += out["plain"]["fill"]["live"] * out["plain"]["fill"]["copies"]
    for i in range(repeat):
        for name in ("clustered", "plain") if i % 2 == 0 else ("plain", "clustered"):
            root = tmp / f"run-{name}"
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(bases[name], root, symlinks=True)
            dt, _ = _run_pass(spark, root, cap, 2)
            ph = R.run_phases(root)
            r = {
                "seconds": dt,
                "apply": sum(ph["targets"].values()),
                **_last_merge(spark, _target(root)),
            }
            got = spark.read.format("delta").load(_target(root)).count()
            if got != want:
                raise SystemExit(f"{name}: {got:,} rows after the batch, want {want:,}")
            out["runs"].setdefault(name, []).append(r)
            print(
                f"  {name} #{i + 1}: run {dt:.1f}s, apply {r['apply']:.1f}s, "
                f"{r['files_removed']} files rewritten, {r['rows_copied']:,} rows copied "
                f"({R.phase_split(ph)})",
                flush=True,
            )
            shutil.rmtree(root, ignore_errors=True)
    for root in bases.values():
        shutil.rmtree(root, ignore_errors=True)
    best = {n: min(rs, key=lambda r: r["seconds"]) for n, rs in out["runs"].items()}
    out["best"] = best
    out["ratio"] = best["plain"]["seconds"] / best["clustered"]["seconds"]
    out["apply_ratio"] = best["plain"]["apply"] / max(1e-9, best["clustered"]["apply"])
    return out


def _files_read(spark, df) -> tuple[int, float]:
    """(files the scan read, seconds) of an aggregate over `df`, AQE off (a plain plan)."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        agg = df.selectExpr("count(*) AS n", "sum(v) AS s")
        t0 = time.perf_counter()
        agg.collect()
        dt = time.perf_counter() - t0
        leaves = agg._jdf.queryExecution().executedPlan().collectLeaves()
        files = 0
        for i in range(leaves.size()):
            m = leaves.apply(i).metrics()
            if m.contains("numFiles"):
                files += int(m.apply("numFiles").value())
        return files, dt
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")


def measure_range(spark, rows: int, days: int, repeat: int, tmp: Path) -> dict:
    from pyspark.sql import functions as F

    files = max(1, rows // ROWS_PER_FILE)
    base = spark.range(0, rows).selectExpr(
        "id",
        f"date_add(DATE'2024-01-01', CAST(pmod(xxhash64(id, 3), {days}) AS INT)) AS day",
        "CAST(id * 3 AS BIGINT) AS v",
        "concat('name-', id) AS name",
        "CAST(id % 100000 AS DECIMAL(12,2)) AS amount",
    )
    shuffled = base.repartition(files, F.xxhash64("id", F.lit(5)))
    layouts = {
        "partitioned": ("PARTITIONED BY (day)", shuffled),
        "clustered": ("CLUSTER BY (day)", shuffled),
        "neither, random order": ("", shuffled),
        "neither, day order": ("", base.repartitionByRange(files, "day", "id")),
    }
    out: dict = {"rows": rows, "days": days, "layouts": {}}
    query_day = f"DATE'2024-01-01' + INTERVAL {days // 2} DAYS"
    for name, (clause, df) in layouts.items():
        path = str(tmp / ("range-" + name.replace(" ", "").replace(",", "-")))
        t0 = time.perf_counter()
        df.createOrReplaceTempView("__layout_src")
        spark.sql(
            f"CREATE TABLE delta.`{path}` (id BIGINT, day DATE, v BIGINT, name STRING, "
            f"amount DECIMAL(12,2)) USING delta {clause}"
        )
        spark.sql(f"INSERT INTO delta.`{path}` SELECT * FROM __layout_src")
        if name == "clustered":
            # the same files' size as the unclustered table (OPTIMIZE's default is 1 GB)
            d = _detail(spark, path)
            _optimize(spark, path, max(1, d["bytes"] // max(1, files)))
        d = _detail(spark, path)
        tab = spark.read.format("delta").load(path)
        q = tab.where(F.col("day") == F.expr(query_day))
        best, n_files = float("inf"), 0
        for _ in range(repeat):
            n_files, dt = _files_read(spark, q)
            best = min(best, dt)
        day_rows = q.count()
        out["layouts"][name] = {
            "files_read": n_files,
            "files": d["files"],
            "seconds": best,
            "day_rows": day_rows,
            "built": time.perf_counter() - t0,
        }
        print(
            f"  {name}: a one-day query reads {n_files} of {d['files']} files "
            f"({day_rows:,} rows of the day) in {best:.2f}s",
            flush=True,
        )
        shutil.rmtree(path, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--only", default="merge,range")
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args()
    only = set(a.only.split(","))
    spark = R.session()
    res: dict = {}
    W.OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="layout-", dir=str(W.OUT)) as tmp:
        if "merge" in only:
            m = res["merge"] = measure_merge(spark, a.rows, a.repeat, Path(tmp))
            b = m["best"]
            print(
                f"merge {BATCH:,} changes into {m['clustered']['fill']['rows']:,} rows: "
                f"clustered by id {b['clustered']['seconds']:.1f}s (apply "
                f"{b['clustered']['apply']:.1f}s, {b['clustered']['files_removed']} files "
                f"rewritten), unclustered {b['plain']['seconds']:.1f}s (apply "
                f"{b['plain']['apply']:.1f}s, {b['plain']['files_removed']} files); "
                f"unclustered / clustered: run {m['ratio']:.2f}x, apply {m['apply_ratio']:.2f}x"
            )
        if "range" in only:
            r = res["range"] = measure_range(spark, a.rows, a.days, a.repeat, Path(tmp))
            print(
                f"one-day query over {a.rows:,} rows / {a.days} days, files read: "
                + "; ".join(
                    f"{k} {v['files_read']}/{v['files']} ({v['seconds']:.2f}s)"
                    for k, v in r["layouts"].items()
                )
            )
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
