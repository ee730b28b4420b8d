"""Where a run's time and CPU go: a work budget per phase, from Spark's own event log.

Usage: python benchmarks/timeline.py [--events N] [--quick] [--rounds 2] [--jobs]

Runs, in one local[2] SparkSession with Spark's event log on (the session of `run.py`,
so the same settings): the decode limit, ticdc-sync e2e pass 1 and pass 2, and the
hand-written baseline's two passes, `--rounds` times each (the first round warms the JVM).
Then, for the last round, it prints for each of them the wall time, the task time summed
over every job (core-seconds), and how busy that kept the 2 cores. An e2e pass is split
by the phase each Spark job is labelled with (`ticdc_sync.spark.runtime.labels`: `open state`,
`stage <source>`, `resolve <source>`, `apply <target>`); jobs started outside any phase, or by another
thread without a label, count as `(unlabelled)`. `--jobs` also lists every job of each
e2e pass (start, wall, core-seconds, tasks, phase).

What it is for: telling work (core-seconds, which only doing less can cut) apart from
waiting (wall time while the cores idle, which overlapping can cut). Not part of the test
suite and not a figure of the benchmark table; the event log is kept under
`benchmarks/out/timeline-events/` for other tools. Measures, never judges a target.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as R  # noqa: E402
import workload as W  # noqa: E402

EVENT_DIR = HERE / "out" / "timeline-events"
UNLABELLED = "(unlabelled)"
CORES = 2


@dataclass
class Job:
    start: float  # ms since the epoch
    end: float
    core_ms: float
    tasks: int
    group: str
    name: str
    # CPU time of its tasks (Spark's "Executor CPU Time"), which a busy host inflates less
    # than their run time (core_ms): a task waiting for a core runs but uses no CPU.
    cpu_ms: float = 0.0


@dataclass
class Interval:
    label: str
    start: float  # ms since the epoch
    end: float
    jobs: list[Job] = field(default_factory=list)


def read_jobs(event_dir: Path) -> list[Job]:
    """Every finished job of the event logs in `event_dir`, with its stages' task time."""
    starts: dict[int, dict] = {}
    ends: dict[int, float] = {}
    stage_ms: dict[int, float] = {}
    stage_tasks: dict[int, int] = {}
    stage_cpu: dict[int, float] = {}
    for line in _event_lines(event_dir):
        e = json.loads(line)
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            infos = e.get("Stage Infos") or []
            starts[e["Job ID"]] = {
                "start": e["Submission Time"],
                "stages": e["Stage IDs"],
                "group": props.get("spark.jobGroup.id") or "",
                "name": infos[-1]["Stage Name"] if infos else "",
            }
        elif kind == "SparkListenerJobEnd":
            ends[e["Job ID"]] = e["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            sid = e["Stage ID"]
            metrics = e.get("Task Metrics") or {}
            stage_ms[sid] = stage_ms.get(sid, 0) + metrics.get("Executor Run Time", 0)
            stage_cpu[sid] = stage_cpu.get(sid, 0) + metrics.get("Executor CPU Time", 0) / 1e6
            stage_tasks[sid] = stage_tasks.get(sid, 0) + 1
    jobs = []
    for jid, s in sorted(starts.items()):
        if jid not in ends:
            continue
        jobs.append(
            Job(
                start=s["start"],
                end=ends[jid],
                core_ms=sum(stage_ms.get(sid, 0) for sid in s["stages"]),
                tasks=sum(stage_tasks.get(sid, 0) for sid in s["stages"]),
                group=s["group"],
                name=s["name"],
                cpu_ms=sum(stage_cpu.get(sid, 0) for sid in s["stages"]),
            )
        )
    return jobs


def _event_lines(event_dir: Path):
    """Lines of every event log file under `event_dir`: rolling logs written uncompressed
    (`main` turns compression off), without Hadoop's `.crc` files or the status marker."""
    for path in sorted(p for p in event_dir.rglob("*") if p.is_file()):
        if path.name.startswith((".", "appstatus")):
            continue
        yield from path.read_text(encoding="utf-8").splitlines()


def phase_of(job: Job) -> str:
    from ticdc_sync.spark.runtime.labels import PREFIX

    return job.group.removeprefix(PREFIX) if job.group.startswith(PREFIX) else UNLABELLED


def baseline_passes(whole: Interval, jobs: list[Job], walls: tuple[float, float]) -> list[Interval]:
    """The baseline's passes within `whole`: the jobs of each streaming query (its run id
    is their job group), in the order the queries ran, with the pass's measured wall time."""
    groups: dict[str, list[Job]] = {}
    for j in sorted(jobs, key=lambda j: j.start):
        if j.start >= whole.start and j.end <= whole.end and j.group:
            groups.setdefault(j.group, []).append(j)
    passes = []
    for n, (members, wall) in enumerate(zip(groups.values(), walls, strict=False), 1):
        start = min(j.start for j in members)
        passes.append(Interval(whole.label + f" pass {n}", start, start + wall * 1000, members))
    return passes


def budget(interval: Interval, by_phase: bool) -> list[str]:
    wall = (interval.end - interval.start) / 1000
    core = sum(j.core_ms for j in interval.jobs) / 1000
    cpu = sum(j.cpu_ms for j in interval.jobs) / 1000
    lines = [
        f"{interval.label}: {wall:.1f} s wall, {core:.1f} core-s ({cpu:.1f} CPU-s) in "
        f"{len(interval.jobs)} jobs ({core / (wall * CORES):.0%} of {CORES} cores)"
    ]
    if not by_phase:
        return lines
    phases: dict[str, list[Job]] = {}
    for j in interval.jobs:
        phases.setdefault(phase_of(j), []).append(j)
    lines.append(f"  {'phase':<28} {'from':>6} {'to':>6} {'core-s':>7} {'CPU-s':>6} {'jobs':>5}")
    for name, jobs in sorted(phases.items(), key=lambda kv: min(j.start for j in kv[1])):
        first = (min(j.start for j in jobs) - interval.start) / 1000
        last = (max(j.end for j in jobs) - interval.start) / 1000
        core_s = sum(j.core_ms for j in jobs) / 1000
        cpu_s = sum(j.cpu_ms for j in jobs) / 1000
        lines.append(
            f"  {name:<28} {first:6.1f} {last:6.1f} {core_s:7.1f} {cpu_s:6.1f} {len(jobs):5d}"
        )
    return lines


def job_list(interval: Interval) -> list[str]:
    lines = [
        f"  {'start':>6} {'wall':>6} {'core-s':>7} {'CPU-s':>6} {'tasks':>5}  phase / first stage"
    ]
    for j in interval.jobs:
        lines.append(
            f"  {(j.start - interval.start) / 1000:6.2f} {(j.end - j.start) / 1000:6.2f} "
            f"{j.core_ms / 1000:7.2f} {j.cpu_ms / 1000:6.2f} {j.tasks:5d}  "
            f"{phase_of(j)} / {j.name[:60]}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description="work budget per phase, from Spark's event log")
    ap.add_argument("--events", type=int, default=None, help="row events per pass (1,000,000)")
    ap.add_argument("--quick", action="store_true", help="50,000 events per pass")
    ap.add_argument("--rounds", type=int, default=2, help="the last round is reported")
    ap.add_argument("--jobs", action="store_true", help="also list every job of each e2e pass")
    ap.add_argument("--protocol", default="canal-json")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1 (the last round is reported)")
    n = a.events or (50_000 if a.quick else 1_000_000)
    cap = W.ensure_captures(W.Params(events=n, protocol=a.protocol))
    spark = R.event_log_session(EVENT_DIR)
    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner

    intervals: list[Interval] = []
    # Each round's whole baseline call and the two passes' measured wall times.
    baseline: list[tuple[Interval, tuple[float, float]]] = []

    def timed(label: str, fn) -> None:
        t0 = time.time() * 1000
        fn()
        intervals.append(Interval(label, t0, time.time() * 1000))
        print(f"  {label}: {(intervals[-1].end - t0) / 1000:.1f}s", flush=True)

    with tempfile.TemporaryDirectory(prefix="ticdc-timeline-") as tmpd:
        tmp = Path(tmpd)
        for i in range(a.rounds):
            timed(f"round {i + 1} decode limit", lambda: R.measure_decode(spark, cap, 1))
            root = R.make_project(tmp / f"e2e{i}", cap)
            for p in (1, 2):
                R.point_captures(root, cap, p)
                project = load_project(root)
                lines: list[str] = []

                def once(project=project, lines=lines) -> None:
                    if runner.run(project, spark=spark, out=lines.append) != 0:
                        raise SystemExit("e2e run failed:\n" + "\n".join(lines))

                timed(f"round {i + 1} e2e pass {p}", once)
            work = tmp / f"baseline{i}"
            work.mkdir()
            t0 = time.time() * 1000
            t1, t2 = R.run_baseline(spark, cap, work)
            # Split by job group below: each pass is a streaming query of its own, whose jobs
            # Spark groups under the query's run id (set-up and row checks are in neither).
            baseline.append((Interval(f"round {i + 1} baseline", t0, time.time() * 1000), (t1, t2)))
            print(f"  round {i + 1} baseline: pass 1 {t1:.1f}s, pass 2 {t2:.1f}s", flush=True)
    spark.stop()

    jobs = read_jobs(EVENT_DIR)
    last = [iv for iv in intervals if iv.label.startswith(f"round {a.rounds} ")]
    for iv in last:
        iv.jobs = [j for j in jobs if j.start >= iv.start and j.end <= iv.end]
    whole, walls = baseline[-1]
    last.extend(baseline_passes(whole, jobs, walls))
    print(f"\n# work budget, {n:,} events per pass, round {a.rounds} of {a.rounds} (one JVM)")
    for iv in last:
        print()
        print("\n".join(budget(iv, by_phase="e2e" in iv.label)))
        if a.jobs and "e2e" in iv.label:
            print("\n".join(job_list(iv)))


if __name__ == "__main__":
    main()
