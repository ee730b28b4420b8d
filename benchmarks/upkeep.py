"""Targets' maintenance by the run: disk over the live rows' size after N runs, with and without.

    python benchmarks/upkeep.py [--runs 8] [--events 20000] [--retain 0]

Two projects over the same capture (the `flat` workload of growth.py: N passes of one stream
of row events over 3 tables, each pass a plain `ticdc_sync.spark.runner.run`, as a scheduled
run or a follower's polls would apply it): one with `maintenance: {enabled: false}` (what
runs did before), one with `maintenance: {retain: R, vacuum_every: 0, compact_small_files:
8}` (each run's end looks at every target: compaction when due, VACUUM of what was removed
more than R ago, wall time). Their runs alternate, pass by pass. Figures: the targets' disk
over their live rows written once to fresh Delta tables, in each project; each run's time
(maintenance included), and the last over the second. The default R is 0 (each run's end
deletes every file removed): Delta's VACUUM keeps whole hours, so any R short enough for
this benchmark's minutes keeps them all (a retention under an hour is sent as an hour, as
`plan` notes). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import workload as W
from growth import _check_counts, _du, _run_pass


def _project(root: Path, maintenance: str) -> None:
    (root / "ticdc_sync.yml").write_text(
        "name: bench\nprofile: bench\nstaging:\n  retention: 1m\n"
        f"defaults:\n  maintenance:\n{maintenance}"
    )


def measure(spark, runs: int, events: int, retain: str, tmp: Path) -> dict:
    from bench_projects import make_project

    from ticdc_sync.warehouse.locations import target_location

    cap = W.ensure_captures(W.Params(events=events, passes=runs, ddl_count=0))
    settings = {
        "off": "    enabled: false\n",
        "on": f"    retain: {retain}\n    vacuum_every: 0\n    compact_small_files: 8\n",
    }
    roots = {}
    for name, text in settings.items():
        roots[name] = make_project(tmp / name, cap)
        _project(roots[name], text)
    times: dict[str, list[float]] = {"off": [], "on": []}
    for n in range(1, runs + 1):
        for name in ("off", "on") if n % 2 else ("on", "off"):
            dt, _ = _run_pass(spark, roots[name], cap, n)
            times[name].append(dt)
            print(f"  run {n}/{runs} maintenance {name}: {dt:.1f}s", flush=True)
    out: dict = {"runs": runs, "events": events, "retain": retain, "times": times}
    for name, root in roots.items():
        _check_counts(spark, root, cap, runs, f"maintenance {name}")
        wh = root / "warehouse"
        disk = live = 0
        for s in W.bench_tables():
            loc = target_location(str(wh), s.table)
            disk += _du(Path(loc))
            copy = tmp / f"{name}-live" / s.table
            spark.read.format("delta").load(loc).write.format("delta").save(str(copy))
            live += _du(copy)
        out[name] = {"targets": disk, "live": live, "ratio": disk / live}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="targets' maintenance: disk over live rows")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--retain", default="0")
    args = ap.parse_args()
    from run import session

    spark = session()
    tmp = Path(tempfile.mkdtemp(prefix="upkeep-"))
    try:
        t0 = time.perf_counter()
        res = measure(spark, args.runs, args.events, args.retain, tmp)
        res["seconds"] = time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name in ("off", "on"):
        r, ts = res[name], res["times"][name]
        print(
            f"maintenance {name}: targets {r['targets'] / 2**20:.1f} MiB on disk / "
            f"{r['live'] / 2**20:.1f} MiB live = {r['ratio']:.1f}x; run {args.runs} / run 2 "
            f"{ts[-1]:.1f} / {ts[1]:.1f} s = {ts[-1] / ts[1]:.2f}x"
        )
    print(json.dumps(res))


if __name__ == "__main__":
    main()
