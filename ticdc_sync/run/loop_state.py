"""What the run loop knows (`LoopState`): the in-memory warehouse state it folds each stage's
and apply's outcome into, the pending commit_ts ranges of each upstream table, where each
target stands (`covered`), and the queries the loop's jobs share over them.

Only the loop thread touches it. No I/O, no pyspark.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from ticdc_sync.core.upstream import Key, Version, key
from ticdc_sync.core.window import dedupe_ddl
from ticdc_sync.plan.model import (
    BLOCKED,
    CATALOG_NONE,
    HELD,
    READY,
    Plan,
    SourcePlan,
    TargetPlan,
)
from ticdc_sync.run.engine import (
    ApplyJob,
    ApplyOutcome,
    Engine,
    MaintainJob,
    StageOutcome,
    Started,
    SyncPoint,
)
from ticdc_sync.run.loop_settings import Out, Replan, Settings, Sleeper, StopRequest
from ticdc_sync.run.results import LoopResult, PollSummary, SourceRun, TargetRun
from ticdc_sync.run.schedule import Scheduler, Spans
from ticdc_sync.warehouse.state import SourceState, WarehouseState

# Statuses of a resolved DDL its target has not applied (staleness counts them all).
NOT_APPLIED = (READY, BLOCKED, HELD)
# A target blocked at run time where its plan says nothing of it: not applied again in
# this run.
STICKY_BLOCK = "\x00blocked at run time"


@dataclass
class PollCounts:
    """What a poll has seen so far (for its summary)."""

    n: int = 0
    staged: int = 0
    applied: int = 0
    errors: int = 0


@dataclass
class Chore:
    """The stager's step in flight: a poll's staging, a trim, or a sync point's record."""

    kind: str  # "stage", "trim" or "sync"
    future: Future
    at: float = 0.0  # stage: when the poll began (a source's backoff counts from it)
    last: bool = False  # stage: the run's last poll (a plain run's only one, `max_polls`)
    bounds: dict[str, int] = field(default_factory=dict)  # trim
    point: SyncPoint | None = None  # sync


