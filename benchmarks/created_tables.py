"""Many tables the way a changefeed brings them: each created by a CREATE TABLE in the stream.

Usage: python benchmarks/created_tables.py [--events 30000] [--tables 3,150,1000]
                                           [--alter-tables 3,300] [--plan-tables 3,1000]
                                           [--only run,alter,plan]
                                           [--plan-from DIR ...] [--plan-repeat 3]
                                           [--plan-bytecode cached|env]
                                           [--replan-tables 100,300]

- run: `--events` Canal-JSON row inserts spread round-robin over N tables, each created by a
  CREATE TABLE at its own commit_ts before its rows (`testkit.created_tables`), one
  `runner.run` into an empty warehouse, per table count of `--tables`, each on a fresh
  project, in one JVM (the benchmarks' session, `run.session`). Ratio of each count's time
  to the smallest's (issue target: 150 and 1,000 tables <= 2x 3 tables).
- alter: the same, N tables of `--alter-tables`, each created, then an ALTER TABLE ADD
  COLUMN on each, then one row each: one run (target: 300 <= 2x 3).
- plan: `ticdc-sync plan` (a child process, no JVM) of a project per count of `--plan-tables`
  (1000), its tables seeded by CREATE TABLEs under schema/, and its peak memory (the child's max
  RSS), and how long it waited for a CPU (its threads' run-queue time, from
  /proc/<pid>/task/*/schedstat at exit): on a shared host, wall is CPU plus that wait.
  `--plan-from DIR` (repeatable): the same plan from that checkout too (a `git archive` of
  an earlier commit, say), the codes alternating, `--plan-repeat` rounds, medians and their
  ratio to this checkout's. `--plan-bytecode cached` (the default): the children compile
  the package once into a cache of their own (PYTHONPYCACHEPREFIX in the work folder, a
  warm-up run per checkout, not counted), as an installed package's .pyc files are;
  `env`: as the environment says (PYTHONDONTWRITEBYTECODE=1 recompiles every module of the
  package at each start). Target: <= 5 s.
- replan (not in the default `--only`): what a run's loop spends planning again after each
  apply, without Spark: N tables of `--replan-tables` created by CREATE TABLEs in the
  staged state, then N applies in turn (each target's new state and the versions it
  records, as the loop folds them), a plan after each; a whole `build_plan` each time (what
  the runner did) against one `plan.Planner`. Both plans compared after every apply.
Row counts are checked against the stream. One repetition: on a shared machine compare the
ratios. A tiny run first warms the JVM up (not counted). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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


# The child runs the CLI as `python -m ticdc_sync.commands.cli` would, and at exit writes
# its threads' on-CPU and run-queue nanoseconds (Linux schedstat) to stderr.
_LAUNCH = """
import atexit, os, runpy, sys
def _sched():
    cpu = wait = 0
    for t in os.listdir("/proc/self/task"):
        try:
            a = open(f"/proc/self/task/{t}/schedstat").read().split()
        except OSError:
            continue
        cpu, wait = cpu + int(a[0]), wait + int(a[1])
    sys.stderr.write(f"\\nSCHEDSTAT {cpu} {wait}\\n")
