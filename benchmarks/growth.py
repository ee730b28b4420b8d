"""Benchmarks of cost as things grow: history (many runs into one project) and table count.

`measure_flat`: `runs` consecutive `ticdc_sync.spark.runner.run`s of `events` row events
each into the same project (files transport; each run's capture is the next pass of one
stream, as a scheduled `run` would find it). The project sets `staging.retention: 1m`
(TiDB time; the generator's clock advances about 1 ms per transaction, so a pass spans
seconds of TiDB time and the staged events of the last few passes are kept): runs trim
and compact the staging table as the README describes. Figures: each run's time, the
last run's time over the second's, and the warehouse's disk use after the last run
against the size of the targets' live rows written once to fresh Delta tables.

`measure_tables`: a `--follow`-sized batch (`batch` events, into populated targets) over 50
tables beside the same over 3, and the same stream of `events` row events spread over 3
tables and over 300 (workload.bench_tables), each into a fresh project; every pair
alternating, `rounds` times.

Target row counts are checked against the generator's live rows after the runs. Runs in
the benchmark's shared SparkSession. Not part of the test suite.
"""

from __future__ import annotations

import contextlib
import os
import shutil
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
    from bench_projects import point_captures

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
    from bench_projects import target_counts

    want = cap.meta["passes"][n - 1]["live_rows"]
    got = target_counts(spark, root / "warehouse", cap.params.tables)
    if got != want:
        diff = {t: (got.get(t), c) for t, c in want.items() if got.get(t) != c}
        raise SystemExit(f"{what}: target rows differ from the generator's (got, want): {diff}")


def measure_flat(spark, runs: int, events: int, tmp: Path) -> dict:
    from bench_projects import make_project

    from ticdc_sync.warehouse.locations import target_location

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


def measure_tables(spark, events: int, batch: int, tmp: Path, rounds: int = 2) -> dict:
    """The two table-count pairs, each measured `rounds` times, alternating (the order flips
    each round, so the JVM's warm-up and the host's load fall on both sides); each figure
    is the best of its runs, and every run's time is kept."""
    from bench_projects import make_project

    out: dict = {"events": events, "batch": batch, "rounds": rounds}
    # A `--follow`-sized batch into populated targets: pass 1 creates and fills them (not
    # timed); passes 2.. are the batches, one per round, alternating between 3 and 50 tables.
    # These run first: the JVM's first runs are slower, and the 3 vs 300 pair must not share
    # that unevenly.
    caps = {
        n: W.ensure_captures(W.Params(events=batch, passes=1 + rounds, ddl_count=0, tables=n))
        for n in (3, 50)
    }
    roots = {n: make_project(tmp / f"batch-{n}", caps[n]) for n in (3, 50)}
    for n in (3, 50):
        _run_pass(spark, roots[n], caps[n], 1)
    runs: dict[int, list[float]] = {3: [], 50: []}
    for i in range(rounds):
        for n in (3, 50) if i % 2 == 0 else (50, 3):
            dt, lines = _run_pass(spark, roots[n], caps[n], 2 + i)
            print(
                f"  a {batch:,}-event batch over {n} populated tables #{i + 1}: {dt:.1f}s",
                flush=True,
            )
            runs[n].append(dt)
            if dt == min(runs[n]):
                out[f"batch{n}"] = {"seconds": dt, "log": lines}
    for n in (3, 50):
        _check_counts(spark, roots[n], caps[n], 1 + rounds, f"batch over {n} tables")
        out[f"batch{n}"]["runs"] = runs[n]
    # The same stream over 3 and over 300 tables, each run into a fresh project (none:
    # the batch pair only).
    runs = {3: [], 300: []}
    for i in range(rounds if events else 0):
        for n in (3, 300) if i % 2 == 0 else (300, 3):
            cap = W.ensure_captures(W.Params(events=events, passes=1, ddl_count=0, tables=n))
            root = make_project(tmp / f"tables-{n}-{i}", cap)
            dt, lines = _run_pass(spark, root, cap, 1)
            print(f"  {events:,} events over {n} tables #{i + 1}: {dt:.1f}s", flush=True)
            _check_counts(spark, root, cap, 1, f"{n} tables")
            runs[n].append(dt)
            if dt == min(runs[n]):
                out[n] = {"seconds": dt, "records": cap.meta["passes"][0]["records"], "log": lines}
            shutil.rmtree(root, ignore_errors=True)
    for n in (3, 300) if events else ():
        out[n]["runs"] = runs[n]
    return out
