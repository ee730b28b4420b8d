"""Build throw-away projects around recorded Kafka records and read back their Delta targets;
kill `ticdc-sync run` processes at random moments of their work.

Used by the engine's end-to-end tests: records are written as capture files (DESIGN.md §1),
the project is loaded by the real loader and run by the real runner on the shared session.
The crash tests (tests/spark/*_crash.py, tests/s3/test_example_on_s3.py) start `ticdc-sync`
as a process of its own and SIGKILL it, JVM included (`run_and_kill`), at a moment drawn
inside its work (`KillPoints`).
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.processes import kill_tree
from ticdc_sync.core.model import Project
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.locations import target_location

PROFILES = """\
test:
  target: dev
  outputs:
    dev:
      spark: {master: "local[2]"}
      warehouse: warehouse
      transport: {type: files, captures: captures}
"""


def write_captures(root: Path, topic: str, records: Iterable[tuple]) -> None:
    """records: (partition, offset, key: bytes|None, value: bytes|None[, timestamp])."""
    folder = root / "captures" / topic
    folder.mkdir(parents=True, exist_ok=True)
    by_part: dict[int, list[str]] = {}
    for rec in records:
        partition, offset, key, value = rec[:4]
        ts = rec[4] if len(rec) > 4 else 1700000000000 + offset
        line: dict = {"partition": partition, "offset": offset, "timestamp": ts}
        try:
            k = key.decode("utf-8") if key is not None else None
            v = value.decode("utf-8") if value is not None else None
            line.update(key=k, value=v)
        except UnicodeDecodeError:
            line.update(
                key=base64.b64encode(key).decode() if key is not None else None,
                value=base64.b64encode(value).decode() if value is not None else None,
                encoding="base64",
            )
        by_part.setdefault(partition, []).append(json.dumps(line, sort_keys=True))
    for p, lines in by_part.items():
        path = folder / f"part-{p}.jsonl"
        with path.open("a", encoding="utf-8") as f:
            for ln in lines:
                f.write(ln + "\n")


def make_project(
    root: Path,
    *,
    protocol: str,
    topic: str = "t",
    tables: str = '  - upstream: "shop.*"\n    name: "{table}"\n',
    schema_sql: str | None = None,
    options: str = "",
    defaults: str = "",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ticdc_sync.yml").write_text(f"name: test\nprofile: test\n{defaults}")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources").mkdir(exist_ok=True)
    opts = f"    options:\n{options}" if options else ""
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: src\n    protocol: {protocol}\n    topics: [{topic}]\n{opts}"
    )
    (root / "tables").mkdir(exist_ok=True)
    (root / "tables" / "t.yml").write_text("tables:\n" + tables)
    if schema_sql:
        (root / "schema").mkdir(exist_ok=True)
        (root / "schema" / "shop.sql").write_text(schema_sql)
    return root


def load(root: Path) -> Project:
    return load_project(root)


def read_target(spark, project: Project, name: str, order_by: str = "1") -> list[dict]:
    from ticdc_sync.warehouse.locations import warehouse_path

    loc = target_location(warehouse_path(project), name)
    df = spark.read.format("delta").load(loc)
    return [r.asDict() for r in df.orderBy(*[c.strip() for c in order_by.split(",")]).collect()]


def collect_each(frames: Sequence) -> list[list[dict]]:
    """The rows of each DataFrame of `frames` (`Row.asDict()`, in no order), as separate
    `collect()`s return them, in one Spark job per schema: frames of one schema (one table
    read as of several TSOs) are unioned, each row tagged with its frame's index."""
    from pyspark.sql import functions as F

    tag = "__frame_index"
    by_schema: dict[str, list[int]] = {}
    for i, df in enumerate(frames):
        assert tag not in df.columns
        by_schema.setdefault(df.schema.json(), []).append(i)
    out: list[list[dict]] = [[] for _ in frames]
    for indexes in by_schema.values():
        tagged = [frames[i].withColumn(tag, F.lit(i)) for i in indexes]
        union = tagged[0]
        for df in tagged[1:]:
            union = union.union(df)
        for row in union.collect():
            values = row.asDict()
            out[values.pop(tag)].append(values)
    return out


def target_schema(spark, project: Project, name: str) -> list[tuple[str, str]]:
    from ticdc_sync.warehouse.locations import warehouse_path

    loc = target_location(warehouse_path(project), name)
    df = spark.read.format("delta").load(loc)
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def canal_row(
    db: str, table: str, op: str, ts: int, data: dict, mysql_type: dict, pk: list[str], old=None
) -> bytes:
    """A TiCDC Canal-JSON row message with the TiDB extension (codec facts 1.1, 1.6)."""
    return json.dumps(
        {
            "id": 0,
            "database": db,
            "table": table,
            "pkNames": pk,
            "isDdl": False,
            "type": op,
            "es": ts >> 18,
            "ts": 0,
            "sql": "",
            "sqlType": {k: 12 for k in mysql_type},
            "mysqlType": mysql_type,
            "data": [data],
            "old": [old] if old else None,
            "_tidb": {"commitTs": ts},
        }
    ).encode()


