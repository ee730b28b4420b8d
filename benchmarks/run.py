"""ticdc-sync benchmarks: one command, one table of figures and targets (issue 7).

Usage: python benchmarks/run.py [--events N] [--quick] [--repeat 3] [--only a,b,...]
                                [--profile] [--protocol canal-json] [--e2e-dv] [--e2e-modes]

Measures, in one run and on one local[2] SparkSession (best of --repeat each):
  decode   Spark reading the capture and parsing every message with plain from_json (noop sink)
  e2e      ticdc_sync.spark.runner.run on a fresh project (files transport): pass 1 into empty
           targets, pass 2 (another N events) into the populated targets, each with its
           phases (run_results `phases`: stage, resolve, plan, apply and each target's
           seconds, retention); `--e2e-dv` also with targets created with deletion vectors;
           `--e2e-modes` also with every target in `mode: soft_delete` and in `mode: history`
  baseline a hand-written Structured Streaming job over the same capture lines: foreachBatch,
           last change per key (window), one MERGE per table per micro-batch, no DDL/watermarks
  merge    10,000 changes MERGEd into targets of 1M and 10M rows (several layouts)
  memory   peak resident memory (PSS) of the driver (python + its JVM) running e2e pass 1
           for N and 5N events, each in its own process with ticdc-sync's session defaults
           (no driver heap set; --mem-heap sets one); the sum of RSS and the JVM's heap
           (from its GC log) are printed too
  plan     `ticdc-sync plan` wall time on projects_example/shop (a subprocess, no JVM)
  load     initial load of a Dumpling CSV export (10M rows; --quick 500k) against plain
           spark.read.csv(...).write.format("delta") of the same files (initial_load.py)
  freshness  `run --follow` consuming a live producer in a real Kafka broker, every target
           applied each poll (`target_lag: 0`): lag per change at a steady rate, then a
           rate ramp (freshness.py)
  lagbudget  the same with `target_lag: 1m`, a fresh follower per table count: staging
           freshness (commit to readable as of `latest`) over 20 and 300 tables, target
           freshness over 20, the largest table count that holds the lag (lag_budget.py)
  flat     --flat-runs consecutive runs of --flat-events each into one project: last / 2nd
           run time, and disk use against the live rows (growth.py)
  tables   the same events over 3 and 300 tables; a --follow-sized batch over 50 (growth.py)
  peer     Spark Declarative Pipelines' AUTO CDC flow vs `ticdc-sync run`, both as CLIs, on
           pass 1 (sdp_peer.py)
  asof     a fresh read of one target (`as_of(..., "latest")`) against reading the target
           alone, with 1, 10 and 60 s of a 2,000 ev/s stream staged but not applied
           (as_of_read.py)
  visible  `run --follow` (`target_lag: 1m`) against a live producer, one target read as
           of `latest` in a loop: each change's commit to its first read (fresh_visible.py;
           not in the default set)
`--profile` also runs e2e pass 1 once under cProfile and prints where the driver waited.
`compare.py` runs `ticdc-sync run` at this checkout against another commit, alternating.
Not part of the test suite. Captures are cached under benchmarks/out/ (gitignored).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import workload as W  # noqa: E402
from bench_projects import make_project, point_captures, target_counts  # noqa: E402

SESSION_CONF = {
    "spark.master": "local[2]",
    "spark.driver.memory": "2g",
    "spark.ui.enabled": "false",
}


# ------------------------------------------------------------------------------ helpers


def best_of(fn, repeat: int, label: str):
    """Run fn() `repeat` times; return (best seconds, last result)."""
    best, res = float("inf"), None
    for i in range(repeat):
        t0 = time.perf_counter()
        res = fn(i)
        dt = time.perf_counter() - t0
        best = min(best, dt)
        print(f"  {label} #{i + 1}: {dt:.1f}s", flush=True)
    return best, res


def session(conf: dict[str, str] | None = None):
    """The benchmark's SparkSession: SESSION_CONF, or `conf` in its place."""
    from ticdc_sync.spark.runtime.session import build_session

    conf = SESSION_CONF if conf is None else conf
    spark = build_session(None, app_name="ticdc-sync-bench", kafka=False, extra_conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def event_log_session(folder: Path, extra: dict[str, str] | None = None):
    """`session` with SESSION_CONF (and `extra`) writing Spark's event log, uncompressed,
    into `folder`, emptied first: what the profiles read each job from."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return session(
        {
            **SESSION_CONF,
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": str(folder),
            "spark.eventLog.compress": "false",
            **(extra or {}),
        }
    )


# ------------------------------------------------------------------------------ (a) decode


def measure_decode(spark, cap: W.Capture, repeat: int) -> float:
    from pyspark.sql import functions as F

    from ticdc_sync.spark.staging.decode import CANAL_SCHEMA, DEBEZIUM_SCHEMA
    from ticdc_sync.spark.transports.sources import CAPTURE_LINE_SCHEMA

    schema = DEBEZIUM_SCHEMA if cap.params.protocol == "debezium" else CANAL_SCHEMA
    folder = str(cap.captures(1) / W.TOPIC)

    def once(_):
        # The capture line through Spark's JSON reader, as ticdc-sync reads it
        # (`sources._records`): the faster of the two plain ways, so the limit stays a floor.
        df = (
            spark.read.schema(CAPTURE_LINE_SCHEMA)
            .json(folder)
            .select("partition", "offset", F.from_json("value", schema).alias("j"))
        )
        df.write.format("noop").mode("overwrite").save()

    t, _ = best_of(once, repeat, "decode limit")
    return t


# ------------------------------------------------------------------------------ (b) e2e


def measure_e2e(
    spark,
    cap: W.Capture,
    repeat: int,
    tmp: Path,
    deletion_vectors: bool = False,
    mode: str = "mirror",
) -> dict:
    """Best of `repeat` of each pass; with the best run's phases (run_results `phases`) and
    each target's seconds. `deletion_vectors`: targets created with them; `mode`: every
    target's mode."""
    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner

    results: dict = {"pass1": float("inf"), "pass2": float("inf"), "log": []}
    want = [p["live_rows"] for p in cap.meta["passes"]]
    label = "e2e (deletion vectors)" if deletion_vectors else "e2e"
    if mode != "mirror":
        label += f" ({mode})"
    for i in range(repeat):
        root = make_project(tmp / f"e2e{i}-{deletion_vectors}-{mode}", cap, deletion_vectors, mode)
        for n in (1, 2):
            point_captures(root, cap, n)
            project = load_project(root)
            lines: list[str] = []
            t0 = time.perf_counter()
            code = runner.run(project, spark=spark, out=lines.append)
            dt = time.perf_counter() - t0
            if code != 0:
                raise SystemExit("e2e run failed:\n" + "\n".join(lines))
            print(f"  {label} pass {n} #{i + 1}: {dt:.1f}s", flush=True)
            if dt < results[f"pass{n}"]:
                results[f"pass{n}"] = dt
                results[f"log{n}"] = lines
                results[f"phases{n}"] = run_phases(root)
            if i == 0:
                got = target_counts(spark, root / "warehouse", mode=mode)
                if got != want[n - 1]:
                    raise SystemExit(f"e2e pass {n}: target rows {got}, expected {want[n - 1]}")
        shutil.rmtree(root, ignore_errors=True)
    return results


def measure_e2e_dv(spark, cap: W.Capture, repeat: int, tmp: Path) -> tuple[dict, dict]:
    """e2e without and with deletion vectors, alternating (the order flips each repetition,
    so the JVM's warm-up and the host's load fall on both): best of `repeat` each."""
    best: dict[bool, dict] = {}
    for i in range(repeat):
        for dv in (False, True) if i % 2 == 0 else (True, False):
            got = measure_e2e(spark, cap, 1, tmp, deletion_vectors=dv)
            have = best.setdefault(dv, got)
            for n in (1, 2):
                if got[f"pass{n}"] < have[f"pass{n}"]:
                    for k in (f"pass{n}", f"log{n}", f"phases{n}"):
                        have[k] = got[k]
    return best[False], best[True]


def measure_e2e_modes(spark, cap: W.Capture, repeat: int, tmp: Path) -> dict[str, dict]:
    """e2e with every target a mirror, soft_delete and history, the order rotating each
    repetition (the JVM's warm-up and the host's load fall on all): best of `repeat` each."""
    modes = ["mirror", "soft_delete", "history"]
    best: dict[str, dict] = {}
    for i in range(repeat):
        for mode in modes[i % 3 :] + modes[: i % 3]:
            got = measure_e2e(spark, cap, 1, tmp, mode=mode)
            have = best.setdefault(mode, got)
            for n in (1, 2):
                if got[f"pass{n}"] < have[f"pass{n}"]:
                    for k in (f"pass{n}", f"log{n}", f"phases{n}"):
                        have[k] = got[k]
    return best


def run_phases(root: Path) -> dict:
    """The phases of the project's last run (`target/run_results.json`): {phase: seconds}
    and {target: seconds}."""
    body = json.loads((root / "target" / "run_results.json").read_text())
    return {
        "phases": body.get("phases") or {},
        "targets": {t: r["seconds"] for t, r in sorted(body["targets"].items())},
    }


def phase_split(ph: dict | None) -> str:
    """`open state 1.2s; stage src 30.1s; ...; apply 20.3s (accounts 19.0, ...)`: where a
    pass went, in run order."""
    if not ph:
        return ""
    phases, parts = ph["phases"], []
    for name in sorted(phases, key=_phase_rank):
        text = f"{name} {phases[name]:.1f}s"
        if name == "apply" and ph["targets"]:
            text += " (" + ", ".join(f"{t} {s:.1f}" for t, s in ph["targets"].items()) + ")"
        parts.append(text)
    return "; ".join(parts)


def _phase_rank(name: str) -> int:
    first = name.split(" ")[0]
    return PHASE_ORDER.index(first) if first in PHASE_ORDER else len(PHASE_ORDER)


# The phases of a pass (run_results `phases`), in run order. `starting Spark` happens only
# when the run starts the session (a user's run; not here, where the session is shared).
PHASE_ORDER = ("starting", "open", "stage", "resolve", "plan", "apply", "retention")


# ------------------------------------------------------------------------------ (c) baseline


def run_baseline(spark, cap: W.Capture, work: Path) -> tuple[float, float]:
    """The job a Spark engineer writes from the Delta docs (streaming upserts with MERGE)."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ticdc_sync.core.datatypes import delta_type

    line_schema = "partition INT, offset BIGINT, value STRING"
    msg_schema = (
        "database STRING, table STRING, type STRING, isDdl BOOLEAN, "
        "data ARRAY<MAP<STRING,STRING>>, _tidb STRUCT<commitTs: BIGINT>"
    )
    tables = W.bench_tables()
    paths = {}
    for s in tables:
        path = str(work / "tables" / s.table)
        cols = ", ".join(f"`{c.name}` {delta_type(c)}" for c in s.columns)
        spark.sql(f"CREATE TABLE delta.`{path}` ({cols}) USING delta")
        paths[s.table] = path
    inbox = work / "inbox"
    inbox.mkdir()

    def upsert(batch, _batch_id):
        rows = (
            batch.select("partition", "offset", F.from_json("value", msg_schema).alias("m"))
            .where("m.type IN ('INSERT', 'UPDATE', 'DELETE') AND NOT m.isDdl")
            .select(
                "partition",
                "offset",
                F.col("m.table").alias("tbl"),
                F.col("m.type").alias("op"),
                F.col("m._tidb.commitTs").alias("ts"),
                F.posexplode("m.data").alias("idx", "d"),
            )
            .persist()
        )
        for s in tables:
            cols = [F.col("d")[c.name].cast(delta_type(c)).alias(c.name) for c in s.columns]
            w = Window.partitionBy("id").orderBy(
                F.col("ts").desc(), F.col("offset").desc(), F.col("idx").desc()
            )
            last = (
                rows.where(F.col("tbl") == s.table)
                .select(*cols, "op", "ts", "offset", "idx")
                .withColumn("rn", F.row_number().over(w))
                .where("rn = 1")
            )
            names = [c.name for c in s.columns]
            (
                DeltaTable.forPath(spark, paths[s.table])
                .alias("t")
                .merge(last.alias("s"), "t.id = s.id")
                .whenMatchedDelete("s.op = 'DELETE'")
                .whenMatchedUpdate(set={n: f"s.`{n}`" for n in names})
                .whenNotMatchedInsert("s.op != 'DELETE'", values={n: f"s.`{n}`" for n in names})
                .execute()
            )
        rows.unpersist()

    times = []
    for n in (1, 2):
        for f in sorted((cap.captures(n) / W.TOPIC).glob("*.jsonl")):
            (inbox / f"pass{n}-{f.name}").symlink_to(f)
        t0 = time.perf_counter()
        q = (
            spark.readStream.schema(line_schema)
            .json(str(inbox))
            .writeStream.foreachBatch(upsert)
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        times.append(time.perf_counter() - t0)
    want = [p["live_rows"] for p in cap.meta["passes"]][-1]
    got = {t: spark.read.format("delta").load(p).count() for t, p in paths.items()}
    if got != want:
        raise SystemExit(f"baseline: target rows {got}, expected {want}")
    return times[0], times[1]


def measure_baseline(spark, cap: W.Capture, repeat: int, tmp: Path) -> dict:
    best = {"pass1": float("inf"), "pass2": float("inf")}
    for i in range(repeat):
        work = tmp / f"baseline{i}"
        work.mkdir(parents=True)
        t1, t2 = run_baseline(spark, cap, work)
        print(f"  baseline #{i + 1}: pass 1 {t1:.1f}s, pass 2 {t2:.1f}s", flush=True)
        best["pass1"], best["pass2"] = min(best["pass1"], t1), min(best["pass2"], t2)
        shutil.rmtree(work, ignore_errors=True)
    return best


# ------------------------------------------------------------------------------ (d) MERGE


MERGE_LAYOUTS = {
    # name: (keys of the batch, literal key range in ON, deletion vectors)
    "random keys": ("random", False, False),
    "random keys + DV": ("random", False, True),
    "clustered keys": ("clustered", False, False),
    "clustered + range": ("clustered", True, False),
    "clustered + range + DV": ("clustered", True, True),
}
ROWS_PER_FILE = 125_000
HOT = 100_000  # clustered batches hit the newest 100k keys (auto-increment hot set; 10% if less)


def build_target(spark, path: str, rows: int, dv: bool) -> None:
    files = max(1, rows // ROWS_PER_FILE)
    spark.range(0, rows, numPartitions=files).selectExpr(
        "id",
        "id % 97 AS grp",
        "CAST(id * 3 AS BIGINT) AS v",
        "concat('name-', id) AS name",
        "CAST(id % 100000 AS DECIMAL(12,2)) AS amount",
        "0L AS _ts",
    ).write.format("delta").save(path)
    if dv:
        spark.sql(
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )


def merge_batch(spark, rows: int, batch: int, keys: str, rep: int):
    """8k updates + 1k deletes of existing keys, 1k inserts of new keys (batch 10k)."""
    upd = batch * 8 // 10
    dele = batch // 10
    ins = batch - upd - dele
    seed = 1000 + rep
    if keys == "random":
        existing = f"CAST(pmod(hash(id, {seed}), {rows}) AS BIGINT)"
    else:
        hot = min(HOT, rows // 10)
        existing = f"{rows - hot} + CAST(pmod(hash(id, {seed}), {hot}) AS BIGINT)"
    src = spark.range(0, upd + dele).selectExpr(
        f"{existing} AS id", f"IF(id < {dele}, 'D', 'U') AS op"
    )
    src = src.dropDuplicates(["id"]).unionByName(
        spark.range(rows + rep * ins, rows + (rep + 1) * ins).selectExpr("id", "'I' AS op")
    )
    return src.selectExpr(
        "id",
        "id % 97 AS grp",
        "id * 5 AS v",
        "concat('upd-', id) AS name",
        "CAST(1 AS DECIMAL(12,2)) AS amount",
        f"{rep + 1}L AS _ts",
        "op",
    ).cache()


def one_merge(spark, path: str, src, ranged: bool) -> dict:
    src.createOrReplaceTempView("__bench_src")
    on = "t.id = s.id"
    if ranged:
        lo, hi = src.selectExpr("min(id)", "max(id)").first()
        on += f" AND t.id BETWEEN {lo} AND {hi}"
    t0 = time.perf_counter()
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING __bench_src s ON {on} "
        "WHEN MATCHED AND s.op = 'D' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *"
    ).collect()
    dt = time.perf_counter() - t0
    m = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").select("operationMetrics").first()[0]
    return {
        "seconds": dt,
        "files_removed": int(m.get("numTargetFilesRemoved", 0)),
        "rows_copied": int(m.get("numTargetRowsCopied", 0)),
        "dv_added": int(m.get("numTargetDeletionVectorsAdded", 0) or 0),
    }


def measure_merge(spark, sizes: tuple[int, int], batch: int, repeat: int, tmp: Path) -> dict:
    out: dict = {}
    for rows in sizes:
        paths = {}
        for dv in (False, True):
            t0 = time.perf_counter()
            paths[dv] = str(tmp / f"merge-{rows}-{dv}")
            build_target(spark, paths[dv], rows, dv)
            print(f"  built {rows:,}-row target (DV {dv}) in {time.perf_counter() - t0:.1f}s")
        for name, (keys, ranged, dv) in MERGE_LAYOUTS.items():
            best: dict | None = None
            v0 = spark.sql(f"DESCRIBE HISTORY delta.`{paths[dv]}` LIMIT 1").first()["version"]
            for rep in range(repeat):
                # distinct batches per repetition (each rep's inserts are new keys)
                src = merge_batch(spark, rows, batch, keys, rep + 10 * len(out))
                src.count()
                r = one_merge(spark, paths[dv], src, ranged)
                src.unpersist()
                # Every MERGE starts from the freshly built, key-sorted table: a copy-on-write
                # MERGE rewrites touched files in join order, which unclusters them.
                spark.sql(f"RESTORE TABLE delta.`{paths[dv]}` TO VERSION AS OF {v0}").collect()
                if best is None or r["seconds"] < best["seconds"]:
                    best = r
            assert best is not None
            print(
                f"  merge {batch:,} into {rows:,} [{name}]: {best['seconds']:.2f}s, "
                f"{best['files_removed']} files rewritten, {best['rows_copied']:,} rows copied, "
                f"{best['dv_added']} DVs",
                flush=True,
            )
            out[(rows, name)] = best
        for p in paths.values():
            shutil.rmtree(p, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------ (e) memory


def _tree_usage(pid: int) -> list[tuple[int, str, int, int]]:
    """(pid, command, RSS, PSS) in bytes of pid and every descendant, from /proc.

    PSS as well as RSS: a forked child (pyspark's worker daemon, a JVM's helper) reports
    its parent's shared pages in its own RSS, so a sum of RSS counts them twice.
    """
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))

    def usage(p: int) -> tuple[int, str, int, int]:
        rss = pss = 0
        comm = "?"
        try:
            with open(f"/proc/{p}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss = int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
        except OSError:
            pass
        return p, comm, rss, pss

    out, stack = [usage(pid)], list(children.get(pid, []))
    while stack:
        p = stack.pop()
        out.append(usage(p))
        stack.extend(children.get(p, []))
    return out


def measure_memory(events: int, protocol: str, repeat: int, heap: str | None) -> dict:
    """The lowest of `repeat` peaks (best of N, as for every figure) of a child
    `run.py --mem-child`; each run's peak is also printed and kept in "runs"."""
    runs = [_memory_once(events, protocol, i, heap) for i in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    best = min(ok, key=lambda r: r["total"]) if ok else runs[0]
    return {**best, "runs": runs}


def _memory_once(events: int, protocol: str, i: int, heap: str | None) -> dict:
    """Peak PSS (and sum of RSS) of one child: python driver, JVM, workers; and the JVM's
    heap from its GC log (the peak committed heap, and the highest occupancy after a GC)."""
    W.ensure_captures(W.Params(events=events, protocol=protocol, passes=1))
    gc_log = W.OUT / f"mem-child-{protocol}-{events}-{i + 1}.gc.log"
    gc_log.unlink(missing_ok=True)
    cmd = [sys.executable, str(HERE / "run.py"), "--mem-child", str(events), "--protocol", protocol]
    cmd += ["--gc-log", str(gc_log)] + (["--mem-heap", heap] if heap else [])
    log = W.OUT / f"mem-child-{protocol}-{events}-{i + 1}.log"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak: dict = {"python": 0, "jvm": 0, "total": 0, "rss_sum": 0, "at_rss_peak": ""}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            procs = _tree_usage(proc.pid)
            py, kids = procs[0][3], sum(u[3] for u in procs[1:])
            peak["python"] = max(peak["python"], py)
            peak["jvm"] = max(peak["jvm"], kids)
            peak["total"] = max(peak["total"], py + kids)
            rss = sum(u[2] for u in procs)
            if rss > peak["rss_sum"]:
                peak["rss_sum"] = rss
                top = sorted(procs, key=lambda u: -u[2])[:4]
                peak["at_rss_peak"] = ", ".join(f"{c} {r / 2**20:,.0f}" for _, c, r, _ in top)
            time.sleep(0.25)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, _ = proc.communicate()
    stop.set()
    th.join()
    log.write_text(out)
    label = f"  memory {events:,} events #{i + 1}"
    if proc.returncode != 0:
        # A failure is a figure too (the table must still print): name its cause and log.
        peak["error"] = f"{_first_error(out)} (exit {proc.returncode}; log {log})"
        print(f"{label}: FAILED: {peak['error']}", flush=True)
        return peak
    peak["seconds"] = float(out.strip().splitlines()[-1].split()[-1])
    peak.update(_heap_from_gc_log(gc_log))
    print(
        f"{label}: peak {peak['total'] / 2**20:,.0f} MiB PSS "
        f"(python {peak['python'] / 2**20:,.0f}, JVM and its children "
        f"{peak['jvm'] / 2**20:,.0f}); sum of RSS {peak['rss_sum'] / 2**20:,.0f} MiB "
        f"(at that peak, MiB: {peak['at_rss_peak']}); JVM heap committed up to "
        f"{peak['heap_committed']:,} MiB, at most {peak['heap_after_gc']:,} MiB after a GC; "
        f"run {peak['seconds']:.1f}s",
        flush=True,
    )
    return peak


def _heap_from_gc_log(path: Path) -> dict:
    """Peak committed heap and peak occupancy after a collection, in MiB, from the
    `-Xlog:gc` lines (`... 838M->192M(1130M) ...`: before, after, committed)."""
    committed = after = 0
    text = path.read_text() if path.exists() else ""
    for m in re.finditer(r"(\d+)M->(\d+)M\((\d+)M\)", text):
        after = max(after, int(m.group(2)))
        committed = max(committed, int(m.group(3)))
    return {"heap_committed": committed, "heap_after_gc": after}


def _first_error(log: str) -> str:
    """The first line of a child's log that names a JVM or Python error, else its last line."""
    for line in log.splitlines():
        if any(m in line for m in ("OutOfMemoryError", "Error:", "Exception:", "Killed")):
            return line.strip()[:300]
    lines = [x for x in log.splitlines() if x.strip()]
    return lines[-1].strip()[:300] if lines else "no output"


def mem_child(events: int, protocol: str, gc_log: str | None, heap: str | None) -> None:
    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner

    cap = W.ensure_captures(W.Params(events=events, protocol=protocol, passes=1))
    # `ticdc-sync run` as shipped: the product sets no driver heap, so Spark's default
    # (1 GiB) applies. The shared session's 2g is headroom for the baseline and the
    # 10M-row MERGE targets. Given to this child, it is room G1 grows into over a long
    # run without the run holding more (benchmarks/README.md, "Memory").
    conf = {k: v for k, v in SESSION_CONF.items() if k != "spark.driver.memory"}
    if heap:
        conf["spark.driver.memory"] = heap
    if gc_log:
        # The JVM's own account of its heap, so the table can tell heap sizing from need.
        conf["spark.driver.extraJavaOptions"] = f"-Xlog:gc:file={gc_log}"
    spark = session(conf)
    with tempfile.TemporaryDirectory(prefix="ticdc-bench-mem-") as tmp:
        root = make_project(Path(tmp) / "p", cap)
        t0 = time.perf_counter()
        code = runner.run(load_project(root), spark=spark, out=lambda s: None)
        dt = time.perf_counter() - t0
    spark.stop()
    if code:
        raise SystemExit(code)
    print(f"seconds {dt:.2f}")


# ------------------------------------------------------------------------------ (f) plan


def measure_plan(repeat: int) -> tuple[float, float] | str:
    """Best wall and CPU seconds of `ticdc-sync plan` on the example project, or the first
    error line. It runs this checkout's code (`python -m ticdc_sync.commands.cli`, with the repo
    first on PYTHONPATH), not whatever an installed `ticdc-sync` script points at."""
    project = REPO / "projects_example" / "shop"
    cmd = [sys.executable, "-m", "ticdc_sync.commands.cli", "plan", "--project", str(project)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }

    import resource

    cpu = []
    failed: list[str] = []

    def once(_):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if r.returncode not in (0, 2):
            failed.append(f"{_first_error(r.stderr)} (exit {r.returncode})")

    t, _ = best_of(once, repeat, "plan")
    if failed:
        print(f"plan failed: {failed[0]}", flush=True)
        return failed[0]
    return t, min(cpu)


# ------------------------------------------------------------------------------ profile


PROFILE_FUNCS = (
    ("sources.py", "read_capture_records"),
    ("staging.py", "stage"),
    ("staging.py", "partitions"),
    ("staging.py", "capped_watermark"),
    ("quarantine.py", "open_bad_records"),
    ("quarantine.py", "quarantine_open_bad"),
    ("warehouse.py", "read_state"),
    ("build.py", "build_plan"),
    ("delta_log.py", "target_marker"),
    ("delta_log.py", "table_exists"),
    ("executor.py", "advance"),
    ("rows.py", "merge"),
    ("rows.py", "_target_columns"),
    ("rows.py", "_handle_bad_values"),
    ("ddl_commit.py", "apply_ddl"),
    ("batch.py", "run_once"),
)


def profile_e2e(spark, cap: W.Capture, tmp: Path) -> str:
    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner

    root = make_project(tmp / "profile", cap)
    prof = cProfile.Profile()
    lines: list[str] = []
    prof.enable()
    runner.run(load_project(root), spark=spark, out=lines.append)
    prof.disable()
    st = pstats.Stats(prof, stream=io.StringIO())
    rows = []
    for (file, _line, func), (cc, _nc, _tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        for f, fn in PROFILE_FUNCS:
            if file.endswith("/" + f) and func == fn and "ticdc_sync" in file:
                rows.append((ct, cc, f"{f}:{fn}"))
    rows.sort(reverse=True)
    text = "\n".join(f"  {ct:8.1f}s  {cc:5d} call(s)  {name}" for ct, cc, name in rows)
    return text + "\n  runner output:\n" + "\n".join("    " + x for x in lines)


# ------------------------------------------------------------------------------ issue 31 rows


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f} MiB"


def growth_rows(res: dict) -> list[tuple[str, str, str, str]]:
    """Table rows of the freshness, flat, tables and peer figures (those measured)."""

    def met(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    rows: list[tuple[str, str, str, str]] = []
    if "freshness" in res:
        f = res["freshness"]
        st = f.get("steady", {})
        label = (
            f"freshness, run --follow, {f['rate']:,.0f} ev/s for {f['seconds']:.0f}s "
            f"over {f['tables']} tables: lag p50 / p99 / max"
        )
        if "p99" in st:
            value = (
                f"{st['p50']:.1f} / {st['p99']:.1f} / {st['max']:.1f} s "
                f"({st['n']:,} changes, {st['achieved']:,.0f} ev/s produced"
                + (f", {st['missing']:,} never visible" if st["missing"] else "")
                + ")"
            )
            ok = st["p99"] <= 10 and not st["missing"]
        else:
            value, ok = f"no change became visible ({st})", False
        rows.append((label, value, "p99 <= 10s", met(ok)))
        if st.get("batches"):
            rows.append(
                (
                    "  follower's staging commits in that time: count, mean / max length, mean size",
                    f"{st['batches']}, {st['batch_s']:.1f} / {st['batch_s_max']:.1f} s, "
                    f"{st['batch_events']:,.0f} events",
                    "",
                    "",
                )
            )
        kept = [s for s in f["ramp"] if s.get("ok")]
        steps = "; ".join(
            f"{s['rate']:,.0f}: "
            + (
                f"median lag {s['mid']:.1f}s -> {s['last']:.1f}s, drained {s['drain']:.0f}s, "
                f"batches {s.get('batch_s', 0):.1f}s"
                if s.get("mid") is not None
                else ("not drained" if s.get("drain") is None else "lag not measured")
            )
            + (" (kept up)" if s.get("ok") else " (fell behind)")
            for s in f["ramp"]
        )
        top = max((s["rate"] for s in kept), default=0.0)
        rows.append(
            (
                "  highest rate the follower keeps up with (ramp)",
                f"{top:,.0f} ev/s [{steps}]",
                ">= 10,000",
                met(top >= 10_000),
            )
        )
    if "flat" in res:
        fl = res["flat"]
        t = fl["times"]
        if len(t) >= 2:
            ratio = t[-1] / t[1]
            rows.append(
                (
                    f"{fl['runs']} runs of {fl['events']:,} events into one project: "
                    f"run {fl['runs']} / run 2",
                    f"{t[-1]:.1f}s / {t[1]:.1f}s = {ratio:.2f}x (median "
                    f"{sorted(t[1:])[len(t[1:]) // 2]:.1f}s)",
                    "<= 1.1x",
                    met(ratio <= 1.1),
                )
            )
        rows.append(
            (
                f"  warehouse on disk after {fl['runs']} runs / the live rows' own size",
                f"{_mib(fl['warehouse'])} / {_mib(fl['live'])} = "
                f"{fl['warehouse'] / max(fl['live'], 1):.1f}x (targets {_mib(fl['targets'])}, "
                f"staging and state {_mib(fl['internal'])})",
                "",
                "",
            )
        )
    if "tables" in res:
        tb = res["tables"]

        def each(r: dict) -> str:
            return ", ".join(f"{x:.1f}" for x in r.get("runs", [r["seconds"]]))

        b3, b50 = tb["batch3"]["seconds"], tb["batch50"]["seconds"]
        per = (b50 - b3) / 47
        rows.append(
            (
                f"a {tb['batch']:,}-event batch into populated targets, 50 tables vs 3 "
                f"(best of {tb.get('rounds', 1)}, alternating): fixed cost per added target",
                f"{b50:.1f}s / {b3:.1f}s = {b50 / b3:.2f}x; (50 - 3 tables) / 47 = {per:.2f}s "
                f"(runs: 50 tables {each(tb['batch50'])}; 3 tables {each(tb['batch3'])})",
                "<= 0.15s",  # #57
                met(per <= 0.15),
            )
        )
    if "tables" in res and 300 in res["tables"]:
        tb = res["tables"]
        a3, a300 = tb[3]["seconds"], tb[300]["seconds"]
        rows.append(
            (
                f"{tb['events']:,} events over 300 tables vs over 3 "
                f"(best of {tb.get('rounds', 1)}, alternating)",
                f"{a300:.1f}s / {a3:.1f}s = {a300 / a3:.2f}x "
                f"(runs: 300 tables {each(tb[300])}; 3 tables {each(tb[3])})",
                "<= 2x",  # #57
                met(a300 / a3 <= 2),
            )
        )
    if "peer" in res:
        pr = res["peer"]
        label = "Spark Declarative Pipelines AUTO CDC vs ticdc-sync run (both CLIs, pass 1)"
        if "unavailable" in pr:
            rows.append((label, f"cannot run here: {pr['unavailable']}", ">= 1.0x", "NOT MET"))
        elif "error" in pr["peer"] or "error" in pr["ticdc"]:
            err = pr["peer"].get("error") or pr["ticdc"].get("error")
            rows.append((label, f"FAILED: {err}", ">= 1.0x", "NOT MET"))
        else:
            p, o = pr["peer"]["seconds"], pr["ticdc"]["seconds"]
            counts_ok = pr.get("peer_counts") == pr["want"] == pr.get("ticdc_counts")
            rows.append(
                (
                    label,
                    f"{p:.1f}s / {o:.1f}s = ticdc-sync {p / o:.2f}x its rate",
                    ">= 1.0x",
                    met(p / o >= 1.0),
                )
            )
            rows.append(
                (
                    "  target rows: AUTO CDC / ticdc-sync / generator",
                    f"{sum(pr.get('peer_counts', {}).values()):,} / "
                    f"{sum(pr.get('ticdc_counts', {}).values()):,} / {sum(pr['want'].values()):,}",
                    "equal",
                    met(counts_ok),
                )
            )
    return rows


def budget_rows(res: dict) -> list[tuple[str, str, str, str]]:
    """Table rows of the lag-budget figures (lag_budget.py), those measured."""
    if "lagbudget" not in res:
        return []
    b = res["lagbudget"]
    steps = b["steps"]
    rate = f"{b['rate']:,.0f} ev/s"
    rows: list[tuple[str, str, str, str]] = []

    def met(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    def lags(st: dict, unseen: str) -> str:
        if "p99" not in st:
            return f"nothing measured ({st})"
        return (
            f"{st['p50']:.1f} / {st['p99']:.1f} / {st['max']:.1f} s ({st['n']:,} changes"
            + (f", {st['missing']:,} {unseen}" if st["missing"] else "")
            + ")"
        )

    def ok_p99(st: dict, limit: float) -> bool:
        return "p99" in st and not st["missing"] and st["p99"] <= limit

    def staging(step: dict, own: bool) -> None:
        st = step["staging"]
        where = f"{step['tables']} tables" + (" (a follower of its own)" if own else "")
        rows.append(
            (
                f"staging freshness, run --follow, target_lag {b['lag']}s, {rate} for "
                f"{step['seconds']:.0f}s over {where}: commit to readable as of `latest`, "
                "p50 / p99 / max",
                lags(st, "never resolved"),
                "p99 <= 5s",
                met(ok_p99(st, 5)),
            )
        )
        ck = step["check"]
        gap = "-" if st.get("gap_s") is None else f"{st['gap_s']:.1f} / {st['gap_s_max']:.1f} s"
        agrees = "yes" if ck["ok"] else f"NO: {ck['found']} not in [{ck['before']}, {ck['after']}]"
        tr = step.get("trims") or {"n": 0, "events": 0}
        kept = step.get("retention") or "7d (default)"
        rows.append(
            (
                "  staging commits: count, mean / max gap; snapshot('latest') agrees; "
                "trims (retention)",
                f"{st['commits']}, {gap}; {agrees}; {tr['n']} deleting "
                f"{tr['events']:,} events ({kept})",
                "",
                "",
            )
        )
        if st.get("gap_trim_n"):
            rows.append(
                (
                    "  longest gap between two polls' commits with a trim's commit between "
                    "them / without",
                    f"{st['gap_trim_s_max']:.1f} s ({st['gap_trim_n']}) / "
                    + ("-" if st["gap_other_s_max"] is None else f"{st['gap_other_s_max']:.1f} s"),
                    "",
                    "",
                )
            )

    first = steps[0] if steps else None
    if first is not None:
        staging(first, False)
        st = first["staging"]
        rows.append(
            (
                f"change committed upstream to visible through as_of='latest', {rate} over "
                f"{first['tables']} tables (the row above): p99",
                f"{st['p99']:.1f} s" if "p99" in st else "nothing measured",
                "p99 <= 10s",
                met(ok_p99(st, 10)),
            )
        )
        t = first["target"]
        rows.append(
            (
                f"target freshness, run --follow, target_lag {b['lag']}s, {rate} for "
                f"{first['seconds']:.0f}s over {first['tables']} tables: lag p50 / p99 / max",
                lags(t, "not visible by the tail's end"),
                f"p99 <= {b['limit']}s",
                met(ok_p99(t, b["limit"])),
            )
        )
    at = next((s for s in steps if s["tables"] == b["staging_tables"]), None)
    if at is not None and at is not first:
        staging(at, False)
    elif at is None and b["staging"] is not None:
        staging(b["staging"], True)

    def each(s: dict) -> str:
        t = s["target"]
        grew = (
            f"median peak {t['mid']:.0f} -> {t['last']:.0f} s"
            if t.get("mid") is not None
            else "peaks not measured"
        )
        p99 = f"p99 {t['p99']:.1f} s" if "p99" in t else "nothing visible"
        drain = "not drained" if t["drain"] is None else f"tail {t['drain']:.0f} s"
        return (
            f"{s['tables']}: {p99}, {grew}, {drain}, start {s['start_s']:.0f} s, "
            f"{s['polls']['applied']} applies, behind <= {s['polls']['behind_max']}"
            + (" (holds)" if t["ok"] else " (does not hold)")
        )

    if steps:
        held = [s["tables"] for s in steps if s["target"]["ok"]]
        rows.append(
            (
                f"largest table count holding target_lag {b['lag']}s at {rate} "
                f"(p99 <= {b['limit']}s, not growing; a follower per count)",
                f"{max(held) if held else 'none'} [" + "; ".join(each(s) for s in steps) + "]",
                ">= 100",
                met(bool(held) and max(held) >= 100),
            )
        )
    return rows


# ------------------------------------------------------------------------------ main

# The figures made with a live Kafka producer (freshness.Producer: confluent-kafka).
LIVE_PRODUCER = ("freshness", "lagbudget", "visible")


def main() -> None:
    ap = argparse.ArgumentParser(description="ticdc-sync benchmarks (issue 7)")
    ap.add_argument("--events", type=int, default=None, help="row events per pass (1,000,000)")
    ap.add_argument("--quick", action="store_true", help="scaled-down smoke run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--only",
        default="decode,e2e,baseline,merge,memory,plan,load,freshness,lagbudget,flat,tables,peer,asof",
    )
    ap.add_argument(
        "--freshness-seconds", type=float, default=None, help="steady phase (300; --quick 60)"
    )
    ap.add_argument("--freshness-rate", type=float, default=2000.0, help="events/s (2,000)")
    ap.add_argument(
        "--ramp", default="2000,5000,10000", help="ramp rates, events/s (2000,5000,10000)"
    )
    ap.add_argument(
        "--ramp-seconds", type=float, default=None, help="each ramp step (60; --quick 30)"
    )
    ap.add_argument(
        "--budget-tables",
        default=None,
        help="lagbudget: table counts, one follower each, in order (20,50,100,200,300; "
        "--quick 20); the first is the target-freshness row's",
    )
    ap.add_argument("--budget-rate", type=float, default=2000.0, help="lagbudget: events/s")
    ap.add_argument(
        "--budget-created",
        action="store_true",
        help="lagbudget: the tables arrive as CREATE TABLEs in the stream during the run, "
        "not seeded under schema/",
    )
    ap.add_argument(
        "--budget-lag", type=int, default=60, help="lagbudget: the project's target_lag, s (60)"
    )
    ap.add_argument(
        "--budget-settle",
        type=float,
        default=None,
        help="lagbudget: events before the measured ones, per step (default: the lag)",
    )
    ap.add_argument(
        "--budget-seconds",
        type=float,
        default=None,
        help="lagbudget: measured seconds per step (120, or three lags if longer; --quick 30)",
    )
    ap.add_argument(
        "--budget-staging-tables",
        type=int,
        default=None,
        help="lagbudget: staging-freshness table count, a follower of its own unless a step "
        "ran there (300; --quick 100; 0: none)",
    )
    ap.add_argument(
        "--budget-staging-seconds",
        type=float,
        default=None,
        help="lagbudget: measured seconds of that follower (60; --quick 20)",
    )
    ap.add_argument(
        "--budget-retention",
        default=None,
        help="lagbudget: the projects' staging.retention, e.g. 30s, so that the followers "
        "trim while measured (default: ticdc-sync's, 7d: nothing is trimmed)",
    )
    ap.add_argument(
        "--budget-rewrite-below",
        default=None,
        help="lagbudget: the projects' defaults.rewrite_below, e.g. 0 (every segment "
        "MERGEs) or 1MiB (default: ticdc-sync's)",
    )
    ap.add_argument("--flat-runs", type=int, default=None, help="consecutive runs (30; --quick 6)")
    ap.add_argument(
        "--flat-events", type=int, default=None, help="events per run (100,000; --quick 20,000)"
    )
    ap.add_argument(
        "--tables-events",
        type=int,
        default=None,
        help="events over 3 vs 300 tables (1,000,000; --quick 100,000; 0: the batch pair only)",
    )
    ap.add_argument(
        "--tables-rounds", type=int, default=2, help="alternating rounds of the tables rows (2)"
    )
    ap.add_argument("--load-rows", type=int, default=None, help="rows of the load export")
    ap.add_argument(
        "--visible-seconds",
        type=float,
        default=None,
        help="visible: measured seconds (120; --quick 30), after a minute not measured",
    )
    ap.add_argument("--visible-rate", type=float, default=2000.0, help="visible: events/s")
    ap.add_argument("--visible-tables", type=int, default=20, help="visible: tables (20)")
    ap.add_argument(
        "--asof-rows",
        type=int,
        default=None,
        help="live rows of the populated targets of the asof row (1,000,000; --quick 100,000)",
    )
    ap.add_argument(
        "--e2e-dv",
        action="store_true",
        help="also run e2e with targets created with deletion vectors (what they cost or save)",
    )
    ap.add_argument(
        "--e2e-modes",
        action="store_true",
        help="also run e2e with every target in mode soft_delete and in mode history",
    )
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--protocol", default="canal-json")
    ap.add_argument("--mem-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--gc-log", default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--mem-heap",
        default=None,
        help="driver heap of the memory runs, e.g. 2g (default: none set, as ticdc-sync runs)",
    )
    a = ap.parse_args()
    if a.mem_child is not None:
        mem_child(a.mem_child, a.protocol, a.gc_log, a.mem_heap)
        return
    live = [x for x in a.only.split(",") if x in LIVE_PRODUCER]
    if live:
        import freshness

        missing = freshness.producer_missing()
        if missing is not None:
            # Said before any figure is measured, not after the ones before them.
            sys.exit(
                f"benchmarks/run.py: {', '.join(live)}: {missing} (hint: "
                f"{freshness.BENCH_EXTRA}, or leave them out of --only)"
            )
    n = a.events or (50_000 if a.quick else 1_000_000)
    merge_sizes = (100_000, 1_000_000) if a.quick else (1_000_000, 10_000_000)
    load_rows = a.load_rows or (500_000 if a.quick else 10_000_000)
    mem_sizes = (n, 5 * n)
    only = set(a.only.split(","))
    fresh_s = a.freshness_seconds or (60.0 if a.quick else 300.0)
    ramp_s = a.ramp_seconds or (30.0 if a.quick else 60.0)
    ramp = tuple(float(x) for x in a.ramp.split(",") if x)
    flat_runs = a.flat_runs or (6 if a.quick else 30)
    flat_events = a.flat_events or (20_000 if a.quick else 100_000)
    tables_events = (
        a.tables_events if a.tables_events is not None else 100_000 if a.quick else 1_000_000
    )
    asof_rows = a.asof_rows or (100_000 if a.quick else 1_000_000)
    follow_batch = 10_000
    t_start = time.perf_counter()
    print(
        f"ticdc-sync benchmark: {n:,} events/pass, {a.protocol}, best of {a.repeat}; "
        f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print(f"fast Canal path == real encoder on {W.verify_fast_path():,} sample lines", flush=True)
    # The N-event capture, unless only rows with streams of their own were asked for.
    needs_cap = bool(only & {"decode", "e2e", "baseline", "memory", "peer"}) or a.profile
    cap = W.ensure_captures(W.Params(events=n, protocol=a.protocol)) if needs_cap else None
    records = cap.meta["passes"][0]["records"] if cap else 0
    records2 = cap.meta["passes"][1]["records"] if cap else 0
    rows: list[tuple[str, str, str, str]] = []  # figure, value, target, met
    loads = [os.getloadavg()[0]]

    def met(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    res: dict = {}
    spark = None
    if (
        only & {"decode", "e2e", "baseline", "merge", "load", "flat", "tables", "peer", "asof"}
        or a.profile
    ):
        spark = session()
    with tempfile.TemporaryDirectory(prefix="ticdc-bench-") as tmpd:
        tmp = Path(tmpd)
        if "decode" in only:
            res["decode"] = measure_decode(spark, cap, a.repeat)
            loads.append(os.getloadavg()[0])
        if "e2e" in only and a.e2e_modes:
            by_mode = measure_e2e_modes(spark, cap, a.repeat, tmp)
            res["e2e"] = by_mode.pop("mirror")
            res["e2e_modes"] = by_mode
            loads.append(os.getloadavg()[0])
        elif "e2e" in only and a.e2e_dv:
            res["e2e"], res["e2e_dv"] = measure_e2e_dv(spark, cap, a.repeat, tmp)
            loads.append(os.getloadavg()[0])
        elif "e2e" in only:
            res["e2e"] = measure_e2e(spark, cap, a.repeat, tmp)
            loads.append(os.getloadavg()[0])
        if "baseline" in only:
            res["baseline"] = measure_baseline(spark, cap, a.repeat, tmp)
            loads.append(os.getloadavg()[0])
        if "merge" in only:
            res["merge"] = measure_merge(spark, merge_sizes, 10_000, a.repeat, tmp)
            loads.append(os.getloadavg()[0])
        if "load" in only:
            import initial_load as L

            print(f"load fast path == testkit's Dumpling writer on {L.verify_fast_path():,} rows")
            res["load"] = L.measure_load(spark, load_rows, a.repeat, tmp)
            loads.append(os.getloadavg()[0])
        if "flat" in only:
            import growth

            res["flat"] = growth.measure_flat(spark, flat_runs, flat_events, tmp)
            loads.append(os.getloadavg()[0])
        if "tables" in only:
            import growth

            res["tables"] = growth.measure_tables(
                spark, tables_events, follow_batch, tmp, a.tables_rounds
            )
            loads.append(os.getloadavg()[0])
        if "peer" in only:
            import sdp_peer

            res["peer"] = sdp_peer.measure_peer(spark, cap, tmp)
            loads.append(os.getloadavg()[0])
        if "asof" in only:
            import as_of_read

            res["asof"] = as_of_read.measure_asof(spark, asof_rows, a.repeat, tmp)
            loads.append(os.getloadavg()[0])
        profile = profile_e2e(spark, cap, tmp) if a.profile else None
    if spark is not None:
        spark.stop()
    if "freshness" in only:
        import freshness

        with tempfile.TemporaryDirectory(prefix="ticdc-bench-fresh-") as ftmp:
            res["freshness"] = freshness.measure_freshness(
                fresh_s, a.freshness_rate, ramp, ramp_s, 20, Path(ftmp)
            )
        loads.append(os.getloadavg()[0])
    if "lagbudget" in only:
        import lag_budget

        counts = a.budget_tables or ("20" if a.quick else "20,50,100,200,300")
        staging_tables = a.budget_staging_tables
        if staging_tables is None:
            staging_tables = 100 if a.quick else 300
        with tempfile.TemporaryDirectory(prefix="ticdc-bench-budget-") as btmp:
            res["lagbudget"] = lag_budget.measure_budget(
                a.budget_rate,
                a.budget_lag,
                a.budget_settle if a.budget_settle is not None else float(a.budget_lag),
                # The not-growing rule compares the peaks of the middle and last thirds
                # of the window: each third must hold a lag's applies at least.
                a.budget_seconds or (30.0 if a.quick else max(120.0, 3.0 * a.budget_lag)),
                tuple(int(x) for x in counts.split(",") if x),
                staging_tables,
                a.budget_staging_seconds or (20.0 if a.quick else 60.0),
                Path(btmp),
                a.budget_retention,
                a.budget_rewrite_below,
                a.budget_created,
            )
        loads.append(os.getloadavg()[0])
    if "visible" in only:
        import fresh_visible

        vspark = session()
        try:
            with tempfile.TemporaryDirectory(prefix="ticdc-bench-visible-") as vtmp:
                res["visible"] = fresh_visible.measure_visible(
                    vspark,
                    a.visible_tables,
                    a.visible_rate,
                    "1m",
                    60.0,
                    a.visible_seconds or (30.0 if a.quick else 120.0),
                    Path(vtmp) / "visible",
                )
        finally:
            vspark.stop()
        loads.append(os.getloadavg()[0])
    if "memory" in only:
        res["memory"] = [measure_memory(m, a.protocol, a.repeat, a.mem_heap) for m in mem_sizes]
        loads.append(os.getloadavg()[0])
    if "plan" in only:
        res["plan"] = measure_plan(a.repeat)

    if "decode" in res:
        rows.append(
            (
                "decode limit (plain from_json)",
                f"{records / res['decode']:,.0f} rec/s ({res['decode']:.1f}s)",
                "",
                "",
            )
        )
    if "e2e" in res:
        e = res["e2e"]
        r1 = records / e["pass1"]
        r2 = records2 / e["pass2"]
        rows.append(("e2e pass 1 (empty targets)", f"{r1:,.0f} rec/s ({e['pass1']:.1f}s)", "", ""))
        rows.append(("  its phases", phase_split(e.get("phases1")), "", ""))
        rows.append(("e2e pass 2 (populated)", f"{r2:,.0f} rec/s ({e['pass2']:.1f}s)", "", ""))
        rows.append(("  its phases", phase_split(e.get("phases2")), "", ""))
        if "e2e_dv" in res:
            d = res["e2e_dv"]
            for k, pn, label in (("pass1", 1, "empty targets"), ("pass2", 2, "populated")):
                rows.append(
                    (
                        f"e2e pass {pn} ({label}), deletion_vectors: true / default",
                        f"{d[k]:.1f}s / {e[k]:.1f}s = {d[k] / e[k]:.2f}x",
                        "",
                        "",
                    )
                )
                rows.append(("  its phases", phase_split(d.get(f"phases{pn}")), "", ""))
        for mode, d in res.get("e2e_modes", {}).items():
            for k, pn, label in (("pass1", 1, "empty targets"), ("pass2", 2, "populated")):
                rows.append(
                    (
                        f"e2e pass {pn} ({label}), mode {mode} / mirror",
                        f"{d[k]:.1f}s / {e[k]:.1f}s = {d[k] / e[k]:.2f}x",
                        "",
                        "",
                    )
                )
                rows.append(("  its phases", phase_split(d.get(f"phases{pn}")), "", ""))
        if "decode" in res:
            ratio = r1 / (records / res["decode"])
            rows.append(("e2e / decode limit", f"{ratio:.3f}", ">= 0.333", met(ratio >= 1 / 3)))
    if "baseline" in res:
        b = res["baseline"]
        rows.append(
            ("baseline pass 1", f"{records / b['pass1']:,.0f} rec/s ({b['pass1']:.1f}s)", "", "")
        )
        rows.append(
            ("baseline pass 2", f"{records2 / b['pass2']:,.0f} rec/s ({b['pass2']:.1f}s)", "", "")
        )
        if "e2e" in res:
            for k in ("pass1", "pass2"):
                ratio = b[k] / res["e2e"][k]
                rows.append(
                    (f"e2e / baseline speed, {k}", f"{ratio:.2f}x", ">= 1.0x", met(ratio >= 1.0))
                )
    if "merge" in res:
        m = res["merge"]
        small, big = merge_sizes
        for name in MERGE_LAYOUTS:
            s, g = m[(small, name)], m[(big, name)]
            ratio = g["seconds"] / s["seconds"]
            target = "<= 1.5x" if name == "clustered + range + DV" else ""
            rows.append(
                (
                    f"MERGE 10k: {big // 10**6 if big >= 10**6 else big}{'M' if big >= 10**6 else ''} vs "
                    f"{small // 10**6 if small >= 10**6 else small}{'M' if small >= 10**6 else ''} rows [{name}]",
                    f"{g['seconds']:.2f}s / {s['seconds']:.2f}s = {ratio:.2f}x "
                    f"(files {g['files_removed']}/{s['files_removed']})",
                    target,
                    met(ratio <= 1.5) if target else "",
                )
            )
    if "memory" in res:
        m1, m5 = res["memory"]
        heap = a.mem_heap or "default"
        label = f"driver peak PSS {mem_sizes[0]:,} vs {mem_sizes[1]:,} events ({heap} heap)"
        # Best of N must not hide a failure: one failed run fails the figure.
        failed = [
            (k, r)
            for k, m in zip(mem_sizes, res["memory"], strict=True)
            for r in m["runs"]
            if "error" in r
        ]
        if failed:
            k, m = failed[0]
            rows.append((label, f"FAILED at {k:,} events: {m['error']}", "<= 1.2x", met(False)))
        else:
            ratio = m5["total"] / m1["total"]
            rows.append(
                (
                    label,
                    f"{m1['total'] / 2**20:,.0f} / {m5['total'] / 2**20:,.0f} MiB = {ratio:.2f}x "
                    f"(sum of RSS {m1['rss_sum'] / 2**20:,.0f} / {m5['rss_sum'] / 2**20:,.0f})",
                    "<= 1.2x",
                    met(ratio <= 1.2),
                )
            )
            rows.append(
                (
                    "  JVM heap in those runs: committed / after a GC",
                    f"{m1['heap_committed']:,} / {m5['heap_committed']:,} MiB; "
                    f"{m1['heap_after_gc']:,} / {m5['heap_after_gc']:,} MiB",
                    "",
                    "",
                )
            )
    if "plan" in res:
        p = res["plan"]
        value, ok = (
            (f"FAILED: {p}", False)
            if isinstance(p, str)
            else (f"{p[0]:.2f}s wall, {p[1]:.2f}s CPU", p[0] < 1)
        )
        rows.append(("ticdc-sync plan (example project)", value, "< 1s", met(ok)))

    if "load" in res:
        ld = res["load"]
        ratio = ld["ticdc"] / ld["plain"]
        rows.append(
            (
                f"initial load, {ld['rows']:,} rows ({ld['files']} CSV files, "
                f"{ld['bytes'] / 2**20:,.0f} MiB)",
                f"{ld['rows'] / ld['ticdc']:,.0f} rows/s ({ld['ticdc']:.1f}s)",
                "",
                "",
            )
        )
        rows.append(
            (
                "  plain spark.read.csv + write delta",
                f"{ld['rows'] / ld['plain']:,.0f} rows/s ({ld['plain']:.1f}s)",
                "",
                "",
            )
        )
        each = "; ".join(
            f"{k} " + ", ".join(f"{x:.1f}" for x in v) for k, v in ld.get("runs", {}).items()
        )
        rows.append(
            (
                "  load / plain time (best of each, alternating)",
                f"{ratio:.2f}x" + (f" (runs, s: {each})" if each else ""),
                "<= 3x",
                "MET" if ratio <= 3 else "NOT MET",
            )
        )
        rows.append(
            (
                "  rows read back: target / plain",
                f"{ld['counts']['ticdc']:,} / {ld['counts']['plain']:,}",
                f"{ld['rows']:,}",
                met(ld["counts"]["ticdc"] == ld["rows"]),
            )
        )

    rows += growth_rows(res)
    rows += budget_rows(res)
    if "asof" in res:
        import as_of_read

        rows += as_of_read.table_rows(res["asof"])
    if "visible" in res:
        import fresh_visible

        rows += fresh_visible.table_rows(res["visible"])

    print()
    print(
        f"# {time.strftime('%Y-%m-%d')} {platform.node()} {os.cpu_count()} cores, "
        f"load avg during run {min(loads):.1f}-{max(loads):.1f}; "
        + (
            f"{n:,} row events/pass ({records:,} records pass 1, {records2:,} pass 2), "
            if cap
            else ""
        )
        + f"{a.protocol}, best of {a.repeat}; "
        f"total {time.perf_counter() - t_start:.0f}s"
    )
    w = max(len(r[0]) for r in rows) if rows else 10
    v = max(len(r[1]) for r in rows) if rows else 10
    print(f"| {'figure':<{w}} | {'value':<{v}} | target   | met     |")
    print(f"|{'-' * (w + 2)}|{'-' * (v + 2)}|----------|---------|")
    for r in rows:
        print(f"| {r[0]:<{w}} | {r[1]:<{v}} | {r[2]:<8} | {r[3]:<7} |")
    if "e2e" in res:
        print("\nphases of the best e2e pass 1 (runner output):")
        print("\n".join("  " + x for x in res["e2e"].get("log1", [])))
        print("phases of the best e2e pass 2:")
        print("\n".join("  " + x for x in res["e2e"].get("log2", [])))
    if profile:
        print("\ncProfile of one e2e pass 1 (wall time the driver spent in each call):")
        print(profile)
    (W.OUT / "last_results.json").write_text(
        json.dumps({"rows": rows, "n": n, "loads": loads}, indent=1)
    )


if __name__ == "__main__":
    main()
