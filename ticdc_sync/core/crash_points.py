"""Named points on every commit path, where a test stops a run as a process death would.

Every commit ticdc-sync makes to the warehouse first reaches its point (`reach`, called by
`spark.runtime.conf.before_commit` and by the lease): the staging table's appends, trims and
compaction, each table's creation, a load, each DDL part, the MERGE, the rewrite and the
round (their files written, each target's commit), sync points, the lease. `POINTS` names
them all and says which commit each comes before; tests/unit/test_crash_points.py fails on a
point used in the code that is not named here, and on a name no code reaches.

A test arms one point (`armed`): the `nth` time a run reaches it (for `target`, if given),
`SimulatedCrash` is raised there, before the commit. From then on the process counts as
dead: every later `reach`, on any thread, raises too, so no other thread of the run commits
after the "death" (the stager, the apply workers, the maintenance beside the polls, the
lease's renewals). The run lease is left held, as a killed process leaves it, and its token
is remembered as abandoned (`abandon`), which a new run in the same process takes over as it
takes over the lease of a process that is gone (`warehouse.lease.gone_here`). Where the
point writes files into a folder (`partial_in`), a half-written data file is left there, as
a process killed while writing leaves one. The test then drops the JVM's cached Delta logs
and runs again (tests/crash_harness.py).

`SimulatedCrash` is a `BaseException`: no `except Exception` of the run catches it, as
nothing catches SIGKILL. Unarmed, `reach` costs one attribute read. It must not be used for
anything but crash tests: nothing here changes what a run commits when no test arms it.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# point -> the commit it comes before. Names are `family.moment`.
POINTS: dict[str, str] = {
    # The staging table (spark/staging/)
    "staging.append": "a poll's staging commit: its events, with the tallies",
    "staging.tallies": "a commit of tallies alone (counted back after an append, or a trim's bound published)",
    "staging.dedupe": "a batch's records staged twice, replaced by one copy (replaceWhere)",
    "staging.layout": "the staging table's properties or columns brought up to date",
    "staging.trim": "a trim's DELETE of staged events every target has applied",
    "staging.compact": "OPTIMIZE of the staging table's small files",
    "staging.vacuum": "VACUUM of the staging table",
    "state.create": "a state table's creation (staging, quarantine, schema history, ...)",
    "quarantine.append": "bad records or values kept in the quarantine table",
    "schema_history.append": "upstream schemas recorded in the schema history table",
    # A target (spark/apply/, spark/runtime/table_create.py)
    "create": "a target's creation (its first commit), or its replacement by an empty table",
    "load": "a target's rows loaded from a Dumpling export, in one commit",
    "ddl.part": "each Delta part of an upstream DDL (ALTER, backfill, rebuild, rows copied in)",
    "merge": "a row segment's MERGE (or INSERT) with the target's marker",
    "marker": "a commit of the target's marker alone (a segment that changed no row)",
    "rewrite.files": "a rewrite's new files, written before its commit (delta-rs)",
    "rewrite.commit": "a rewrite's commit swapping its files for the old ones",
    "round.files": "a round's files, written for every target before the first commit",
    "round.commit": "each target's commit in a round (the nth: between two targets' commits)",
    # A target's layout (spark/apply/relayout.py)
    "layout.rebuild": "a target's rows rewritten with its new partition columns (no marker)",
    "layout.cluster": "ALTER TABLE ... CLUSTER BY of a target (a new clustering, or it again after a rewrite)",
    "layout.properties": "a target's entry `properties` unset or set, or its `comment` (ALTER TABLE, COMMENT ON TABLE)",
    # A target's maintenance (spark/apply/maintain.py), between its applies
    "maintenance.compact": "OPTIMIZE of a target's small files (no marker)",
    "maintenance.vacuum": "VACUUM of a target's files removed longer ago than its retention",
    "maintenance.checkpoint": "a checkpoint of a target's log after many commits without one",
    # A target's catalog entry (spark/apply/catalog_sync.py)
    "catalog.register": "a target's CREATE SCHEMA/CREATE TABLE in the output's catalog",
    "catalog.drop": "the DROP TABLE of a dropped or renamed-away target's catalog entry",
    "catalog.record": "the row that records a catalog step in the `catalog` state table",
    # The run (spark/engine.py, warehouse/lease.py)
    "sync_point": "a sync point's rows appended to the sync_points table",
    "lease.acquire": "the run lease taken (before Spark starts)",
    "lease.renew": "a renewal of the run lease (every ttl/6 seconds)",
    "lease.release": "the run lease released at the end of the run",
}


class SimulatedCrash(BaseException):
    """A run stopped at a crash point, as by SIGKILL (a test armed the point)."""


@dataclass
class Arming:
    """One armed point: fires the `nth` time the point is reached (for `target`)."""

    point: str
    nth: int = 1
    target: str | None = None
    seen: int = 0
    fired: bool = False
    # (point, target) of every reach while armed, in order: what a test's scenario reaches.
    reached: list[tuple[str, str | None]] = field(default_factory=list)


_lock = threading.Lock()
_arming: Arming | None = None
_dead = False
_fired = ""  # the point the run stopped at, said again by every later raise
_abandoned: set[str] = set()


def reach(point: str, *, target: str | None = None, partial_in: str | None = None) -> None:
    """A commit named `point` is about to be made (for `target`). Raises `SimulatedCrash`
    when a test armed this point and this is its moment, or when the run already "died";
    otherwise nothing."""
    if _arming is None and not _dead:
        return
    _reach(point, target, partial_in)


def _reach(point: str, target: str | None, partial_in: str | None) -> None:
    global _dead, _fired
    if point not in POINTS:
        raise AssertionError(f"crash point {point!r} is not in crash_points.POINTS")
    with _lock:
        if _dead:
            raise SimulatedCrash(f"{_fired} (then reached {point})")
        a = _arming
        if a is None:
            return
        a.reached.append((point, target))
        if a.point != point or (a.target is not None and a.target != target):
            return
        a.seen += 1
        if a.seen < a.nth:
            return
        a.fired = True
        _dead = True
        _fired = f"crash point {point}" + (f" of target {target}" if target else "")
    if partial_in is not None:
        _leave_partial_file(partial_in)
    raise SimulatedCrash(_fired)


def _leave_partial_file(folder: str) -> None:
    """A data file cut off mid-write, as a killed writer leaves one (local folders only)."""
    if "://" in folder and not folder.startswith("file:"):
        return
    path = folder.removeprefix("file://").removeprefix("file:")
    os.makedirs(path, exist_ok=True)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    with open(os.path.join(path, name), "wb") as f:
        f.write(b"PAR1\x15\x00\x15")  # a Parquet header and the start of a page: no footer


@contextmanager
def armed(point: str, *, nth: int = 1, target: str | None = None) -> Iterator[Arming]:
    """Arm `point` inside the block (tests only); on leaving it the process is alive again
    and nothing is armed."""
    global _arming
    if point not in POINTS:
        raise ValueError(f"unknown crash point {point!r}: one of {', '.join(sorted(POINTS))}")
    a = Arming(point, nth, target)
    with _lock:
        _arming = a
    try:
        yield a
    finally:
        reset()


@contextmanager
def recording() -> Iterator[Arming]:
    """Record every point reached inside the block (`Arming.reached`), firing none."""
    global _arming
    a = Arming("", nth=0)
    with _lock:
        _arming = a
    try:
        yield a
    finally:
        reset()


def reset() -> None:
    """Nothing armed, and the process alive again (a test's next run)."""
    global _arming, _dead
    with _lock:
        _arming = None
        _dead = False


def crashed() -> bool:
    """Whether the run stopped at an armed point (and every later point raises)."""
    return _dead


def abandon(token: str) -> None:
    """The lease `token` was held by a run that stopped at a crash point: it counts as held
    by a process that is gone."""
    with _lock:
        _abandoned.add(token)


def abandoned(token: str) -> bool:
    """Whether the lease `token` was left by a run stopped at a crash point."""
    return token in _abandoned
