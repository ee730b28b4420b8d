"""Where the initial load's time goes (#37): its Spark jobs, and the task CPU of each step
of the one job that reads, parses, types and writes the rows.

Usage: python benchmarks/load_profile.py [--load-rows 300000] [--rounds 2] [--steps]

One local[2] SparkSession (`run.py`'s settings) with Spark's event log on. Each round runs
the ticdc-sync load (`runner.run` on the benchmark's project, `initial_load.py`), then the
plain `read.csv` + Delta write. For the last round it lists every job (wall, task time in
core-seconds, task CPU, first stage), then each side's biggest job (the one that reads,
types and writes the rows) against the rest of its wall time (the other jobs and the
driver's own work between them).

`--steps` also runs cuts of the load's big job, each written to Spark's `noop` sink (no
Delta write), `--repeat` times: the lines alone; with Spark's CSV parse of them; with the
proof of that parse (`_written`); the raw values (`parse_fields`, the exact parser for the
unproven lines), and the exact parser alone for comparison; the converted values; the
typing with its fit checks. The difference between two cuts is that step's cost. Each
cut's least task CPU is printed (on a shared host, CPU time varies far less than wall).

Measures, never judges a target; not part of the test suite or of the benchmark table. The
event log is kept under `benchmarks/out/load-profile-events/`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import initial_load as L  # noqa: E402
import run as R  # noqa: E402
import timeline as T  # noqa: E402

EVENT_DIR = HERE / "out" / "load-profile-events"


def _steps(spark, export: Path, repeat: int) -> list[tuple[str, float, float]]:
    """Each cut of the load's frame written to `noop`, `repeat` times: (cut, start, end)."""
    from pyspark.sql import functions as F

    from ticdc_sync.codecs import dumpling as dc
    from ticdc_sync.core import datatypes
    from ticdc_sync.core.model import DumplingOptions, ExportFiletype, SourceOptions
    from ticdc_sync.core.sqlgen import quote
    from ticdc_sync.spark.apply import load as ld

    o = DumplingOptions(filetype=ExportFiletype.CSV)
    paths = sorted(str(p) for p in export.glob("bench.accounts.*.csv"))
    t = L._table()
    bare = [dc.written_bare(c) for c in t.columns]
    n = len(bare)
    lines = ld.read_lines(spark, paths, header=True)
    schema = ", ".join(f"__f{i} STRING" for i in range(n))
    opts = {**ld.FAST_OPTIONS, "sep": ",", "quote": '"', "nullValue": "\\N"}
    fast = lines.select("*", F.from_csv("line", schema, opts).alias("__fast"))
    written = ld._written([F.col("__fast")[f"__f{i}"] for i in range(n)], bare, o)
    proven = fast.select("*", F.when(written == F.col("line"), F.col("__fast")).alias("__p"))
    parsed = ld.parse_fields(lines, o, bare)
    exact = ld.parse_fields(lines, o, bare, fast=False)
    raws = {c.name: f"__r{i}" for i, c in enumerate(t.columns)}
    target_cols = [(c.name, datatypes.delta_type(c)) for c in t.columns]
    converted, typing = ld._typing(SimpleNamespace(schema=t), target_cols, o, raws)
    typed = (
        parsed.select("*", F.lit(None).cast("string").alias("__bad"))
        .selectExpr("line", "__bad", *raws.values(), *converted)
        .selectExpr("line", *typing)
    )
    values = parsed.selectExpr(
        *[
            f"{dc.value_sql(c, quote(raws[c.name]), SourceOptions())} AS v{i}"
            for i, c in enumerate(t.columns)
        ]
    )
    cuts = [
        ("lines", lines),
        ("+ from_csv", fast),
        ("+ proof (_written)", proven),
        ("parse_fields (fast)", parsed),
        ("parse_fields (exact only)", exact),
        ("+ values (no fit checks)", values),
        ("+ typing and fit checks", typed),
    ]
    out = []
    for label, df in cuts:
        for _ in range(repeat):
            t0 = time.time()
            df.write.format("noop").mode("overwrite").save()
            out.append((label, t0 * 1000, time.time() * 1000))
    return out


def _step_table(windows: list[tuple[str, float, float]]) -> list[str]:
    """Each step's best wall time and least task CPU over its repetitions."""
    jobs = T.read_jobs(EVENT_DIR)
    best: dict[str, tuple[float, float]] = {}
    for label, s, e in windows:
        cpu = sum(j.cpu_ms for j in jobs if j.start >= s and j.end <= e) / 1000
        w, c = best.get(label, (float("inf"), float("inf")))
        best[label] = (min(w, (e - s) / 1000), min(c, cpu))
    return [f"  step {k:<28} wall {w:6.2f} s  task CPU {c:6.2f} s" for k, (w, c) in best.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description="the initial load's jobs and steps")
    ap.add_argument("--load-rows", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2, help="the last round is reported")
    ap.add_argument("--steps", action="store_true", help="also time each step (noop sink)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each step")
    ap.add_argument("--conf", action="append", default=[], help="extra session conf, k=v")
    a = ap.parse_args()
    export = L.ensure_export(a.load_rows)
    spark = R.event_log_session(EVENT_DIR, dict(kv.split("=", 1) for kv in a.conf))
    tmp = Path(tempfile.mkdtemp(prefix="load-profile-"))
    window = (0.0, 0.0)
    res: dict = {}
    try:
        for _ in range(a.rounds):
            t0 = time.time()
            # One repetition runs ticdc-sync first, then plain.
            res = L.measure_load(spark, a.load_rows, 1, tmp)
            window = (t0 * 1000, time.time() * 1000)
            print(f"  ticdc {res['ticdc']:.1f} s, plain {res['plain']:.1f} s", flush=True)
        windows = _steps(spark, export, a.repeat) if a.steps else []
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for line in _step_table(windows):
        print(line)
    if not a.rounds:
        return
    jobs = T.read_jobs(EVENT_DIR)
    within = [j for j in jobs if j.start >= window[0] and j.end <= window[1]]
    print(f"last round, ticdc-sync then plain, {a.load_rows:,} rows:")
    for line in T.job_list(T.Interval("round", window[0], window[1], within)):
        print(line)
    # measure_load times the run alone; the read-back count after it starts before plain.
    split = window[0] + res["ticdc"] * 1000
    ticdc = [j for j in within if j.end <= split]
    big = max(ticdc, key=lambda j: j.core_ms)
    plain = max((j for j in within if j.start >= split), key=lambda j: j.core_ms)
    print(
        f"ticdc-sync: {res['ticdc']:.1f} s wall; its biggest job {(big.end - big.start) / 1000:.1f}"
        f" s ({big.core_ms / 1000:.1f} core-s, {big.cpu_ms / 1000:.1f} CPU-s); its other "
        f"{len(ticdc) - 1} jobs {sum(j.core_ms for j in ticdc if j is not big) / 1000:.1f} "
        f"core-s; wall outside the biggest job {res['ticdc'] - (big.end - big.start) / 1000:.1f} s"
    )
    print(
        f"plain: {res['plain']:.1f} s wall; its biggest job {(plain.end - plain.start) / 1000:.1f}"
        f" s ({plain.core_ms / 1000:.1f} core-s, {plain.cpu_ms / 1000:.1f} CPU-s)"
    )


if __name__ == "__main__":
    main()
