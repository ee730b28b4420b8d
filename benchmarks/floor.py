"""The per-run floor: what a tiny `ticdc-sync run` costs in a warm JVM, and a poll that finds
nothing new, with the Spark jobs each one runs.

Usage: python benchmarks/floor.py [--runs 8] [--events 16] [--jobs]

A project of 3 tables (the workload's `bench.*`, Canal-JSON with the TiDB extension) over a
capture of `--events` row events in each of `--runs` passes (one run per pass, into the
targets the earlier runs left), in one `local[2]` SparkSession with the benchmarks' settings
(`run.session`) and Spark's event log on. The first run creates the staging table, the lease
table and the targets; it is warm-up and not counted. Figures, each the median of the
counted runs (with their minimum and maximum):

- **tiny run**: `runner.run` of one pass (stage, plan, the three targets' applies, sync
  points, trim);
- **empty poll**: `runner.run` when the pass holds nothing new (the capture folder as the
  last run left it): what a `--follow` poll with nothing to stage costs, and the fixed part
  of every run;

and for the last run of each kind the Spark jobs it ran, per phase label (`--jobs`: each
job with its wall time). Targets (#68): tiny run <= 1.0 s, empty poll <= 0.2 s. Not part of
the test suite; it writes only under a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_projects as BP  # noqa: E402
import run as R  # noqa: E402
import workload as W  # noqa: E402

TINY_RUN_TARGET_S = 1.0
EMPTY_POLL_TARGET_S = 0.2


def _jobs(event_dir: Path, since_ms: float, until_ms: float) -> list[tuple[str, float]]:
    """(phase label or job name, wall ms) of each job that started inside the window."""
    out = []
    starts: dict[int, tuple[float, str]] = {}
    for log in sorted(p for p in event_dir.rglob("*") if p.is_file()):
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerJobStart":
                props = e.get("Properties") or {}
                label = (
                    props.get("spark.job.description")
                    or props.get("callSite.short")
                    or props.get("spark.jobGroup.id")
                    or "?"
                )
                starts[e["Job ID"]] = (e["Submission Time"], label)
            elif kind == "SparkListenerJobEnd" and e["Job ID"] in starts:
                t0, label = starts[e["Job ID"]]
                if since_ms <= t0 <= until_ms:
                    out.append((label, e["Completion Time"] - t0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8, help="counted runs of each kind")
    ap.add_argument("--events", type=int, default=16, help="row events per pass")
    ap.add_argument("--jobs", action="store_true", help="list every job of the last runs")
    args = ap.parse_args(argv)

    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner

    passes = args.runs + 1
    cap = W.ensure_captures(
        W.Params(
            events=args.events,
            passes=passes,
            hot_keys=50,
            partitions=2,
            watermark_every=8,
            ddl_count=0,
        )
    )
    events = HERE / "out" / "floor-events"
    spark = R.event_log_session(events)
    root = Path(tempfile.mkdtemp(prefix="floor-")) / "p"
    BP.make_project(root, cap)
    project = load_project(root)
    quiet = lambda s: None  # noqa: E731
    tiny, empty = [], []
    windows: dict[str, tuple[float, float]] = {}
    for n in range(1, passes + 1):
        BP.point_captures(root, cap, n)
        t0 = time.time()
        assert runner.run(project, spark=spark, out=quiet) == 0
        t1 = time.time()
        assert runner.run(project, spark=spark, out=quiet) == 0  # nothing new
        t2 = time.time()
        if n == 1:
            continue  # creates the state tables and targets: warm-up
        tiny.append(t1 - t0)
        empty.append(t2 - t1)
        windows = {"tiny run": (t0 * 1000, t1 * 1000), "empty poll": (t1 * 1000, t2 * 1000)}
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    spark.stop()  # flushes the event log
    rows = [
        ("tiny run", tiny, TINY_RUN_TARGET_S),
        ("empty poll", empty, EMPTY_POLL_TARGET_S),
    ]
    print(f"per-run floor: {args.events} row events per pass over 3 tables, {args.runs} runs")
    for name, xs, target in rows:
        med = statistics.median(xs)
        met = "MET" if med <= target else "NOT MET"
        print(
            f"  {name:<11} median {med:.2f} s (min {min(xs):.2f}, max {max(xs):.2f})"
            f"  target <= {target} s: {met}"
        )
        jobs = _jobs(events, *windows[name])
        by = Counter(label for label, _ in jobs)
        print(
            f"    {len(jobs)} Spark job(s) in the last one: "
            + ", ".join(f"{label} x{k}" for label, k in sorted(by.items()))
        )
        if args.jobs:
            for label, ms in jobs:
                print(f"      {ms:7.0f} ms  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
