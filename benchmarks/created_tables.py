"""Many tables the way a changefeed brings them: each created by a CREATE TABLE in the stream.

Usage: python benchmarks/created_tables.py [--events 30000] [--tables 3,150,1000]
                                           [--alter-tables 3,300] [--plan-tables 1000]
                                           [--only run,alter,plan]

- run: `--events` Canal-JSON row inserts spread round-robin over N tables, each created by a
  CREATE TABLE at its own commit_ts before its rows (`testkit.created_tables`), one
  `runner.run` into an empty warehouse, per table count of `--tables`, each on a fresh
  project, in one JVM (the benchmarks' session, `run.session`). Ratio of each count's time
  to the smallest's (issue target: 150 and 1,000 tables <= 2x 3 tables).
- alter: the same, N tables of `--alter-tables`, each created, then an ALTER TABLE ADD
  COLUMN on each, then one row each: one run (target: 300 <= 2x 3).
- plan: `ticdc-sync plan` (a child process, no JVM) of a project whose `--plan-tables`
  tables are seeded by CREATE TABLEs under schema/, and its peak memory (the child's max
  RSS). Target: <= 5 s.
Row counts are checked against the stream. One repetition: on a shared machine compare the
ratios. A tiny run first warms the JVM up (not counted). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from peak_memory import PeakRss, driver_pids  # noqa: E402

from testkit.created_tables import DB, CreatedTables  # noqa: E402
from tests.spark.engine_harness import make_project, write_captures  # noqa: E402

ROUTE = f'  - upstream: "{DB}.*"\n    name: "{{table}}"\n'


# Per label: the driver's peak resident memory over its run, MiB ({"python", "jvm"}, total).
PEAKS: dict[str, tuple[dict[str, float], float]] = {}


def one_run(spark, work: Path, stream: CreatedTables, label: str) -> float:
    """Seconds of one `runner.run` of `stream` into a fresh project; rows checked. The
    driver's peak memory over it goes to `PEAKS`."""
    from deltalake import DeltaTable

    from ticdc_sync.project.load import load_project
    from ticdc_sync.spark import runner
    from ticdc_sync.warehouse.locations import target_location, warehouse_path

    root = work / label
    shutil.rmtree(root, ignore_errors=True)
    make_project(root, protocol="canal-json", tables=ROUTE)
    write_captures(root, "t", stream.records())
    project = load_project(root)
    errors: list[str] = []
    t0 = time.monotonic()
    with PeakRss(driver_pids(spark)) as peak:
        code = runner.run(
            project, spark=spark, out=lambda s: errors.append(s) if "error" in s else None
        )
    took = time.monotonic() - t0
    PEAKS[label] = (dict(peak.peak), peak.total)
    if code != 0:
        raise SystemExit(f"{label}: run failed: {errors[:3]}")
    wh = warehouse_path(project)
    rows = sum(
        DeltaTable(target_location(wh, n)).to_pyarrow_table().num_rows for n in stream.names()
    )
    if rows != stream.events:
        raise SystemExit(f"{label}: {rows} rows landed, {stream.events} expected")
    return took


def measure_runs(
    spark, work: Path, counts: list[int], events: int, alter: bool
) -> dict[int, float]:
    out = {}
    for n in counts:
        stream = CreatedTables(tables=n, events=events, add_column=alter)
        label = f"{'alter' if alter else 'run'}-{n}"
        out[n] = one_run(spark, work, stream, label)
        mem, total = PEAKS[label]
        print(
            f"{label}: {events} events over {n} created tables: {out[n]:.1f}s; driver peak "
            f"RSS {total:.0f} MiB (python {mem['python']:.0f}, JVM {mem['jvm']:.0f})",
            flush=True,
        )
    return out


def measure_plan(work: Path, tables: int) -> tuple[float, float, float]:
    """Wall and CPU seconds, and peak RSS (MiB), of `ticdc-sync plan` over `tables` seeded
    tables in a child process."""
    root = work / f"plan-{tables}"
    shutil.rmtree(root, ignore_errors=True)
    sql = "".join(
        f"CREATE TABLE {DB}.{n} (id INT PRIMARY KEY, v VARCHAR(20), n BIGINT);\n"
        for n in CreatedTables(tables=tables, events=0).names()
    )
    make_project(root, protocol="canal-json", tables=ROUTE)
    (root / "schema").mkdir(exist_ok=True)
    (root / "schema" / f"{DB}.sql").write_text(sql)
    cmd = [sys.executable, "-m", "ticdc_sync.commands.cli", "plan", "--project", str(root)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 2):
        raise SystemExit(f"plan failed: {r.stderr.strip().splitlines()[-1:]}")
    if f"Targets ({tables})" not in r.stdout:
        raise SystemExit(f"plan does not show {tables} targets")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu, after.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--tables", default="3,150,1000")
    ap.add_argument("--alter-tables", default="3,300")
    ap.add_argument("--plan-tables", type=int, default=1000)
    ap.add_argument("--only", default="run,alter,plan")
    a = ap.parse_args()
    only = set(a.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="ticdc-created-"))
    rows: list[str] = []
    try:
        if "plan" in only:
            took, cpu, rss = measure_plan(work, a.plan_tables)
            rows.append(
                f"plan over {a.plan_tables} tables (no JVM): {took:.2f}s wall, {cpu:.2f}s CPU, "
                f"peak RSS {rss:.0f} MiB (target <= 5 s)"
            )
            print(rows[-1], flush=True)
        if only & {"run", "alter"}:
            import run as R

            spark = R.session()
            # A warm-up run (not counted): the first run in a JVM pays its JIT and class loading.
            one_run(spark, work, CreatedTables(tables=3, events=30, add_column=True), "warm-up")
            if "run" in only:
                counts = [int(x) for x in a.tables.split(",")]
                t = measure_runs(spark, work, counts, a.events, alter=False)
                base = t[counts[0]]
                for n in counts[1:]:
                    rows.append(
                        f"{a.events} events over {n} vs {counts[0]} created tables: "
                        f"{t[n]:.1f}s / {base:.1f}s = {t[n] / base:.2f}x (target <= 2x)"
                    )
            if "alter" in only:
                counts = [int(x) for x in a.alter_tables.split(",")]
                t = {}
                for n in counts:
                    stream = CreatedTables(tables=n, events=n, add_column=True)
                    t[n] = one_run(spark, work, stream, f"alter-{n}")
                    mem, total = PEAKS[f"alter-{n}"]
                    print(
                        f"alter-{n}: created, ADD COLUMN, one row each: {t[n]:.1f}s; driver "
                        f"peak RSS {total:.0f} MiB (JVM {mem['jvm']:.0f})",
                        flush=True,
                    )
                base = t[counts[0]]
                for n in counts[1:]:
                    rows.append(
                        f"CREATE + ADD COLUMN + one row on {n} vs {counts[0]} tables: "
                        f"{t[n]:.1f}s / {base:.1f}s = {t[n] / base:.2f}x (target <= 2x)"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
