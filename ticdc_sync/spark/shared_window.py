"""One read of the staged row events for several targets of one source applied in one round.

Each target's typing (`rows.TargetWriter.typed_segment`) reads the staging table with its
own filter: for T targets that is T Delta scans of the window (each with its own
file-skipping job and query planning over the staging table's log), each reading every
staged event of the window to keep the few of its tables. A `SharedWindow` reads the window
once, for the tables and commit_ts ranges of every target given to it, into a copy on local
disk (a local checkpoint, as a MERGE source copy is), shared by the targets' sessions as a
global temporary view; each target's typing then filters that copy instead of the staging
table, for the row segments the copy covers (`covers`), and the staging table for any other.

The copy holds the staged events as they are (same columns, same values): what a target
reads from it, after its own filter, is what it would read from the staging table, since a
segment's events are all staged before the plan gives it (its hi is at or below every
partition's watermark). It is a cache of one round of applies only: made by the first apply
of the round that needs it, dropped when the last target that may use it is done, or at the
end of the run (`Windows.close`); never written to the warehouse, so a run killed between two
targets leaves nothing of it behind.

`Windows` is the engine's side (`spark.engine.SparkEngine.apply`): the run loop tells each
apply which targets of its source are due with it (`engine.ApplyJob.peers`); the first apply
whose segments no current copy covers builds one for all of them, when at least
`SHARE_FROM` of them have row segments. This module decides nothing about which targets
apply or when.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.events import KIND_ROW
from ticdc_sync.plan.model import TargetPlan
from ticdc_sync.plan.steps import Rows, end_ts
from ticdc_sync.spark.labels import job_name
from ticdc_sync.spark.rows import SOURCE_COPY, drop_checkpoint
from ticdc_sync.spark.state import State

Window = tuple[int, int]  # (lo, hi]: the commit_ts range of a segment
Table = tuple[str, str]  # (db, tbl) as staged

# Fewer targets due together than this read the staging table each (no copy). For 3 small
# targets the copy measured no slower than their 3 scans (`benchmarks/apply_cost.py`,
# benchmarks/README.md); for 1 or 2 it has little to save, and it was not measured there.
SHARE_FROM = 3


class SharedWindow:
    """The staged row events of some tables over some commit_ts ranges, read once."""

    def __init__(
        self, spark: SparkSession, view: str, copy: DataFrame, spans: Mapping[Table, list[Window]]
    ) -> None:
        self._spark = spark
        self.view = view
        self._copy = copy
        self.spans = spans

    @classmethod
    def build(
        cls,
        spark: SparkSession,
        state: State,
        source: str,
        windows: Mapping[Table, Iterable[Window]],
    ) -> SharedWindow | None:
        """Copy the staged row events of `source` for each upstream (db, tbl) inside its
        windows; None when there is nothing to share (no windows). One Spark job (plus the
        staging table's file skipping)."""
        spans = {t: sorted({w for w in ws if w[1] > w[0]}) for t, ws in windows.items()}
        spans = {t: ws for t, ws in spans.items() if ws}
        if not spans:
            return None
        lo = min(w[0] for ws in spans.values() for w in ws)
        hi = max(w[1] for ws in spans.values() for w in ws)
        # The overall commit_ts range first, which the staging table's file statistics
        # skip by; then each table's own ranges.
        ev = state.staging.events(spark).where(
            (F.col("source") == source)
            & (F.col("kind") == KIND_ROW)
            & (F.col("commit_ts") > lo)
            & (F.col("commit_ts") <= hi)
        )
        # Tables with the same windows (most of them: targets applied together usually
        # start from the same marker) share one term.
        by_windows: dict[tuple[Window, ...], list[Table]] = {}
        for t, ws in sorted(spans.items()):
            by_windows.setdefault(tuple(ws), []).append(t)
        ev = ev.where(
            reduce(lambda a, b: a | b, (_inside(ts, ws) for ws, ts in by_windows.items()))
        )
        view = f"__ticdc_sync_window_{uuid.uuid4().hex}"
        with job_name(spark, f"ticdc-sync: shared window of {source}"):
            # On local disk, as a MERGE source copy: a window has no size bound.
            copy = ev.localCheckpoint(eager=True, storageLevel=SOURCE_COPY)
        copy.createGlobalTempView(view)
        return cls(spark, view, copy, spans)

    def covers(self, step: Rows) -> bool:
        """Whether the copy holds every staged row event `step` reads: each of its tables
        over a window that contains (step.lo, step.hi]."""
        return all(
            any(lo <= step.lo and step.hi <= hi for lo, hi in self.spans.get((t.db, t.table), ()))
            for t in step.tables
        )

    def events(self, spark: SparkSession) -> DataFrame:
        """The copied events, read in `spark` (a target's own session)."""
        db = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
        return spark.table(f"`{db}`.`{self.view}`")

    def drop(self) -> None:
        """Forget the view and free the copy's disk blocks now."""
        self._spark.catalog.dropGlobalTempView(self.view)
        drop_checkpoint(self._copy)


def _inside(tables: list[Table], windows: Iterable[Window]) -> Column:
    """Events of one of `tables` with a commit_ts inside one of `windows`."""
    table = F.struct(F.col("db"), F.col("tbl"))
    listed = table.isin([F.struct(F.lit(db), F.lit(tbl)) for db, tbl in tables])
    ranges = reduce(
        lambda a, b: a | b,
        ((F.col("commit_ts") > lo) & (F.col("commit_ts") <= hi) for lo, hi in windows),
    )
    return listed & ranges


def row_steps(target: TargetPlan, limit: int | None) -> list[Rows]:
    """The row segments an apply of `target` up to `limit` runs (those that read rows)."""
    return [
        s
        for s in target.steps
        if isinstance(s, Rows) and s.error is None and s.tables
        if limit is None or end_ts(s) <= limit
    ]


def segments(steps: Iterable[Rows]) -> dict[Table, list[Window]]:
    """The commit_ts windows of `steps` per upstream table: what `SharedWindow.build`
    copies for them."""
    windows: dict[Table, list[Window]] = {}
    for step in steps:
        for t in step.tables:
            windows.setdefault((t.db, t.table), []).append((step.lo, step.hi))
    return windows


@dataclass(eq=False)
class _Entry:
    window: SharedWindow
    pending: set[str]  # targets it was built for that have not used it yet
    users: set[str] = field(default_factory=set)  # targets reading it now
    retired: bool = False  # a newer copy replaced it: dropped once unused


class Windows:
    """The shared copies of one engine's applies: at most one current copy per source, made
    and dropped as `SharedWindow` says. Thread-safe (applies run on worker threads)."""

    def __init__(self, spark: SparkSession, state: State, share_from: int | None = None) -> None:
        self._spark = spark
        self._state = state
        self.share_from = SHARE_FROM if share_from is None else share_from
        self._lock = threading.Lock()
        self._source_locks: dict[str, threading.Lock] = {}
        self._current: dict[str, _Entry] = {}
        self._entries: list[_Entry] = []  # current and retired ones still in use
        self.built = 0  # copies made (for tests and benchmarks)

    def acquire(
        self,
        source: str,
        target: TargetPlan,
        limit: int | None,
        peers: Sequence[tuple[TargetPlan, int | None]],
    ) -> SharedWindow | None:
        """The copy `target`'s apply (up to `limit`) reads its row segments from, or None
        (it reads the staging table). `peers`: the targets of `source` due with it (itself
        among them), with their limits. Pair each copy returned with a `release`."""
        mine = row_steps(target, limit)
        if not mine:
            return None
        with self._lock:
            lock = self._source_locks.setdefault(source, threading.Lock())
        with lock:
            with self._lock:
                e = self._current.get(source)
                if e is not None:
                    # A target neither due now nor applying will not come for this copy.
                    e.pending &= {t.name for t, _ in peers} | e.users
                    if all(e.window.covers(s) for s in mine):
                        e.users.add(target.name)
                        return e.window
                    self._settle(e)
            wanted = {t.name: row_steps(t, lim) for t, lim in peers}
            wanted[target.name] = mine
            wanted = {n: s for n, s in wanted.items() if s}
            if len(wanted) < self.share_from:
                return None
            # One Spark job, outside the engine-wide lock: other sources' applies go on.
            window = SharedWindow.build(
                self._spark,
                self._state,
                source,
                segments(s for steps in wanted.values() for s in steps),
            )
            if window is None:
                return None
            with self._lock:
                self.built += 1
                old = self._current.get(source)
                if old is not None:
                    old.retired = True
                    self._settle(old)
                e = _Entry(window, set(wanted) - {target.name}, {target.name})
                self._current[source] = e
                self._entries.append(e)
            return window

    def release(self, source: str, target: str, window: SharedWindow | None) -> None:
        """`target`'s apply no longer reads `window` (from `acquire`)."""
        if window is None:
            return
        with self._lock:
            for e in self._entries:
                if e.window is window:
                    e.users.discard(target)
                    e.pending.discard(target)
                    self._settle(e)
                    return

    def close(self) -> None:
        """Drop every copy (the end of the run)."""
        with self._lock:
            for e in list(self._entries):
                e.retired = True
                e.users.clear()
                self._settle(e)

    def open(self) -> int:
        """Copies not dropped yet."""
        with self._lock:
            return len(self._entries)

    def _settle(self, e: _Entry) -> None:
        """Drop `e` when nothing reads it and nothing will (under the lock)."""
        if e.users or (e.pending and not e.retired):
            return
        self._entries.remove(e)
        for source, cur in list(self._current.items()):
            if cur is e:
                del self._current[source]
        e.window.drop()