class LoopState:
    """What the run loop knows, and the queries its jobs share over it: the warehouse state
    as the loop has folded it (each stage's and apply's outcome), each upstream table's
    pending commit_ts ranges, where each target stands, and the run's results so far.
    The loop's jobs (`loop_staging`, `loop_applies`, `loop_sync_points`, `loop_trimming`,
    `loop_report`) are mixins over it, and `loop._Loop` puts them together. Everything
    here runs on the loop thread."""

    def __init__(
        self,
        engine: Engine,
        replan: Replan,
        settings: Settings,
        stop: StopRequest,
        out: Out,
        on_poll: Callable[[PollSummary, LoopResult], None] | None,
        clock: Callable[[], float],
        waiter: Sleeper,
        pool: Executor | None,
        stager: Executor | None,
        result: LoopResult,
        on_stage: Callable[[StageOutcome, LoopResult], None] | None = None,
        on_apply: Callable[[ApplyOutcome, LoopResult], None] | None = None,
    ) -> None:
        self.engine = engine
        self.replan = replan
        self.s = settings
        self.stop = stop
        self.out = out
        self.on_poll = on_poll
        self.on_stage = on_stage
        self.on_apply = on_apply
        self.clock = clock
        self.waiter = waiter
        self.workers = max(1, settings.workers)
        self.pool = pool or ThreadPoolExecutor(self.workers, thread_name_prefix="apply")
        # One thread: a stage, a trim and a sync point's record write the staging table or
        # the run's session, one after another, never at once.
        self.stager = stager or ThreadPoolExecutor(1, thread_name_prefix="stage")
        self.chore: Chore | None = None
        self.polls_over = False  # the last poll's staging has started
        self.polled = False  # a poll's staging has been folded
        self.result = result
        self.sched = Scheduler(
            int(settings.poll_seconds * 1000), settings.max_backoff_ms, self.workers
        )
        self.state = WarehouseState()
        self.plan: Plan | None = None
        self.spans: dict[tuple[str, Key], Spans] = {}
        self.covered: dict[str, int] = {}  # target -> every change at or below is in it
        self.blocked: dict[str, str | None] = {}  # target -> the plan's `blocked` it hit
        # Targets whose catalog entry this run has checked (every run checks each once).
        self.catalog_checked: set[str] = set()
        # The output's catalog was found loadable (`Applies._check_catalog`): once per run.
        self.catalog_loaded = False
        self.running: dict[str, ApplyJob] = {}
        # Targets applied in a round of several (`Engine.apply_round`): which round.
        self.in_rounds: dict[str, int] = {}
        self.round_count = 0
        self.done: queue.SimpleQueue[tuple[ApplyJob, Future]] = queue.SimpleQueue()
        # Targets being maintained (`loop_maintenance`): they count as running. When each
        # is looked at next, those a final look has taken, and the looks that ended.
        self.maintaining: dict[str, Future] = {}
        self.next_upkeep: dict[str, float] = {}
        self.upkept_final: set[str] = set()
        self.upkeep_final_done = False
        self.upkeep_done: queue.SimpleQueue[tuple[MaintainJob, Future]] = queue.SimpleQueue()
        self.halt = False  # an error ends the run: every apply stops at its next step
        self.fatal: BaseException | None = None
        self.dirty = True  # the state changed since the last plan
        self.draining = False
        self.acc = PollCounts()
        self.seen_errors: set[str] = set()
        self.source_retry: dict[str, tuple[int, float]] = {}  # unavailable: (count, at)
        self.next_trim = 0.0
        self.next_poll = 0.0  # --follow: when the next poll may start (`Settings.poll_seconds`)
        self.trimmed: dict[str, int] = {}  # source -> the last bound trimmed to
        self.waits_noted: set[tuple[str, int]] = set()
        # Sync points: per source, the TSO its targets are being brought to (their rows
        # stop there until it is recorded), and the last one recorded.
        self.sync_at: dict[str, int] = {}
        self.synced: dict[str, int] = {}
        stop.listen(waiter.wake)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _start(self, started: Started) -> None:
        self.state = started.state
        for source, tables in started.staged.items():
            for (db, tbl), span in tables.items():
                self._spans(source, key(db, tbl)).add(span.lo, span.hi)
        for name, ss in started.state.sources.items():
            # A table with staged rows the engine gave no span for: pending from anywhere
            # up to the source's highest watermark, so that nothing resolved is left
            # behind (rows past it are found with the table's next change).
            given = {key(db, tbl) for db, tbl in started.staged.get(name, {})}
            marks = [p.progress_ts for p in ss.tally.partitions.values()]
            top = max((m for m in marks if m is not None), default=None)
            for (db, tbl), (rows, _ddls) in ss.tally.tables.items():
                if rows and top is not None and key(db, tbl) not in given:
                    self._spans(name, key(db, tbl)).add(-1, top)
        for name, ts in started.state.targets.items():
            self.covered[name] = ts.marker.applied_ts
        self.synced.update(started.synced)
        for src in self.s.sources:
            self.result.sources.setdefault(src.name, SourceRun(src.name))

    def _spans(self, source: str, k: Key) -> Spans:
        return self.spans.setdefault((source, k), Spans())

    def _fold_stage(self, o: StageOutcome) -> None:
        ss = self.state.source(o.source)
        ddl = tuple(dedupe_ddl([*ss.ddl_events, *o.ddl])) if o.ddl else ss.ddl_events
        metadata = {**o.metadata, **ss.metadata}  # what is known already stays
        ss = replace(
            ss,
            tally=o.tally,
            tally_complete=True,
            ddl_events=ddl,
            open_bad=dict(o.open_bad),
            progress=dict(o.progress),
            metadata=metadata,
        )
        self.state = replace(self.state, sources={**self.state.sources, o.source: ss})
        for (db, tbl), span in o.tables.items():
            self._spans(o.source, key(db, tbl)).add(span.lo, span.hi)
        self.dirty = True

    def _fold_apply(self, job: ApplyJob, o: ApplyOutcome) -> None:
        t = job.target
        self.state = replace(self.state, targets={**self.state.targets, t.name: o.state})
        if o.recorded:
            ss = self.state.source(t.source)
            self.state = replace(
                self.state,
                sources={
                    **self.state.sources,
                    t.source: replace(ss, recorded=with_recorded(ss, o)),
                },
            )
        at = max(self.covered.get(t.name, -1), o.reached, o.state.marker.applied_ts)
        self.covered[t.name] = at
        for db, tbl in t.upstreams:
            self._spans(t.source, key(db, tbl)).prune(at)
        self.dirty = True

    def _plan(self) -> None:
        if self.dirty or self.plan is None:
            self.plan = self.replan(self.state)
            self.dirty = False

    def _harvest_chore(self) -> None:
        """Fold the stager's step once it has ended (`loop._Loop`, which knows every kind of
        step; a final trim waits for its step and folds it at once)."""
        raise NotImplementedError

    def _give(self, chore: Chore) -> None:
        """Hand the stager its next step; the loop is woken when it ends."""
        self.chore = chore
        chore.future.add_done_callback(lambda _f: self.waiter.wake())

    def _error(self, line: str, suffix: str = "") -> None:
        """Report an error line; each line once in the run's errors, printed each time
        it comes with a `suffix` (a retry), else once."""
        new = line not in self.seen_errors
        if new:
            self.seen_errors.add(line)
            self.result.errors.append(line)
            self.acc.errors += 1
        if new or suffix:
            self.out(f"error: {line}{suffix}")

    def _selected(self) -> list[tuple[TargetPlan, SourcePlan]]:
        plan = self.plan
        if plan is None:
            return []
        out = []
        for t in plan.targets:
            sp = plan.source_plan(t.source)
            if sp is not None and self.s.selected(t.name):
                cap = self.sync_at.get(t.source)
                if cap is not None and t.stop_ts is not None and t.stop_ts > cap:
                    # A sync point is due: the source's targets go to its TSO, no further.
                    t = replace(t, stop_ts=cap)
                out.append((t, sp))
        return out

    def _at(self, t: TargetPlan) -> int:
        return max(t.marker.applied_ts, self.covered.get(t.name, -1))

    def _oldest(self, t: TargetPlan, upto: int | None, ddl_status: tuple[str, ...]) -> int | None:
        """The commit_ts of `t`'s oldest change at or below `upto` not in it yet."""
        if upto is None:
            return None
        at = self._at(t)
        found = [
            o
            for db, tbl in t.upstreams
            if (sp := self.spans.get((t.source, key(db, tbl)))) is not None
            and (o := sp.oldest(at, upto)) is not None
        ]
        found += [d.commit_ts for d in t.ddl if d.status in ddl_status and d.commit_ts <= upto]
        return min(found) if found else None

    def _covers(self, t: TargetPlan, resolved: int | None) -> int:
        """Up to where every staged change of `t`'s tables is in it: its marker, or, when
        nothing of it is pending below the resolved TSO, that TSO (a target with nothing to
        apply holds back no trim; `--follow` commits no marker for it)."""
        at = self.state.target(t.name).marker.applied_ts
        if resolved is None or resolved < 0:
            return at
        oldest = self._oldest(t, resolved, NOT_APPLIED)
        if t.create is not None or t.load is not None or t.feature_parts or t.relayout or t.reprops:
            return at  # work without a commit_ts: nothing is trimmed past it
        return max(at, resolved if oldest is None else oldest - 1)

    def _target_run(self, t: TargetPlan) -> TargetRun:
        r = self.result.targets.get(t.name)
        if r is None:
            r = TargetRun(
                name=t.name,
                source=t.source,
                upstream=[f"{db}.{tbl}" for db, tbl in t.upstreams],
                target_lag_seconds=t.lag_ms / 1000,
            )
            self.result.targets[t.name] = r
        return r