atexit.register(_sched)
sys.argv = ["ticdc-sync", *sys.argv[1:]]
runpy.run_module("ticdc_sync.commands.cli", run_name="__main__", alter_sys=True)
"""


def plan_project(work: Path, tables: int) -> Path:
    """A project whose `tables` tables are seeded by CREATE TABLEs under schema/."""
    root = work / f"plan-{tables}"
    shutil.rmtree(root, ignore_errors=True)
    sql = "".join(
        f"CREATE TABLE {DB}.{n} (id INT PRIMARY KEY, v VARCHAR(20), n BIGINT);\n"
        for n in CreatedTables(tables=tables, events=0).names()
    )
    make_project(root, protocol="canal-json", tables=ROUTE)
    (root / "schema").mkdir(exist_ok=True)
    (root / "schema" / f"{DB}.sql").write_text(sql)
    return root


def measure_plan(
    root: Path, tables: int, code: Path = REPO, pycache: Path | None = None
) -> dict[str, float]:
    """Wall and CPU seconds, the seconds its threads waited for a CPU, and peak RSS (MiB)
    of `ticdc-sync plan` of `root` in a child process running the checkout `code`.
    `pycache`: where the child keeps compiled modules (None: as the environment says)."""
    cmd = [sys.executable, "-c", _LAUNCH, "plan", "--project", str(root)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")])),
    }
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        # cwd: the child's first import path (`-c` puts it before PYTHONPATH).
        child = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=code)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU and peak RSS
        took = time.monotonic() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode not in (0, 2):
        raise SystemExit(f"plan failed: {stderr.strip().splitlines()[-1:]}")
    if f"Targets ({tables})" not in stdout:
        raise SystemExit(f"plan does not show {tables} targets")
    sched = [ln.split() for ln in stderr.splitlines() if ln.startswith("SCHEDSTAT ")]
    return {
        "wall": took,
        "cpu": usage.ru_utime + usage.ru_stime,
        "waited": int(sched[-1][2]) / 1e9 if sched else float("nan"),
        "rss": usage.ru_maxrss / 1024,
    }


def plan_rows(work: Path, tables: int, others: list[Path], repeat: int, bytecode: str) -> list[str]:
    """The plan rows: this checkout's plan, and each of `others`', alternating."""
    root = plan_project(work, tables)
    codes = [REPO, *others]
    caches = {
        c: work / f"pycache-{i}" if bytecode == "cached" else None for i, c in enumerate(codes)
    }
    if bytecode == "cached":
        for c in codes:
            measure_plan(root, tables, c, caches[c])  # compiles the package: not counted
    runs: dict[Path, list[dict[str, float]]] = {c: [] for c in codes}
    for i in range(repeat):
        for c in codes[i % len(codes) :] + codes[: i % len(codes)]:
            runs[c].append(measure_plan(root, tables, c, caches[c]))
    med = {c: {k: statistics.median(m[k] for m in ms) for k in ms[0]} for c, ms in runs.items()}
    rows = []
    for c in codes:
        m = med[c]
        rows.append(
            f"plan over {tables} tables (no JVM, bytecode {bytecode}) from {c}: median of "
            f"{repeat}: {m['wall']:.2f}s "
            f"wall = {m['cpu']:.2f}s CPU + {m['waited']:.2f}s waiting for a CPU (run queue), "
            f"peak RSS {m['rss']:.0f} MiB (target <= 5 s); walls "
            + ", ".join(f"{r['wall']:.2f}" for r in runs[c])
        )
    for c in others:
        rows.append(
            f"plan over {tables} tables, {REPO} / {c}: wall "
            f"{med[REPO]['wall'] / med[c]['wall']:.2f}x, CPU {med[REPO]['cpu'] / med[c]['cpu']:.2f}x"
        )
    return rows


def replan_rows(tables: int) -> list[str]:
    """Seconds of planning after each of `tables` applies: whole builds vs a Planner."""
    from dataclasses import replace

    from ticdc_sync.core.staged import PartitionTally, SourceTally
    from ticdc_sync.core.upstream import key
    from ticdc_sync.core.window import DdlEvent, Marker
    from ticdc_sync.plan import Planner, build_plan
    from ticdc_sync.project.load import load_project
    from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

    work = Path(tempfile.mkdtemp(prefix="ticdc-replan-"))
    try:
        make_project(work / "p", protocol="canal-json", tables=ROUTE)
        project = load_project(work / "p")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = CreatedTables(tables=tables, events=0).names()
    start = 1 << 40
    sql = "CREATE TABLE {}.{} (id INT PRIMARY KEY, v INT)"
    events = tuple(
        DdlEvent(DB, n, start + i, sql.format(DB, n), topic="t", offset=2 * i)
        for i, n in enumerate(names)
    )
    tally = SourceTally(
        {("t", 0): PartitionTally("t", 0, 2 * tables, watermark=start + 2 * tables)},
        {(DB, n): (1, 1) for n in names},
        {(DB, n): (start + i + 1, start + i + 1) for i, n in enumerate(names)},
    )
    source = next(iter(project.sources)).name
    state = WarehouseState(sources={source: SourceState(source, tally, ddl_events=events)})
    planner = Planner(project)
    plan = planner.plan(state)
    timeline = plan.sources[0].timeline
    whole = kept = 0.0
    for n in names:
        t = plan.target_plan(n)
        marker = Marker(t.stop_ts, t.ddl[-1].commit_ts, 0, 1)
        cols = tuple((c[1], c[3].lower()) for c in t.next_columns)
        ss = state.source(source)
        k = key(DB, n)
        state = replace(
            state,
            targets={**state.targets, n: TargetState(n, True, marker, cols, version=1)},
            sources={source: replace(ss, recorded={**ss.recorded, k: timeline.versions[k]})},
        )
        t0 = time.process_time()
        full = build_plan(project, state)
        t1 = time.process_time()
        plan = planner.plan(state)
        t2 = time.process_time()
        whole, kept = whole + t1 - t0, kept + t2 - t1
        if plan != full:
            raise SystemExit(f"replan: the planner's plan after {n}'s apply is not the whole one")
    return [
        f"planning after each of {tables} applies (CPU): whole build {whole:.2f}s, Planner "
        f"{kept:.2f}s = {kept / whole:.3f}x; per apply {whole / tables * 1000:.1f} ms vs "
        f"{kept / tables * 1000:.2f} ms"
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--tables", default="3,150,1000")
    ap.add_argument("--alter-tables", default="3,300")
    ap.add_argument("--plan-tables", default="1000")
    ap.add_argument("--only", default="run,alter,plan")
    ap.add_argument("--plan-from", action="append", default=[], type=Path, metavar="DIR")
    ap.add_argument("--plan-repeat", type=int, default=3)
    ap.add_argument("--plan-bytecode", choices=("cached", "env"), default="cached")
    ap.add_argument("--replan-tables", default="100,300")
    a = ap.parse_args()
    only = set(a.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="ticdc-created-"))
    rows: list[str] = []
    try:
        if "replan" in only:
            for n in (int(x) for x in a.replan_tables.split(",")):
                rows += replan_rows(n)
                print(rows[-1], flush=True)
        if "plan" in only:
            for n in (int(x) for x in a.plan_tables.split(",")):
                rows += plan_rows(work, n, a.plan_from, a.plan_repeat, a.plan_bytecode)
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
