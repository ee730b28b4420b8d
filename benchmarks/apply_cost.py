"""Where the fixed cost of applying one small target goes: a per-component breakdown.

Usage: python benchmarks/apply_cost.py [--tables 3,50] [--events 10000] [--reps 2]
                                      [--workers 1,2] [--shared-window alternate] [--jobs]
                                      [--pass 1]

The growth benchmark's `--follow`-sized batch (`growth.measure_tables`): a stream of
`--events` row events over N tables (no DDL), pass 1 creates and fills the targets, pass 2 is
the batch measured: `ticdc_sync.spark.runner.run` into the populated targets. Pass 2 runs
`--reps` times, each on a fresh copy of the project as pass 1 left it, in one JVM (the first
repetition pays more JIT compilation; compare the later ones). `--pass 1` measures pass 1
instead, each repetition on a fresh copy of the project before any run: every target is
created and gets its first rows (the tables row's 300-vs-3 runs are such first runs).
A large shared window read in groups of targets (`shared_window.split`) copies a group's
tables out when the group's first target asks: that copy is counted in its typing plan.

For each repetition it prints, for the apply phase (from the first target's apply to the end
of the last, after staging and the plan), per target on average:
- each component of the apply (its own session, the shared window's copy, reading the
  target's facts, building the typing, bad-value and collapse plans, the copy of the MERGE
  source, the MERGE statement, the marker commit, the target's state read back after it):
  wall seconds, CPU seconds of the driver thread that ran it (the JVM thread serving the
  Python thread, `ThreadMXBean`), Spark jobs, and the executor CPU seconds of those jobs'
  tasks;
- the whole JVM's CPU seconds over the phase, split by thread (JIT compiler, GC, executor
  tasks, adaptive-execution stage threads, driver threads, ...), and the Python process's;
- with `--jobs`, every job of the last repetition (its Delta/Spark description).
Then the cost per added target between the smallest and largest table count.

CPU seconds are the robust figure on a shared machine (wall time waits for other work);
wall seconds matter for the targets. Targets run `--workers` at once (the project's
`run.apply_workers`; default: the project's own, 2 on `local[2]`), where the per-component
figures overlap. Several `--workers` values and `--shared-window alternate` (the staged
window read once for the targets of a round, `shared_window`, or each target reading the
staging table) are variants measured in turn in the same JVM. This script instruments the
engine by wrapping its functions; it changes nothing the engine does. Not part of the test
suite.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as R  # noqa: E402
import workload as W  # noqa: E402

COMPONENTS = (
    "target session",
    "create",
    "shared window",
    "target facts",
    "typing plan",
    "bad values",
    "collapse plan",
    "source copy",
    "MERGE / INSERT",
    "marker commit",
    "state read back",
    "other",
)


# Components of an apply outside `TargetWriter.merge` (not part of its "other").
OUTSIDE_MERGE = ("target session", "create", "shared window", "state read back")


class Probe:
    """Per-component wall, driver-thread CPU, jobs and task CPU, gathered by wrapping."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.mx = self.sc._jvm.java.lang.management.ManagementFactory.getThreadMXBean()
        self.lock = threading.Lock()
        self.rows: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
        self.job_ids: dict[str, set[int]] = collections.defaultdict(set)
        self.depth = threading.local()
        self.pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        self.phase_start: tuple | None = None
        self.phase_end: tuple | None = None

    def _jobs(self) -> set[int]:
        group = self.sc.getLocalProperty("spark.jobGroup.id")
        return set(self.sc.statusTracker().getJobIdsForGroup(group)) if group else set()

    def wrap(self, owner, name: str, component: str) -> None:
        orig = getattr(owner, name)
        probe = self

        def wrapped(*args, **kwargs):
            if getattr(probe.depth, "on", False):
                return orig(*args, **kwargs)  # nested: counted by the outer component
            probe.depth.on = True
            jobs0 = probe._jobs()
            c0 = probe.mx.getCurrentThreadCpuTime()
            t0 = time.perf_counter()
            try:
                return orig(*args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                dc = (probe.mx.getCurrentThreadCpuTime() - c0) / 1e9
                new = probe._jobs() - jobs0
                probe.depth.on = False
                with probe.lock:
                    r = probe.rows[component]
                    r[0] += dt
                    r[1] += dc
                    r[2] += len(new)
                    probe.job_ids[component] |= new

        setattr(owner, name, wrapped)

    def wrap_merge_total(self, owner) -> None:
        """`TargetWriter.merge` as a whole: what its components leave is `other`."""
        orig = owner.merge
        probe = self

        def merge(w, *args, **kwargs):
            jobs0 = probe._jobs()
            c0 = probe.mx.getCurrentThreadCpuTime()
            t0 = time.perf_counter()
            try:
                return orig(w, *args, **kwargs)
            finally:
                with probe.lock:
                    r = probe.rows["(merge total)"]
                    r[0] += time.perf_counter() - t0
                    r[1] += (probe.mx.getCurrentThreadCpuTime() - c0) / 1e9
                    new = probe._jobs() - jobs0
                    r[2] += len(new)
                    r[3] += 1
                    probe.job_ids["(merge total)"] |= new

        owner.merge = merge

    def wrap_apply_total(self, owner) -> None:
        """`SparkEngine.apply` as a whole, and the apply phase: from the first apply's start
        to the last one's end, with the JVM's and Python's CPU over it."""
        orig = owner.apply
        probe = self

        def apply(engine, *args, **kwargs):
            with probe.lock:
                if probe.phase_start is None:
                    probe.phase_start = (
                        time.perf_counter(),
                        process_cpu(probe.pid),
                        time.process_time(),
                        jvm_threads(probe.pid),
                    )
            t0 = time.perf_counter()
            try:
                return orig(engine, *args, **kwargs)
            finally:
                end = (
                    time.perf_counter(),
                    process_cpu(probe.pid),
                    time.process_time(),
                    jvm_threads(probe.pid),
                )
                with probe.lock:
                    r = probe.rows["(apply total)"]
                    r[0] += end[0] - t0
                    r[3] += 1
                    probe.phase_end = end

        owner.apply = apply

    def phase(self) -> dict:
        (t0, c0, p0, th0), (t1, c1, p1, th1) = self.phase_start, self.phase_end
        return {
            "wall": t1 - t0,
            "jvm": c1 - c0,
            "py": p1 - p0,
            "threads": {k: th1.get(k, 0) - th0.get(k, 0) for k in th1},
        }

    def reset(self) -> None:
        self.rows.clear()
        self.job_ids.clear()
        self.phase_start = None
        self.phase_end = None


def instrument(spark) -> Probe:
    """Wrap the components of a target's apply (`rows.TargetWriter`, the functions of
    `rows` it calls, the engine's state read back, the shared window)."""
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.session import SparkSession as ClassicSession

    from ticdc_sync.spark import engine
    from ticdc_sync.spark.apply import rows, shared_window
    from ticdc_sync.spark.runtime import fanout
    from ticdc_sync.warehouse import read as warehouse

    p = Probe(spark)
    w = rows.TargetWriter
    p.wrap_merge_total(w)
    for name, comp in (
        ("create", "create"),
        ("target_columns", "target facts"),
        ("typed_segment", "typing plan"),
        ("_handle_bad_values", "bad values"),
        ("collapse", "collapse plan"),
        ("_record_marker", "marker commit"),
    ):
        p.wrap(w, name, comp)
    for name in ("checksum_facts", "table_exists", "data_size"):
        p.wrap(rows, name, "target facts")
    p.wrap(rows, "inserted_rows", "marker commit")
    p.wrap(fanout, "target_session", "target session")
    p.wrap(shared_window.SharedWindow, "build", "shared window")
    p.wrap(warehouse, "target_state", "state read back")
    p.wrap(warehouse, "recorded_history", "state read back")
    p.wrap(DataFrame, "localCheckpoint", "source copy")
    p.wrap_apply_total(engine.SparkEngine)
    orig_sql = ClassicSession.sql

    def sql(self, text, *args, **kwargs):
        head = text.lstrip()[:6].upper()
        if head in ("MERGE ", "INSERT"):
            return _timed_statement(p, orig_sql, self, text, *args, **kwargs)
        return orig_sql(self, text, *args, **kwargs)

    ClassicSession.sql = sql
    return p


def _timed_statement(p: Probe, orig, session, text, *args, **kwargs):
    """A MERGE or INSERT: Spark runs a command when `sql` is called."""
    c0 = p.mx.getCurrentThreadCpuTime()
    jobs0 = p._jobs()
    t0 = time.perf_counter()
    try:
        return orig(session, text, *args, **kwargs)
    finally:
        with p.lock:
            r = p.rows["MERGE / INSERT"]
            r[0] += time.perf_counter() - t0
            r[1] += (p.mx.getCurrentThreadCpuTime() - c0) / 1e9
            new = p._jobs() - jobs0
            r[2] += len(new)
            p.job_ids["MERGE / INSERT"] |= new


# --- the JVM's threads ------------------------------------------------------------------

THREAD_KINDS = (
    ("JIT compiler", r"^C\d CompilerThre|^CompilerThre|Sweeper"),
    ("GC", r"^G1 |^GC Thread|^VM Thread|^G1"),
    ("executor tasks", r"^Executor task"),
    ("adaptive stages", r"^shuffle-exchange|^broadcast-exchange|^ResultQueryStage|^subquery"),
    ("scheduler, listeners", r"^dag-scheduler|^spark-listener|^task-result|^dispatcher|^element"),
    ("driver (py4j) threads", r"^Thread-"),
)


def jvm_threads(pid: int) -> dict[str, float]:
    """CPU seconds of each live thread of the JVM, summed by kind (`THREAD_KINDS`)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.Counter()
    for d in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (d / "comm").read_text().strip()
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a thread that ended meanwhile
        kind = next((k for k, pat in THREAD_KINDS if re.search(pat, name)), "other threads")
        out[kind] += (int(fields[11]) + int(fields[12])) / tick
    return out


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the event log ----------------------------------------------------------------------


def job_facts(event_dir: Path) -> dict[int, dict]:
    """Per finished job: description, executor CPU seconds of its tasks, task count."""
    jobs: dict[int, dict] = {}
    stage_cpu: dict[int, float] = collections.Counter()
    stage_tasks: dict[int, int] = collections.Counter()
    for path in sorted(p for p in event_dir.rglob("*") if p.is_file()):
        if path.name.startswith((".", "appstatus")):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # the line being written
            kind = e["Event"]
            if kind == "SparkListenerJobStart":
                props = e.get("Properties") or {}
                jobs[e["Job ID"]] = {
                    "start": e["Submission Time"],
                    "stages": e["Stage IDs"],
                    "desc": props.get("spark.job.description") or "",
                    "site": props.get("callSite.short") or "",
                }
            elif kind == "SparkListenerJobEnd" and e["Job ID"] in jobs:
                jobs[e["Job ID"]]["end"] = e["Completion Time"]
            elif kind == "SparkListenerTaskEnd":
                metrics = e.get("Task Metrics") or {}
                stage_cpu[e["Stage ID"]] += metrics.get("Executor CPU Time", 0) / 1e9
                stage_tasks[e["Stage ID"]] += 1
    for j in jobs.values():
        j["cpu"] = sum(stage_cpu[s] for s in j["stages"])
        j["tasks"] = sum(stage_tasks[s] for s in j["stages"])
    return jobs


def short(desc: str) -> str:
    return re.sub(r"(Delta: )?ticdc-sync: apply [\w]+( -|:)? ?", "", desc)


# --- the run ------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description="per-component fixed cost of a small apply")
    ap.add_argument("--tables", default="3,50", help="table counts, comma-separated")
    ap.add_argument("--events", type=int, default=10_000, help="row events per pass")
    ap.add_argument(
        "--reps", type=int, default=2, help="pass-2 repetitions per table count and variant"
    )
    ap.add_argument(
        "--workers",
        default="",
        help="targets applied at once (run.apply_workers); a comma-separated list is "
        "measured in turn, repetition after repetition (default: the project's own)",
    )
    ap.add_argument("--jobs", action="store_true", help="list every job of the last repetition")
    ap.add_argument(
        "--pass",
        dest="measured",
        type=int,
        choices=(1, 2),
        default=2,
        help="the pass measured: 2 (a batch into populated targets) or 1 (the first run, "
        "which creates every target and writes its first rows)",
    )
    ap.add_argument(
        "--shared-window",
        choices=("off", "on", "alternate"),
        default="on",
        help="targets of a round read the staged window once (`shared_window`, the "
        "engine's default) or each the staging table (off); alternate: repetitions "
        "alternate off and on",
    )
    a = ap.parse_args()

    event_dir = HERE / "out" / "apply-cost-events"
    spark = R.event_log_session(event_dir)
    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner
    from ticdc_sync.spark.apply import shared_window

    probe = instrument(spark)
    share_from = shared_window.SHARE_FROM
    variants = [
        (int(n) if n else None, sw)
        for n in a.workers.split(",")
        for sw in ((False, True) if a.shared_window == "alternate" else (a.shared_window == "on",))
    ]

    summary: dict[tuple[int, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="ticdc-apply-cost-") as tmpd:
        tmp = Path(tmpd)
        for n in [int(x) for x in a.tables.split(",")]:
            cap = W.ensure_captures(W.Params(events=a.events, passes=2, ddl_count=0, tables=n))
            base = R.make_project(tmp / f"t{n}", cap)
            lines: list[str] = []
            if a.measured == 2:
                if runner.run(load_project(base), spark=spark, out=lines.append) != 0:
                    raise SystemExit("pass 1 failed:\n" + "\n".join(lines))
                R.point_captures(base, cap, 2)
            for rep in range(a.reps * len(variants)):
                workers, shared = variants[rep % len(variants)]
                shared_window.SHARE_FROM = share_from if shared else 2**31
                root = tmp / f"t{n}-{rep}"
                shutil.copytree(base, root, symlinks=True)
                if workers is not None:
                    profiles = root / "profiles.yml"
                    profiles.write_text(
                        profiles.read_text() + f"      run: {{apply_workers: {workers}}}\n"
                    )
                probe.reset()
                lines = []
                if runner.run(load_project(root), spark=spark, out=lines.append) != 0:
                    raise SystemExit(f"pass {a.measured} failed:\n" + "\n".join(lines))
                time.sleep(2)  # the event log's listener is asynchronous
                jobs = job_facts(event_dir)
                label = ("shared window" if shared else "per-target reads") + (
                    f", {workers} at once" if workers else ", the project's workers"
                )
                last = rep >= (a.reps - 1) * len(variants)
                summary.setdefault((n, label), []).append(
                    report(n, rep, label, probe, probe.phase(), jobs, a.jobs and last, a.measured)
                )
                shutil.rmtree(root, ignore_errors=True)
    spark.stop()
    for label in sorted({label for _, label in summary}):
        counts = sorted(n for n, lb in summary if lb == label)
        if len(counts) < 2:
            continue
        lo, hi = counts[0], counts[-1]
        print(f"\n# {label}: per added target, {lo} -> {hi} tables (best repetition of each)")
        for key in ("wall", "jvm", "py", "jobs"):
            b_lo = min(s[key] for s in summary[(lo, label)])
            b_hi = min(s[key] for s in summary[(hi, label)])
            print(f"  apply {key}: {b_lo:.2f} -> {b_hi:.2f}: {(b_hi - b_lo) / (hi - lo):.3f} each")


def report(
    n: int,
    rep: int,
    label: str,
    probe: Probe,
    phase: dict,
    jobs: dict,
    list_jobs: bool,
    measured: int,
) -> dict:
    merges = probe.rows.get("(merge total)", [0, 0, 0, 0])[3]
    total = probe.rows.get("(merge total)", [0.0, 0.0, 0, 0])
    applied = probe.rows.get("(apply total)", [0.0, 0.0, 0, 0])
    per = applied[3] or 1  # figures are per target apply
    print(
        f"\n## {n} tables, pass {measured}, repetition {rep + 1} ({label}): {applied[3]} target "
        f"applies, {merges} row segments"
    )
    print(
        f"apply phase: {phase['wall']:.2f} s wall; CPU: JVM {phase['jvm']:.2f} s, "
        f"Python {phase['py']:.2f} s"
    )
    threads = phase["threads"]
    print(
        "  JVM CPU by thread: "
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(threads.items(), key=lambda kv: -kv[1]))
    )
    print(
        f"  {'per target (mean)':<18} {'wall s':>8} {'driver CPU s':>13} {'jobs':>6} "
        f"{'task CPU s':>11}"
    )
    comp_rows = dict(probe.rows)
    accounted = [0.0, 0.0, 0, 0.0]
    for comp in COMPONENTS:
        if comp == "other":
            wall, cpu, nj = (total[0] - accounted[0], total[1] - accounted[1], 0)
            task = 0.0
        else:
            r = comp_rows.get(comp)
            if r is None:
                continue
            wall, cpu, nj = r[0], r[1], r[2]
            task = sum(jobs.get(j, {}).get("cpu", 0) for j in probe.job_ids[comp])
            if comp not in OUTSIDE_MERGE:
                accounted = [accounted[0] + wall, accounted[1] + cpu, 0, 0]
        print(
            f"  {comp:<18} {wall / per:8.3f} {cpu / per:13.3f} {nj / per:6.1f} {task / per:11.3f}"
        )
    all_task = sum(jobs.get(j, {}).get("cpu", 0) for j in probe.job_ids["(merge total)"])
    print(
        f"  {'merge (all)':<18} {total[0] / per:8.3f} {total[1] / per:13.3f} "
        f"{total[2] / per:6.1f} {all_task / per:11.3f}"
    )
    print(f"  {'apply (all)':<18} {applied[0] / per:8.3f}")
    if list_jobs:
        ids = sorted(probe.job_ids["(merge total)"])
        print(f"  jobs ({len(ids)}): start s, wall s, task CPU s, tasks, what")
        first = min((jobs[j]["start"] for j in ids if j in jobs), default=0)
        for j in ids:
            f = jobs.get(j)
            if f is None or "end" not in f:
                continue
            print(
                f"    {(f['start'] - first) / 1000:8.2f} {(f['end'] - f['start']) / 1000:6.2f} "
                f"{f['cpu']:6.2f} {f['tasks']:4d}  {short(f['desc'])[:70] or f['site'][:70]}"
            )
    return {
        "wall": phase["wall"],
        "jvm": phase["jvm"],
        "py": phase["py"],
        "jobs": total[2] + comp_rows.get("shared window", [0, 0, 0, 0])[2],
        "merges": merges,
        "merge_wall": total[0] / per,
    }


if __name__ == "__main__":
    main()
