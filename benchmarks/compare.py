"""`ticdc-sync run` at this checkout against other commits, alternating, with the phase split.

Usage: python benchmarks/compare.py --rev 8e61a90 [--rev ...] [--events 1000000]
                                    [--tables 2] [--rounds 2] [--seed] [--jobs]
       python benchmarks/compare.py --jvm "c1=-XX:TieredStopAtLevel=1" [--jvm ...]

The capture is a catch-up of `--events` row events (Canal-JSON with the TiDB extension, 6
partitions, no DDL) over `--tables` tables, made by `workload.py` (cached under
benchmarks/out/). The project has no `schema/*.sql` (columns are inferred from the
messages' metadata, as for a user who has not written one); `--seed` adds the generator's
schema file. Each run is `python -m ticdc_sync.commands.cli run --project P` (`ticdc_sync.cli` in older code), a process of its own
(its own JVM, ticdc-sync's session defaults, `local[2]`), into an empty warehouse, with
PYTHONPATH pointing at the code under test: this checkout (its working tree), or each
`--rev`, exported once with `git archive` into benchmarks/out/compare/ (a folder holding a
`ticdc_sync/` works too). Nothing is installed. The codes alternate, the order rotating
each round, so a change in the host's load falls on all; the load average is printed
before and after each run.

Per run: the process's wall time and CPU time (the process and its JVM, from /proc, and
the Python process's own); the
phases by the run's own output lines (start: Python, the JVM, the lease and the state
tables; stage; resolve + plan; each target's apply; retention + exit), where
`run_results.json` has `phases` (newer versions) those too; and, from Spark's event log
(turned on through the profile's `spark.conf`), the CPU time of the tasks of each phase's
jobs, which a busy host inflates far less than wall time. Each target's inserted rows
are checked against the generator's live rows. Then the median of each figure per code
and its ratio to the first `--rev`. `--jobs` also lists every Spark job of each run.
`--jvm LABEL=OPTIONS` adds this checkout's code run with those JVM options
(`SPARK_SUBMIT_OPTS`, which the driver's JVM starts with) as one more code to compare.
Not part of the test suite; it measures, and compares only within one session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import timeline as T  # noqa: E402
import workload as W  # noqa: E402

WORK = W.OUT / "compare"

STAGE_RE = re.compile(r"read\+decode (\S+): (\d+) new event\(s\) staged \(([\d.]+)s\)")
APPLY_RE = re.compile(r"apply (\S+): \+(\d+) ~(\d+) -(\d+) in .*\(([\d.]+)s\)\s*$")
DONE_RE = re.compile(r"done: .* in ([\d.]+)s")


@dataclass
class Code:
    label: str
    path: Path
    env: dict[str, str] = field(default_factory=dict)  # set for its runs


@dataclass
class Result:
    """One run; times in seconds from the process's start (`at_*`) or durations."""

    code: str
    round: int
    wall: float
    load: tuple[float, float]
    cpu: float = 0.0  # CPU seconds of the process and its children (the JVM), sampled
    py_cpu: float = 0.0  # of those, the Python process's own
    inside: float | None = None  # `done: ... in` (where it starts differs between versions)
    stage: float | None = None
    at_staged: float | None = None  # when the stage line was printed
    at_applied: float | None = None  # when the last target's apply line was printed
    applies: dict[str, float] = field(default_factory=dict)
    inserted: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    task_cpu: dict[str, float] = field(default_factory=dict)  # phase -> tasks' CPU seconds
    jobs: list[str] = field(default_factory=list)

    @property
    def apply(self) -> float | None:
        return max(self.applies.values()) if self.applies else None

    @property
    def before(self) -> float | None:
        """From the process's start to the stage's: Python, the JVM, the lease, open state."""
        return None if None in (self.at_staged, self.stage) else self.at_staged - self.stage

    @property
    def between(self) -> float | None:
        """From the end of stage to the start of the apply: resolve and plan."""
        if None in (self.at_applied, self.apply, self.at_staged):
            return None
        return self.at_applied - self.apply - self.at_staged

    @property
    def after(self) -> float | None:
        """From the last apply to the process's end: retention, run_results, exit."""
        return None if self.at_applied is None else self.wall - self.at_applied

    def cpu_of(self, prefix: str) -> float | None:
        got = [v for k, v in self.task_cpu.items() if k.startswith(prefix)]
        return sum(got) if got else None


