"""Apply a window's targets side by side: one thread and one Spark session per target.

Each target's apply is a chain of small jobs with driver work between them (Delta
commits, snapshot updates, planning), and its jobs often have fewer tasks than the
cluster has cores. Run one after another, the executors idle through every gap; run
side by side, one target's jobs fill another's gaps (benchmarks/README.md).

Targets are independent: each MERGE and DDL commits to its own Delta table with its own
marker. Two things are shared and handled here:
- The marker travels in a session conf (`state.commit_marker`), and the MERGE source is a
  temp view: both are per session, so each target gets a session of its own
  (`SparkSession.newSession`, with this session's runtime SQL settings copied over).
- A RENAME TABLE carries one target's rows into another: `executor` runs the targets in
  epochs around such a rename.

This module must not decide what a target applies (the plan does) nor
report results (the runner does); it only schedules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")
Out = Callable[[str], None]

# Targets applied at once. Beyond a few, more threads only queue more jobs for the same
# executors and hold more query plans in the driver.
MAX_CONCURRENT_TARGETS = 4


def target_session(spark: SparkSession) -> SparkSession:
    """A session sharing `spark`'s SparkContext and Delta log cache, with its own SQL conf
    and temp views; runtime SQL settings of `spark` are copied (a new session starts
    from the SparkContext's conf only)."""
    session = spark.newSession()
    for key, value in sorted(spark.conf.getAll.items()):
        if spark.conf.isModifiable(key) and session.conf.get(key, None) != value:
            session.conf.set(key, value)
    return session


class GroupedOut:
    """Collects one target's lines and prints them together when it is done, so that the
    lines of targets applied side by side do not interleave."""

    _lock = threading.Lock()

    def __init__(self, out: Out) -> None:
        self._out = out
        self._lines: list[str] = []

    def __call__(self, line: str) -> None:
        self._lines.append(line)

    def flush(self) -> None:
        with self._lock:
            for line in self._lines:
                self._out(line)
            self._lines.clear()


def run_all(tasks: Sequence[Callable[[], T]], side_by_side: bool) -> list[T | BaseException]:
    """Run `tasks` (one per target), side by side or in order; each result or the exception
    it raised, in the order of `tasks`. Every task runs to its end even when another fails."""
    if not side_by_side or len(tasks) < 2:
        return [_outcome(t) for t in tasks]
    with ThreadPoolExecutor(
        max_workers=min(len(tasks), MAX_CONCURRENT_TARGETS), thread_name_prefix="ticdc-apply"
    ) as pool:
        futures = [pool.submit(_outcome, t) for t in tasks]
        return [f.result() for f in futures]


def _outcome(task: Callable[[], T]) -> T | BaseException:
    try:
        return task()
    except Exception as e:  # noqa: BLE001 - handed back to the caller, which re-raises it
        return e
