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

Over Spark Connect a session is a session on the server, held until released: each one
given out is a clone of the run's (`cloneSession`) taken from a pool of the run's own
(`_Pool`), its settings put back to the run's, and returned with `done`; `release_all`
releases them at the end of the run. Their ids follow from the run's session id
(`remote.slot_id`), so that a run taking over from a killed one finds them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import SparkSession

from ticdc_sync.spark.runtime import remote
from ticdc_sync.spark.runtime.remote import is_connect

T = TypeVar("T")
Out = Callable[[str], None]


def runtime_conf(spark: SparkSession) -> dict[str, str]:
    """`spark`'s runtime SQL settings as they are now, for `target_session`: taken once, at
    the start of a run, because the run's session later sets some for a block only (a
    staging commit's userMetadata, a read's split size) while applies start beside it.
    Over Spark Connect every setting the session shows (asking each whether it is
    modifiable would be a call to the server per setting; a clone has them all)."""
    if is_connect(spark):
        return dict(sorted(spark.conf.getAll.items()))
    return {k: v for k, v in sorted(spark.conf.getAll.items()) if spark.conf.isModifiable(k)}


def target_session(spark: SparkSession, conf: dict[str, str]) -> SparkSession:
    """A session sharing `spark`'s SparkContext and Delta log cache, with its own SQL conf
    and temp views, and the runtime SQL settings `conf` (`runtime_conf`; a new session
    starts from the SparkContext's conf only). Over Spark Connect, one of the run's pool
    (give it back with `done`)."""
    if is_connect(spark):
        return _pool(spark).take(conf)
    session = spark.newSession()
    for key, value in conf.items():
        if session.conf.get(key, None) != value:
            session.conf.set(key, value)
    return session


def done(session: SparkSession) -> None:
    """`session` (from `target_session`) is no longer used: over Spark Connect it goes back
    to its pool; a classic one is left to the garbage collector."""
    pool = getattr(session, _POOL_ATTR, None)
    if pool is not None:
        pool.give_back(session)


def release_all(spark: SparkSession) -> None:
    """Release on the server every session of `spark`'s pool (the end of a run)."""
    with _pools_lock:
        pool = _pools.pop(spark.session_id, None) if is_connect(spark) else None
    if pool is not None:
        pool.release()


_POOL_ATTR = "_ticdc_sync_pool"
_pools: dict[str, _Pool] = {}
_pools_lock = threading.Lock()


def _pool(spark: SparkSession) -> _Pool:
    with _pools_lock:
        pool = _pools.get(spark.session_id)
        if pool is None:
            pool = _pools[spark.session_id] = _Pool(spark)
        return pool


class _Pool:
    """The Spark Connect sessions a run opened beside its own, free or in use; each is a
    clone of the run's session with the id `remote.slot_id(run's id, n)`."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.lock = threading.Lock()
        self.free: list[SparkSession] = []
        self.all: list[SparkSession] = []

    def take(self, conf: dict[str, str]) -> SparkSession:
        with self.lock:
            session = self.free.pop() if self.free else None
            slot = len(self.all)
            if session is None:
                self.all.append(None)  # type: ignore[arg-type]  # the slot is taken
        if session is None:
            session = self.spark.cloneSession(remote.slot_id(self.spark.session_id, slot))
            # What a session made by the builder has (the clone is made without it).
            session.release_session_on_close = True
            setattr(session, _POOL_ATTR, self)
            with self.lock:
                self.all[slot] = session
        _reset(session, conf)
        return session

    def give_back(self, session: SparkSession) -> None:
        with self.lock:
            self.free.append(session)

    def release(self) -> None:
        with self.lock:
            sessions, self.all, self.free = [s for s in self.all if s is not None], [], []
        for session in sessions:
            with contextlib.suppress(Exception):
                session.stop()


def _reset(session: SparkSession, conf: dict[str, str]) -> None:
    """Put `session`'s settings back to `conf`: a clone copies what its source had set at
    that moment (a block's setting included), a pooled session what its last user left."""
    now = session.conf.getAll
    for key, value in conf.items():
        if now.get(key) != value:
            session.conf.set(key, value)
    for key in now.keys() - conf.keys():
        session.conf.unset(key)


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
