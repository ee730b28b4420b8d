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

A large copy is read in groups: each target filters every row of the copy it reads, so T
targets over a window of N events read T x N rows, which for a catch-up of a million events
over a hundred tables was most of each target's apply. When a copy holds at least
`SPLIT_ROWS` events for at least `SPLIT_FROM` targets, the targets are split into about
sqrt(T) groups, and each group's first apply copies the group's own tables out of the copy
(one job over it); the group's targets then read that smaller copy. About 2 x sqrt(T) x N
rows are read instead of T x N. The same rows either way: a group copy is the copy's events
of the group's tables.

`Windows` is the engine's side (`spark.engine.SparkEngine.apply`): the run loop tells each
apply which targets of its source are due with it (`engine.ApplyJob.peers`); the first apply
whose segments no current copy covers builds one for all of them, when at least
`SHARE_FROM` of them have row segments. This module decides nothing about which targets
apply or when.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core.events import KIND_ROW
from ticdc_sync.plan.model import Rows, TargetPlan, end_ts
from ticdc_sync.spark.apply.local_copies import drop_checkpoint, local_copy
from ticdc_sync.spark.runtime.labels import job_name
from ticdc_sync.spark.staging.state import State

Window = tuple[int, int]  # (lo, hi]: the commit_ts range of a segment
Table = tuple[str, str]  # (db, tbl) as staged

# Fewer targets due together than this read the staging table each (no copy). For 3 small
# targets the copy measured no slower than their 3 scans (`benchmarks/apply_cost.py`,
# benchmarks/README.md); for 1 or 2 it has little to save, and it was not measured there.
SHARE_FROM = 3
# A copy of at least SPLIT_ROWS events shared by at least SPLIT_FROM targets is read in
# groups of targets. A target's scan of a million copied events measured about half a
# CPU-second (benchmarks/README.md), so at 200,000 about a tenth: what a group's copy job
# costs. Below that, and for a --follow poll's few thousand events, the groups' jobs would
# cost more than they save.
SPLIT_ROWS = 200_000
SPLIT_FROM = 8


class SharedWindow:
    """The staged row events of some tables over some commit_ts ranges, read once; read in
    groups of targets when it is large (`groups`)."""

    def __init__(
        self,
        spark: SparkSession,
        view: str,
        copy: DataFrame,
        spans: Mapping[Table, list[Window]],
        groups: Sequence[frozenset[Table]] = (),
        group_of: Mapping[str, int] | None = None,
    ) -> None:
        self._spark = spark
        self.view = view
        self._copy = copy
        self.spans = spans
        self.groups = list(groups)  # each group's tables
        self._group_of = dict(group_of or {})  # target -> its group
        self._group_views: dict[int, str] = {}
        self._group_copies: dict[int, DataFrame] = {}
        self._locks = [threading.Lock() for _ in self.groups]
        self._lock = threading.Lock()
        self._dropped = False

    @classmethod
    def build(
        cls,
        spark: SparkSession,
        state: State,
        source: str,
        windows: Mapping[Table, Iterable[Window]],
        tables_of: Mapping[str, set[Table]] | None = None,
    ) -> SharedWindow | None:
        """Copy the staged row events of `source` for each upstream (db, tbl) inside its
        windows; None when there is nothing to share (no windows). One Spark job (plus the
        staging table's file skipping). `tables_of`: the tables each target sharing it
        reads, from which a large copy's groups are made (`split`)."""
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
        # Each table's own ranges: a small frame of spans, broadcast and joined once (a
        # semi join: an event inside two overlapping spans is kept once), whatever the
        # number of tables or of distinct windows. A predicate with a term per window grew
        # with the tables (tables created at different commit_ts each have their own), up
        # to a StackOverflowError in Spark's analysis at 1,000 tables.
        ev = ev.join(F.broadcast(_spans_frame(spark, spans)), _in_span(), "left_semi")
        counted = Observation()
        ev = ev.observe(counted, F.count(F.lit(1)).alias("rows"))
        view = f"__ticdc_sync_window_{uuid.uuid4().hex}"
        with job_name(spark, f"ticdc-sync: shared window of {source}"):
            # On local disk, as a MERGE source copy: a window has no size bound.
            copy = local_copy(ev)
        copy.createGlobalTempView(view)
        groups, group_of = split(_rows(counted), tables_of or {})
        return cls(spark, view, copy, spans, groups, group_of)

    def covers(self, step: Rows) -> bool:
        """Whether the copy holds every staged row event `step` reads: each of its tables
        over a window that contains (step.lo, step.hi]."""
        return all(
            any(lo <= step.lo and step.hi <= hi for lo, hi in self.spans.get((t.db, t.table), ()))
            for t in step.tables
        )

    def events(
        self, spark: SparkSession, target: str | None = None, step: Rows | None = None
    ) -> DataFrame:
        """The copied events, read in `spark` (a target's own session): for `target`'s
        `step`, its group's copy when the copy is read in groups (made by the first of the
        group to ask), else the whole copy."""
        group = self._group_of.get(target) if target is not None else None
        if group is not None and step is not None:
            mine = self.groups[group]
            if all((t.db, t.table) in mine for t in step.tables):
                view = self._group_view(spark, group)
                if view is not None:
                    return _global_view(spark, view)
        return _global_view(spark, self.view)

    def _group_view(self, spark: SparkSession, group: int) -> str | None:
        """The global view of `group`'s copy, made now in `spark` (the asking target's
        session) if it is not yet; None: the window was dropped meanwhile."""
        with self._locks[group]:
            with self._lock:
                if self._dropped:
                    return None
                view = self._group_views.get(group)
            if view is not None:
                return view
            whole = _global_view(spark, self.view)
            with job_name(spark, "ticdc-sync: shared window, a group's tables"):
                mine = F.broadcast(_tables_frame(spark, sorted(self.groups[group])))
                copy = local_copy(whole.join(mine, _in_table(), "left_semi"))
            view = f"__ticdc_sync_window_{uuid.uuid4().hex}"
            copy.createGlobalTempView(view)
            with self._lock:
                if self._dropped:  # dropped while the copy was made: not kept
                    self._spark.catalog.dropGlobalTempView(view)
                    drop_checkpoint(copy)
                    return None
                self._group_views[group] = view
                self._group_copies[group] = copy
            return view

    def drop(self) -> None:
        """Forget the views and free the copies' disk blocks now."""
        with self._lock:
            self._dropped = True
            groups = list(self._group_views.items())
            self._group_views.clear()
        self._spark.catalog.dropGlobalTempView(self.view)
        drop_checkpoint(self._copy)
        for group, view in groups:
            self._spark.catalog.dropGlobalTempView(view)
            drop_checkpoint(self._group_copies.pop(group))