def work_without_ts(t: TargetPlan, reported: bool, catalog_checked: bool = True) -> str | None:
    """What `t` has to do that has no commit_ts (due at once), if anything.
    `catalog_checked`: this run has checked its catalog entry already."""
    if t.create is not None:
        return "create"
    if t.feature_parts:
        return "table features"
    if t.relayout is not None:
        return "layout"
    if t.reprops is not None:
        return "properties"
    if t.load is not None:
        return "load"
    if t.blocked is not None and not reported:
        # Applied once, to apply the rows before its blocked DDL and report it.
        return "blocked: report it"
    # Its catalog entry is behind its table (a run stopped between them, or a catalog that
    # failed), or not checked by this run yet (every run reconciles the catalog with the
    # warehouse): due at once. Otherwise the catalog step follows its other steps.
    named = t.catalog is not None and t.catalog.action != CATALOG_NONE
    if named and (t.catalog_pending or not catalog_checked) and t.exists and not t.pending:
        return "catalog"
    return None


def with_recorded(ss: SourceState, o: ApplyOutcome) -> dict[Key, list[Version]]:
    """`ss.recorded` with the versions an apply recorded (one per commit_ts)."""
    recorded: dict[Key, list[Version]] = {k: list(v) for k, v in ss.recorded.items()}
    for k, v in o.recorded:
        versions = [x for x in recorded.get(k, []) if x.commit_ts != v.commit_ts]
        recorded[k] = sorted([*versions, v], key=lambda x: x.commit_ts)
    return recorded


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]