class TreeCpu:
    """CPU seconds (user + system) of a process and every descendant (Spark's JVM), from
    /proc, sampled every `period` seconds while it runs: a busy host inflates CPU time much
    less than wall time. The last fraction of a period before each process exits is lost."""

    def __init__(self, pid: int, period: float = 0.5) -> None:
        self.pid = pid
        self.period = period
        self.ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def sample(self) -> None:
        stats: dict[int, tuple[int, int]] = {}  # pid -> (ppid, utime + stime)
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                text = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()
            stats[int(d)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
        tree = {self.pid}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree & stats.keys():
            self.ticks[pid] = max(self.ticks.get(pid, 0), stats[pid][1])

    def stop(self) -> tuple[float, float]:
        """(CPU seconds of the whole tree, of the process itself)."""
        self._stop.set()
        self._thread.join()
        tick = os.sysconf("SC_CLK_TCK")
        return sum(self.ticks.values()) / tick, self.ticks.get(self.pid, 0) / tick


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def export(rev: str) -> Code:
    """The code at `rev`, exported once (`git archive`) into benchmarks/out/compare/; a
    folder that holds a `ticdc_sync/` is used as it is."""
    if (Path(rev) / "ticdc_sync").is_dir():
        return Code(Path(rev).name, Path(rev).resolve())
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    dest = WORK / f"rev-{sha[:12]}"
    if not (dest / "ticdc_sync").is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="export-", dir=WORK))
        tar = tmp / "code.tar"
        subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(tar), sha, "ticdc_sync"],
            check=True,
        )
        with tarfile.open(tar) as t:
            t.extractall(tmp / "code", filter="data")
        shutil.rmtree(dest, ignore_errors=True)
        (tmp / "code").rename(dest)
        shutil.rmtree(tmp, ignore_errors=True)
    return Code(sha[:9], dest)


def this_checkout() -> Code:
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "ticdc_sync"))
    return Code(git("rev-parse", "--short=9", "HEAD") + ("+wt" if dirty else ""), REPO)


def make_project(root: Path, cap: W.Capture, event_log: Path, seed: bool) -> Path:
    from bench_projects import make_project as base

    base(root, cap)
    if not seed:
        shutil.rmtree(root / "schema")
    event_log.mkdir(parents=True, exist_ok=True)
    (root / "profiles.yml").write_text(
        "bench:\n  target: dev\n  outputs:\n    dev:\n"
        '      spark:\n        master: "local[2]"\n        conf:\n'
        '          spark.eventLog.enabled: "true"\n'
        f'          spark.eventLog.dir: "{event_log.as_uri()}"\n'
        '          spark.eventLog.compress: "false"\n'
        "      warehouse: warehouse\n      transport: {type: files, captures: captures}\n"
    )
    return root


def cli_module(path: Path) -> str:
    """The module that is `ticdc-sync` in the code at `path`: `ticdc_sync.cli` before the
    package was laid out in floors (a module of that name elsewhere on the path would
    otherwise run instead)."""
    if (path / "ticdc_sync" / "commands" / "cli.py").exists():
        return "ticdc_sync.commands.cli"
    return "ticdc_sync.cli"


