"""Children started with `die_with_parent()` (the test broker, the cluster's daemons) go when
the process that started them is killed with SIGKILL, so a killed test run leaves nothing
running. Real processes, no JVM: `sleep` stands in for the broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.kafka.helpers import SCRIPT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

STARTER = """
import importlib.util, subprocess, sys, time
spec = importlib.util.spec_from_file_location("kafka_script", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
hook = mod.die_with_parent() if sys.argv[2] == "yes" else None
child = subprocess.Popen(["sleep", "300"], start_new_session=True, preexec_fn=hook)
print(child.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited
    except OSError:
        return False


def _orphan_after_parent_killed(die: str, wait: float) -> tuple[int, bool]:
    """Start a parent that starts `sleep`, SIGKILL the parent; (sleep's pid, whether it is
    alive after at most `wait` seconds)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(SCRIPT), die], stdout=subprocess.PIPE, text=True
    )
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
        parent.wait(timeout=30)
        deadline = time.monotonic() + wait
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        return child, _alive(child)
    finally:
        parent.kill()
        parent.stdout.close()


def test_a_child_started_with_die_with_parent_goes_with_its_killed_parent():
    _, alive = _orphan_after_parent_killed("yes", wait=10)
    assert not alive


def test_without_it_the_child_outlives_its_killed_parent():
    """What `kafka.py start` relies on, and what shows the test above can fail."""
    child, alive = _orphan_after_parent_killed("no", wait=1)
    try:
        assert alive
    finally:
        os.kill(child, signal.SIGKILL)
