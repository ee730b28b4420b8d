"""Targets applied side by side (the run loop's apply workers): one Spark session per target,
and their output lines kept together.

Each target's apply is a chain of small jobs with driver work between them (Delta
commits, snapshot updates, planning), and its jobs often have fewer tasks than the
cluster has cores. Run one after another, the executors idle through every gap; run
side by side, one target's jobs fill another's gaps (benchmarks/README.md).

Targets are independent: each MERGE and DDL commits to its own Delta table with its own
marker. The marker travels in a session conf (`conf.commit_marker`), and the MERGE source
is a temp view: both are per session, so each target gets a session of its own
(`SparkSession.newSession`, with the run's runtime SQL settings as they were at its
start). Which targets run, and when, is the loop's (`loop`, `schedule`); this module only
gives each its session and its output.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")
Out = Callable[[str], None]


def runtime_conf(spark: SparkSession) -> dict[str, str]:
    """`spark`'s runtime SQL settings as they are now, for `target_session`: taken once, at
    the start of a run, because the run's session later sets some for a block only (a
    staging commit's userMetadata, a read's split size) while applies start beside it."""
    return {k: v for k, v in sorted(spark.conf.getAll.items()) if spark.conf.isModifiable(k)}


def target_session(spark: SparkSession, conf: dict[str, str]) -> SparkSession:
    """A session sharing `spark`'s SparkContext and Delta log cache, with its own SQL conf
    and temp views, and the runtime SQL settings `conf` (`runtime_conf`; a new session
    starts from the SparkContext's conf only)."""
    session = spark.newSession()
    for key, value in conf.items():
        if session.conf.get(key, None) != value:
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