def run_once(code: Code, cap: W.Capture, n: int, seed: bool) -> Result:
    root = WORK / "runs" / f"{code.label}-{n}"
    event_log = root.with_name(root.name + "-events")
    for d in (root, event_log):
        shutil.rmtree(d, ignore_errors=True)
    make_project(root, cap, event_log, seed)
    env = {**os.environ, "PYTHONPATH": str(code.path), **code.env}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    load0 = os.getloadavg()[0]
    started = time.time()
    t0 = time.perf_counter()
    # Lines are timed as they arrive (older versions print them to stdout; newer ones write
    # them, timed, to target/logs/ticdc-sync.log).
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(
        [sys.executable, "-m", cli_module(code.path), "run", "--project", str(root)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as p:
        cpu = TreeCpu(p.pid)
        assert p.stdout is not None
        for line in p.stdout:
            lines.append((time.perf_counter() - t0, line.rstrip("\n")))
    wall = time.perf_counter() - t0
    r = Result(code.label, n, wall, (load0, os.getloadavg()[0]), *cpu.stop())
    log = root / "target" / "logs" / "ticdc-sync.log"
    if log.exists():
        for line in log.read_text(errors="replace").splitlines():
            stamp, _, rest = line.partition(" ")
            try:
                at = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            lines.append((at - started, rest))
    if p.returncode != 0:
        tail = "\n".join(x for _, x in lines[-60:])
        raise SystemExit(f"{code.label} run {n} exited {p.returncode}:\n{tail}")
    for at, line in lines:
        if (m := STAGE_RE.search(line)) and r.at_staged is None:
            r.stage, r.at_staged = float(m.group(3)), at
        elif (m := APPLY_RE.search(line)) and m.group(1) not in r.applies:
            r.applies[m.group(1)] = float(m.group(5))
            r.inserted[m.group(1)] = int(m.group(2))
            r.at_applied = max(r.at_applied or 0.0, at)
        elif (m := DONE_RE.search(line)) and r.inside is None:
            r.inside = float(m.group(1))
    results = root / "target" / "run_results.json"
    if results.exists():
        r.phases = json.loads(results.read_text()).get("phases") or {}
    want = cap.meta["passes"][0]["live_rows"]
    if r.inserted != want:
        raise SystemExit(f"{code.label} run {n}: rows inserted {r.inserted}, expected {want}")
    jobs = T.read_jobs(event_log)
    for j in jobs:
        phase = T.phase_of(j)
        r.task_cpu[phase] = r.task_cpu.get(phase, 0.0) + j.cpu_ms / 1000
    if jobs:
        iv = T.Interval("Spark jobs", min(j.start for j in jobs), max(j.end for j in jobs), jobs)
        r.jobs = ["  " + x for x in T.budget(iv, by_phase=True)] + T.job_list(iv)
    for d in (root, event_log):
        shutil.rmtree(d, ignore_errors=True)
    return r


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def row(r: Result) -> str:
    applies = ", ".join(f"{_f(s)}" for _, s in sorted(r.applies.items()))
    cpu_applies = ", ".join(
        f"{v:.1f}" for k, v in sorted(r.task_cpu.items()) if k.startswith("apply ")
    )
    phases = ", ".join(f"{k} {v:.1f}" for k, v in r.phases.items())
    return (
        f"| {r.code} #{r.round} | {r.wall:.1f} | {r.cpu:.1f} ({r.py_cpu:.1f}) | {_f(r.before)} | "
        f"{_f(r.stage)} ({_f(r.cpu_of('stage '))}) | {_f(r.between)} | {applies} "
        f"({cpu_applies or '-'}) | {_f(r.after)} | {r.load[0]:.1f}-{r.load[1]:.1f} | "
        f"{phases or '-'} |"
    )


HEADER = (
    "| code #run | process s | process CPU s (Python's) | start (JVM, lease, state tables) | "
    "stage (tasks' CPU s) | resolve + plan | apply per target (tasks' CPU s) | "
    "retention + exit | load avg | run_results phases |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)
FIGURES: dict[str, Callable[[Result], float | None]] = {
    "process": lambda r: r.wall,
    "process CPU": lambda r: r.cpu,
    "  of which Python's": lambda r: r.py_cpu,
    "start (JVM, lease, state tables)": lambda r: r.before,
    "stage": lambda r: r.stage,
    "stage, tasks' CPU": lambda r: r.cpu_of("stage "),
    "resolve + plan": lambda r: r.between,
    "apply (slowest target)": lambda r: r.apply,
    "apply, tasks' CPU (all targets)": lambda r: r.cpu_of("apply "),
    "retention + exit": lambda r: r.after,
}


def summary(codes: list[Code], results: list[Result]) -> list[str]:
    med: dict[str, dict[str, float]] = {}
    for c in codes:
        mine = [r for r in results if r.code == c.label]
        med[c.label] = {
            k: statistics.median(v)
            for k, f in FIGURES.items()
            if (v := [x for x in map(f, mine) if x is not None])
        }
    base = codes[0]
    others = codes[1:]
    lines = [
        f"| median of {len(results) // len(codes)} runs each, seconds | "
        + " | ".join(c.label for c in codes)
        + " | "
        + " | ".join(f"{c.label} / {base.label}" for c in others)
        + " |",
        "|---" * (1 + len(codes) + len(others)) + "|",
    ]
    for k in FIGURES:
        a = med[base.label].get(k)
        vals = [_f(med[c.label].get(k)) for c in codes]
        ratios = [
            f"{b / a:.2f}x" if a and (b := med[c.label].get(k)) is not None else "-" for c in others
        ]
        lines.append(f"| {k} | " + " | ".join(vals + ratios) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description="ticdc-sync run: this checkout vs --rev")
    ap.add_argument(
        "--rev",
        action="append",
        default=[],
        help="commit (or folder holding ticdc_sync/) to compare with; repeat for more",
    )
    ap.add_argument(
        "--jvm",
        action="append",
        default=[],
        metavar="LABEL=OPTIONS",
        help="this checkout run with these JVM options (SPARK_SUBMIT_OPTS); repeat for more",
    )
    ap.add_argument("--events", type=int, default=1_000_000, help="row events (1,000,000)")
    ap.add_argument("--tables", type=int, default=2, help="tables, one target each (2)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each code (2)")
    ap.add_argument("--seed", action="store_true", help="with the schema/*.sql seed")
    ap.add_argument("--jobs", action="store_true", help="also list every Spark job of each run")
    a = ap.parse_args()
    if not a.rev and not a.jvm:
        ap.error("give --rev or --jvm (or both)")
    WORK.mkdir(parents=True, exist_ok=True)
    here = this_checkout()
    jvm = [
        Code(label, here.path, {"SPARK_SUBMIT_OPTS": opts})
        for label, _, opts in (x.partition("=") for x in a.jvm)
    ]
    codes = [*(export(r) for r in a.rev), here, *jvm]
    cap = W.ensure_captures(W.Params(events=a.events, passes=1, ddl_count=0, tables=a.tables))
    records = cap.meta["passes"][0]["records"]
    print(
        f"# ticdc-sync run: {', '.join(c.label for c in codes)} (this checkout: {here.label}"
        + "".join(f"; {c.label}: it with {c.env['SPARK_SUBMIT_OPTS']}" for c in jvm)
        + "); "
        f"{a.events:,} row events ({records:,} records) over {a.tables} tables, "
        f"{'with' if a.seed else 'no'} schema seed, {a.rounds} rounds; {os.cpu_count()} "
        f"cores, load {os.getloadavg()[0]:.1f} at the start",
        flush=True,
    )
    print(HEADER, flush=True)
    results: list[Result] = []
    for i in range(a.rounds):
        k = i % len(codes)
        for code in codes[k:] + codes[:k]:
            r = run_once(code, cap, i + 1, a.seed)
            results.append(r)
            print(row(r), flush=True)
    print()
    print("\n".join(summary(codes, results)))
    if a.jobs:
        for r in results:
            print(f"\n{r.code} #{r.round}: Spark jobs per phase")
            print("\n".join(r.jobs))


if __name__ == "__main__":
    main()
