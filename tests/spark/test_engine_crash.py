"""Killing `run` with SIGKILL (process group, JVM included) at random moments loses nothing.

Each attempt runs `ticdc-sync run` in its own process group, waits for it to start working,
kills the whole group at a random moment, and finally a clean run must leave tables equal to
the generated history's truth: nothing lost, nothing doubled. The moment is a random share of
how long the same run takes uninterrupted (timed on a copy of the project first), so that the
kill lands inside the run however fast or loaded the machine is.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.spark import runner

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _run_and_kill(root, delay_after_start: float, timeout: float = 600) -> tuple[str, float]:
    """(outcome and last lines, seconds from the start of real work to the exit or kill)."""
    env = dict(os.environ, TZ="UTC", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ticdc_sync.cli", "run", "--project", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        text=True,
    )
    started = threading.Event()
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("read+decode") or line.startswith("apply"):
                started.set()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    # Wait until the run is doing real work (staging done), then a random extra delay.
    while not started.is_set() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    working = time.monotonic()
    end = working + delay_after_start
    while proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    outcome = "finished" if proc.poll() is not None else "killed"
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    took = time.monotonic() - working
    t.join(timeout=10)
    return outcome + ": " + "".join(lines[-3:]), took


def _uninterrupted_seconds(root) -> float:
    """How long the real work of `run` takes on a copy of the project as it is now."""
    copy = root.parent / (root.name + "-timing")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy, symlinks=True)
    try:
        outcome, took = _run_and_kill(copy, delay_after_start=600)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert outcome.startswith("finished"), outcome
    return took


def test_sigkill_at_random_moments_then_resume_equals_truth(spark, tmp_path):
    history = generate(
        HistoryConfig(seed=11, transactions=50, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "canal-json", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    rng = random.Random(2024)
    outcomes = []
    # Two chunks: the first run is killed while merging; the second while applying on top
    # of a half-applied target. Each kill lands at a random moment inside the run.
    for chunk in enc.chunks(2):
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        delay = rng.uniform(0.05, 0.7) * _uninterrupted_seconds(root)
        outcomes.append(_run_and_kill(root, delay_after_start=delay)[0])
    assert any(o.startswith("killed") for o in outcomes), outcomes
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0, outcomes
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"after kills {outcomes}: {qualified}")


def _write_chunk(root, n: int, chunk) -> None:
    """Capture lines of `chunk` as new files (written aside, then renamed into place), so
    that a `--follow` run reading the folder never sees half a file."""
    staging = root / f"chunk-{n}"
    write_captures(staging, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
    folder = root / "captures" / "cdc"
    folder.mkdir(parents=True, exist_ok=True)
    for f in sorted((staging / "captures" / "cdc").iterdir()):
        f.rename(folder / f"{f.stem}-{n:03d}.jsonl")
    shutil.rmtree(staging)


def _follow_and_kill(root, feed, kill_after: float, timeout: float = 600) -> str:
    """`run --follow` (targets at lag 0); once it has polled, feed it more captures
    (`feed()`, while it stages and applies), and SIGKILL its process group `kill_after`
    seconds after its first poll."""
    env = dict(os.environ, TZ="UTC", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ticdc_sync.cli", "run", "--follow", "--project", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        text=True,
    )
    polled = threading.Event()
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("poll "):
                polled.set()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    while not polled.is_set() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    feed()
    end = time.monotonic() + kill_after
    while proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    outcome = "exited" if proc.poll() is not None else "killed"
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    t.join(timeout=10)
    return outcome + ": " + "".join(lines[-3:])


def test_sigkill_while_staging_and_applies_overlap_then_resume_equals_truth(spark, tmp_path):
    """A `--follow` run stages new records while its targets are applied (lag 0); killed at
    random moments of that, then resumed, it leaves the truth."""
    history = generate(
        HistoryConfig(seed=12, transactions=60, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "canal-json", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n    target_lag: 0\n',
    )
    rng = random.Random(4096)
    chunks = enc.chunks(4)
    _write_chunk(root, 0, chunks[0])
    outcomes = []
    for n in (1, 3):
        # Each follower gets one chunk at its start and one fed while it works.
        if n == 3:
            _write_chunk(root, 2, chunks[2])
        outcomes.append(
            _follow_and_kill(
                root,
                lambda n=n: _write_chunk(root, n, chunks[n]),
                kill_after=rng.uniform(1.0, 12.0),
            )
        )
    assert all(o.startswith("killed") for o in outcomes), outcomes
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0, outcomes
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"after kills {outcomes}: {qualified}")