def canal_watermark(ts: int) -> bytes:
    """A TiCDC Canal-JSON TIDB_WATERMARK message (codec facts 1.6)."""
    return json.dumps(
        {
            "id": 0,
            "database": "",
            "table": "",
            "pkNames": None,
            "isDdl": False,
            "type": "TIDB_WATERMARK",
            "es": ts >> 18,
            "ts": 0,
            "sql": "",
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"watermarkTs": ts},
        }
    ).encode()


def as_staged_columns(state, df):
    """`df` padded to the staging table's columns (without `source`): its own columns as
    they are, every other one NULL of its type. For staging hand-made events."""
    from pyspark.sql import functions as F

    full = state.events().drop("source").schema
    return df.select(
        *[
            (F.col(f"`{f.name}`") if f.name in df.columns else F.lit(None).cast(f.dataType)).alias(
                f.name
            )
            for f in full.fields
        ]
    )


# The first lines a run prints once its real work begins: staging is done, or an apply starts
# (`ticdc_sync.spark.staging.batch`, the executor's progress).
WORK_STARTED = ("read+decode", "apply")


@dataclass(frozen=True)
class CliRun:
    """A `ticdc-sync` process that ran until it exited or was killed."""

    outcome: str  # "killed", or "finished" (it exited before the kill)
    pid: int
    code: int  # its exit code (-9 when killed)
    lines: list[str]  # everything it printed
    seconds: float  # from the start of its real work to its exit or the kill

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def __str__(self) -> str:
        return f"{self.outcome}: " + "".join(self.lines[-3:])


def start_cli(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen:
    """`ticdc-sync *args` in its own process group (a kill takes its JVM too), its output
    (stdout and stderr) piped as text."""
    base = os.environ if env is None else env
    return subprocess.Popen(
        [sys.executable, "-m", "ticdc_sync.commands.cli", *args],
        cwd=cwd,
        env={**base, "TZ": "UTC", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def run_and_kill(
    args: Sequence[str],
    delay: float,
    *,
    started: tuple[str, ...] = WORK_STARTED,
    on_start: Callable[[], None] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
) -> CliRun:
    """Start `ticdc-sync *args`, wait until it prints a line starting with one of `started`
    (its real work began; at most `timeout` seconds), call `on_start`, and SIGKILL it
    `delay` seconds later unless it exited before: its process group and, at the same
    moment, its JVM's (`tests.processes.kill_tree`). Also when the test is interrupted
    meanwhile."""
    proc = start_cli(args, env=env, cwd=cwd)
    began = threading.Event()
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(started):
                began.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + timeout
        while not began.is_set() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        working = time.monotonic()
        if on_start is not None:
            on_start()
        end = working + delay
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        outcome = "finished" if proc.poll() is not None else "killed"
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
        code = proc.wait(timeout=60)
    took = time.monotonic() - working
    reader.join(timeout=10)
    return CliRun(outcome, proc.pid, code, lines, took)


# Lines a run prints as its work moves from step to step: staging begins, staging is done,
# the resolve, the applies begin, a target is applied (`ticdc_sync.spark.runtime.progress`,
# `ticdc_sync.spark.staging.batch`, the executor's line per target).
STEP_LINES = (
    ("progress: stage ",),
    ("read+decode",),
    ("progress: resolve",),
    ("progress: apply (",),
    ("apply ",),
)


@dataclass(frozen=True)
class KillPoint:
    """Kill a run `delay` seconds after it first prints a line starting with one of `lines`."""

    lines: tuple[str, ...]
    delay: float


class KillPoints:
    """Where to kill runs: after one of the lines a run prints at a step of its work
    (`STEP_LINES`, drawn from `rng`), plus a random delay of up to `spread` seconds, so that
    a kill lands inside that step or the next however fast or loaded the machine is.
    `first` leaves out the steps before it (for a kill once targets are being applied).

    (A random share of an uninterrupted run's length would need a run of its own to time.)"""

    def __init__(self, rng: random.Random, spread: float = 3.0, *, first: int = 0) -> None:
        self.rng, self.spread, self.steps = rng, spread, STEP_LINES[first:]

    def next(self) -> KillPoint:
        return KillPoint(self.rng.choice(self.steps), self.rng.uniform(0.0, self.spread))


def kill_at(args: Sequence[str], point: KillPoint, **kwargs) -> CliRun:
    """`run_and_kill` at `point`."""
    return run_and_kill(args, point.delay, started=point.lines, **kwargs)
