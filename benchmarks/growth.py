"""Benchmarks of cost as things grow: history (many runs into one project) and table count.

`measure_flat`: `runs` consecutive `ticdc_sync.spark.runner.run`s of `events` row events
each into the same project (files transport; each run's capture is the next pass of one
stream, as a scheduled `run` would find it). The project sets `staging.retention: 1m`
(TiDB time; the generator's clock advances about 1 ms per transaction, so a pass spans
seconds of TiDB time and the staged events of the last few passes are kept): runs trim
and compact the staging table as the README describes. Figures: each run's time, the
last run's time over the second's, and the warehouse's disk use after the last run
against the size of the targets' live rows written once to fresh Delta tables.

`measure_tables`: the same stream of `events` row events spread over 3 tables and over
300 (workload.bench_tables), each into a fresh project; and a `--follow`-sized batch
(`batch` events, into populated targets) over 50 tables beside the same over 3.

Target row counts are checked against the generator's live rows after the runs. Runs in
the benchmark's shared SparkSession. Not part of the test suite.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import workload as W


def _du(path: Path) -> int:
    """Bytes of the files under `path` (what the warehouse holds on disk)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            # A file removed while walking (a run's temp file) counts as nothing.
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def _run_pass(spark, root: Path, cap: W.Capture, n: int) -> tuple[float, list[str]]:
    from run import point_captures

    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner

    point_captures(root, cap, n)
    lines: list[str] = []
    t0 = time.perf_counter()
    code = runner.run(load_project(root), spark=spark, out=lines.append)
    dt = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"run of pass {n} failed:\n" + "\n".join(lines))
    return dt, lines


def _check_counts(spark, root: Path, cap: W.Capture, n: int, what: str) -> None:
    from run import target_counts

    want = cap.meta["passes"][n - 1]["live_rows"]
    got = target_counts(spark, root / "warehouse", cap.params.tables)
    if got != want:
        diff = {t: (got.get(t), c) for t, c in want.items() if got.get(t) != c}
        raise SystemExit(f"{what}: target rows differ from the generator's (got, want): {diff}")


def measure_flat(spark, runs: int, events: int, tmp: Path) -> dict:
    from run import make_project

    from ticdc_sync.locations import target_location

    cap = W.ensure_captures(W.Params(events=events, passes=runs, ddl_count=0))
    root = make_project(tmp / "flat", cap)
    (root / "ticdc_sync.yml").write_text("name: bench\nprofile: bench\nstaging:\n  retention: 1m\n")
    times = []
    for n in range(1, runs + 1):
        dt, _ = _run_pass(spark, root, cap, n)
        times.append(dt)
        print(f"  flat run {n}/{runs}: {dt:.1f}s", flush=True)
    _check_counts(spark, root, cap, runs, f"flat run {runs}")
    wh = root / "warehouse"
    own = 0
    targets = 0
    for s in W.bench_tables():
        loc = target_location(str(wh), s.table)
        targets += _du(Path(loc))
        copy = tmp / "flat-live" / s.table
        spark.read.format("delta").load(loc).write.format("delta").save(str(copy))
        own += _du(copy)
    out = {
        "runs": runs,
        "events": events,
        "times": times,
        "warehouse": _du(wh),
        "targets": targets,
        "internal": _du(wh / "_ticdc_sync"),
        "live": own,
    }
    return out


def measure_tables(spark, events: int, batch: int, tmp: Path) -> dict:
    from run import make_project

    out: dict = {}
    for n in (3, 50):
        # Pass 1 creates and fills the targets; pass 2 is the batch a `--follow` turn sees.
        # These run first: the JVM's first runs are slower, and the 3 vs 300 pair must
        # not share that unevenly.
        cap = W.ensure_captures(W.Params(events=batch, passes=2, ddl_count=0, tables=n))
        root = make_project(tmp / f"batch-{n}", cap)
        _run_pass(spark, root, cap, 1)
        dt, lines = _run_pass(spark, root, cap, 2)
        print(f"  a {batch:,}-event batch over {n} populated tables: {dt:.1f}s", flush=True)
        _check_counts(spark, root, cap, 2, f"batch over {n} tables")
        out[f"batch{n}"] = {"seconds": dt, "log": lines}
    for n in (3, 300):
        cap = W.ensure_captures(W.Params(events=events, passes=1, ddl_count=0, tables=n))
        root = make_project(tmp / f"tables-{n}", cap)
        dt, lines = _run_pass(spark, root, cap, 1)
        print(f"  {events:,} events over {n} tables: {dt:.1f}s", flush=True)
        _check_counts(spark, root, cap, 1, f"{n} tables")
        out[n] = {"seconds": dt, "records": cap.meta["passes"][0]["records"], "log": lines}
    out["events"], out["batch"] = events, batch
    return out
