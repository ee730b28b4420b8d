"""The two ways a small target's segment lands, side by side: rewritten (one Spark write, one
delta-rs commit: `spark.apply.rewrite`) against merged (`rewrite_below: 0`: Delta's MERGE),
on the tables row's batch: a `--follow`-sized batch of `--batch` events into populated
targets over 3 tables and over `--tables` (50).

Usage: python benchmarks/write_paths.py [--tables 50] [--batch 10000] [--rounds 2]

Four projects (3 and N tables, each path), each filled by its pass 1 (not timed); then each
round runs the next batch into all four, the order rotating each round, in one JVM (the
benchmarks' session). Figures per path: the best batch time at 3 and at N tables, the
fixed cost per added target ((N - 3)-table difference / (N - 3)), and the rewrite's figure
over the MERGE's. Row counts checked against the generator. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as R  # noqa: E402
import workload as W  # noqa: E402
from bench_projects import make_project  # noqa: E402
from growth import _check_counts, _run_pass  # noqa: E402

PATHS = {"rewrite": None, "merge": "0"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=50)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    spark = R.session()
    counts = (3, a.tables)
    caps = {
        n: W.ensure_captures(W.Params(events=a.batch, passes=1 + a.rounds, ddl_count=0, tables=n))
        for n in counts
    }
    with tempfile.TemporaryDirectory(prefix="write-paths-") as tmp:
        roots = {
            (path, n): make_project(Path(tmp) / f"{path}-{n}", caps[n], rewrite_below=below)
            for path, below in PATHS.items()
            for n in counts
        }
        for (_path, n), root in roots.items():
            _run_pass(spark, root, caps[n], 1)
        runs: dict[tuple[str, int], list[float]] = {k: [] for k in roots}
        order = list(roots)
        for i in range(a.rounds):
            for key in order[i % len(order) :] + order[: i % len(order)]:
                path, n = key
                dt, _ = _run_pass(spark, roots[key], caps[n], 2 + i)
                runs[key].append(dt)
                print(f"  {path} {n} tables, batch {i + 1}: {dt:.1f}s", flush=True)
        for (path, n), root in roots.items():
            _check_counts(spark, root, caps[n], 1 + a.rounds, f"{path} over {n} tables")
    per_target = {}
    for path in PATHS:
        small, large = min(runs[(path, 3)]), min(runs[(path, a.tables)])
        per_target[path] = (large - small) / (a.tables - 3)
        print(
            f"{path}: {a.batch:,}-event batch over 3 / {a.tables} tables {small:.1f} / "
            f"{large:.1f} s; per added target {per_target[path]:.3f} s "
            f"(runs: {', '.join(f'{k[1]}: {v}' for k, v in runs.items() if k[0] == path)})"
        )
    print(f"rewrite / merge per added target: {per_target['rewrite'] / per_target['merge']:.2f}x")


if __name__ == "__main__":
    main()