def _global_view(spark: SparkSession, view: str) -> DataFrame:
    """A copy's global temporary view, read in `spark`."""
    db = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
    return spark.table(f"`{db}`.`{view}`")


def _rows(counted: Observation) -> int:
    """Rows a copy's job counted (0 where Spark knew the copy empty and ran no count)."""
    try:
        return int(counted.get["rows"] or 0)
    except Exception:  # noqa: BLE001 - never filled: an empty relation, counting node and all
        return 0


def split(
    rows: int, tables_of: Mapping[str, set[Table]]
) -> tuple[list[frozenset[Table]], dict[str, int]]:
    """The groups a copy of `rows` events shared by the targets of `tables_of` is read in:
    each group's tables, and each target's group. No groups (`([], {})`) for a copy below
    `SPLIT_ROWS` or shared by fewer than `SPLIT_FROM` targets. About sqrt(T) groups of
    targets in name order, which balances the groups' copies (each a read of the whole
    copy) against the targets' reads (each of its group's share)."""
    targets = sorted(t for t, tables in tables_of.items() if tables)
    if rows < SPLIT_ROWS or len(targets) < SPLIT_FROM:
        return [], {}
    n = math.isqrt(len(targets) - 1) + 1  # ceil(sqrt(T))
    size = math.ceil(len(targets) / n)
    groups: list[frozenset[Table]] = []
    group_of: dict[str, int] = {}
    for i in range(0, len(targets), size):
        members = targets[i : i + size]
        group_of.update((t, len(groups)) for t in members)
        groups.append(frozenset(x for t in members for x in tables_of[t]))
    return groups, group_of


def _tables_frame(spark: SparkSession, tables: Sequence[Table]) -> DataFrame:
    """One row per (db, tbl) of `tables`."""
    return spark.createDataFrame(list(tables), "w_db STRING, w_tbl STRING")


def _spans_frame(spark: SparkSession, spans: Mapping[Table, Sequence[Window]]) -> DataFrame:
    """One row per (db, tbl, lo, hi) of `spans`: a commit_ts range (lo, hi] of a table."""
    rows = [(db, tbl, lo, hi) for (db, tbl), ws in sorted(spans.items()) for lo, hi in ws]
    return spark.createDataFrame(rows, "w_db STRING, w_tbl STRING, w_lo BIGINT, w_hi BIGINT")


def _in_table() -> Column:
    """An event of the (db, tbl) of a row of `_tables_frame` or `_spans_frame`."""
    return (F.col("db") == F.col("w_db")) & (F.col("tbl") == F.col("w_tbl"))


def _in_span() -> Column:
    """An event inside the span of a row of `_spans_frame`."""
    return (
        _in_table() & (F.col("commit_ts") > F.col("w_lo")) & (F.col("commit_ts") <= F.col("w_hi"))
    )


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
                {
                    n: {(t.db, t.table) for s in steps for t in s.tables}
                    for n, steps in wanted.items()
                },
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
