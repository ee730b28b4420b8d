"""The run loop of `ticdc-sync run`: stage every source each poll, apply targets on their lag
budget in worker threads, trim the staging table, stop when asked. It is written against
`engine.Engine`, so it runs (and is tested) without Spark.

Three kinds of thread. The stager stages every source once per poll; the same one thread
makes the run's other writes to the warehouse (trims, sync points) between two stages, so
they never race a stage. Due targets (`schedule`) go to a pool of apply workers. The loop
thread only decides: it hands the stager its next step and each free worker its next
target the moment either ends, and waits for neither. Each `StageOutcome` and
`ApplyOutcome` is folded on the loop thread into the in-memory warehouse state: tallies, DDL
events, each upstream table's pending commit_ts ranges, markers, schema history. So
re-planning (`replan`, `plan.build_plan` in a run) needs nothing from the warehouse. Trim
bounds come from `retention.trim_bound` over the markers the loop knows.

A plain run stages once, then drains: it applies everything pending up to the resolved
TSO, lag ignored, through the same scheduler, and exits. `--follow` polls until it is
stopped; with `max_polls` it drains after that many polls. A first stop ends staging and
lets in-flight applies finish their current step; a second ends the loop at once. A
`Fatal` error from the engine stops everything and is raised. Any other error in an apply
fails that target only: `--follow` tries it again after a backoff, and a plain run ends
with exit 1 naming it.

Results per target and per poll (staleness against the lag, staging freshness) are kept
for run_results (`loop_results`). Decides nothing about what a target's apply does (the
plan does), and does no I/O of its own. No pyspark.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol

from ticdc_sync.core.errors import Fatal
from ticdc_sync.core.model import Source
from ticdc_sync.core.upstream import Key, Version, key
from ticdc_sync.core.window import dedupe_ddl
from ticdc_sync.plan.model import BLOCKED, HELD, READY, Plan, SourcePlan, TargetPlan
from ticdc_sync.run.engine import (
    ApplyJob,
    ApplyOutcome,
    Engine,
    StageOutcome,
    Started,
    SyncPoint,
    TrimOutcome,
)
from ticdc_sync.run.results import LoopResult, PollSummary, SourceRun, TargetRun
from ticdc_sync.run.schedule import (
    MAX_BACKOFF_MS,
    Candidate,
    Need,
    Scheduler,
    Spans,
    over_lag,
    staging_lag_ms,
    staleness_ms,
)
from ticdc_sync.warehouse.retention import trim_bound
from ticdc_sync.warehouse.state import SourceState, WarehouseState

Out = Callable[[str], None]
Replan = Callable[[WarehouseState], Plan]


# The longest wait before a source that could not be read is read again (a Kafka outage).
SOURCE_MAX_BACKOFF_MS = 60_000


@dataclass(frozen=True)
class Settings:
    """What a run loop is asked to do."""

    sources: Sequence[Source]
    workers: int  # targets applied at once (`plan.workers.apply_workers`)
    follow: bool = False
    # --follow: the stager's rest between two polls, from the end of one to the start of
    # the next. From the end, not the start: a poll slower than this (on cores the applies
    # share) would otherwise follow the last at once, and staging would take a core for
    # itself, slowing the applies and so every poll further (benchmarks/README.md).
    poll_seconds: float = 2.0
    # --follow: after this many polls, apply everything pending (as a plain run does) and
    # end. None: until stopped.
    max_polls: int | None = None
    retention_ms: int = 7 * 24 * 3600 * 1000  # `staging.retention`
    trim_every_seconds: float = 60.0  # --follow: how often the staging table is trimmed
    max_backoff_ms: int = MAX_BACKOFF_MS  # longest wait before a failed target is retried
    selected: Callable[[str], bool] = lambda _name: True  # --select / --exclude
    # `sync_points: every ...`: how often (in TiDB time) the targets of a source are brought
    # to one TSO and it is recorded (`Engine.record_sync_point`). None: never.
    sync_every_ms: int | None = None


class StopRequest:
    """How far the run is asked to stop: 0 not at all, 1 after the current steps (no more
    staging), 2 at once. Safe to call from a signal handler."""

    def __init__(self) -> None:
        self._level = 0
        self._listeners: list[Callable[[], None]] = []

    @property
    def level(self) -> int:
        return self._level

    def request(self) -> int:
        """One more request (the first signal, then the second); the level now."""
        self._level = min(2, self._level + 1)
        for fn in list(self._listeners):
            fn()
        return self._level

    def listen(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)


class Sleeper(Protocol):
    """The loop's sleep: until a timeout (None: none), or until woken."""

    def wait(self, seconds: float | None) -> None: ...

    def wake(self) -> None: ...


class Waiter:
    """The loop's sleep: until a timeout, or until woken (an apply ended, a stop came)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def wait(self, seconds: float | None) -> None:
        self._event.wait(seconds)
        self._event.clear()


# --------------------------------------------------------------------------- the loop


def run_loop(
    engine: Engine,
    replan: Replan,
    settings: Settings,
    *,
    stop: StopRequest | None = None,
    out: Out = print,
    on_poll: Callable[[PollSummary, LoopResult], None] | None = None,
    clock: Callable[[], float] = time.time,
    waiter: Sleeper | None = None,
    pool: Executor | None = None,
    stager: Executor | None = None,
    result: LoopResult | None = None,
) -> LoopResult:
    """Run the loop until it is done (a plain run, or `max_polls`) or stopped; the results.
    `on_poll` hears each poll's summary once the next poll begins (and the last at the
    end). `clock` is wall time in seconds (compared with TSO wall times); `waiter`, `pool`
    and `stager` are the loop's sleep, its apply workers and the one thread that stages,
    trims and records sync points (defaults: real ones)."""
    loop = _Loop(
        engine,
        replan,
        settings,
        stop or StopRequest(),
        out,
        on_poll,
        clock,
        waiter or Waiter(),
        pool,
        stager,
        result if result is not None else LoopResult(),
    )
    return loop.run()


@dataclass
class _Acc:
    """What a poll has seen so far (for its summary)."""

    n: int = 0
    staged: int = 0
    applied: int = 0
    errors: int = 0


@dataclass
class _Chore:
    """The stager's step in flight: a poll's staging, a trim, or a sync point's record."""

    kind: str  # "stage", "trim" or "sync"
    future: Future
    at: float = 0.0  # stage: when the poll began (a source's backoff counts from it)
    last: bool = False  # stage: the run's last poll (a plain run's only one, `max_polls`)
    bounds: dict[str, int] = field(default_factory=dict)  # trim
    point: SyncPoint | None = None  # sync


class _Loop:
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
    ) -> None:
        self.engine = engine
        self.replan = replan
        self.s = settings
        self.stop = stop
        self.out = out
        self.on_poll = on_poll
        self.clock = clock
        self.waiter = waiter
        self.workers = max(1, settings.workers)
        self.pool = pool or ThreadPoolExecutor(self.workers, thread_name_prefix="apply")
        # One thread: a stage, a trim and a sync point's record write the staging table or
        # the run's session, one after another, never at once.
        self.stager = stager or ThreadPoolExecutor(1, thread_name_prefix="stage")
        self.chore: _Chore | None = None
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
        self.running: dict[str, ApplyJob] = {}
        self.done: queue.SimpleQueue[tuple[ApplyJob, Future]] = queue.SimpleQueue()
        self.halt = False  # an error ends the run: every apply stops at its next step
        self.fatal: BaseException | None = None
        self.dirty = True  # the state changed since the last plan
        self.draining = False
        self.acc = _Acc()
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

    # --- the run ---------------------------------------------------------------------

    def run(self) -> LoopResult:
        ok = False
        try:
            self._start(self.engine.read_state())
            self._loop()
            ok = True
        except BaseException:
            self.halt = True  # every apply stops at its next step
            raise
        finally:
            at_once = self.stop.level >= 2
            # Not at once: wait for the applies in flight to end their current step, and
            # for the stager's step (a stage commits once, at its end). The loop ends with
            # none in flight unless stopped at once or raising.
            self.pool.shutdown(wait=not at_once, cancel_futures=True)
            if not at_once:
                self._harvest(final=True)
            self.stager.shutdown(wait=not at_once, cancel_futures=True)
            self._finish(announce=ok)
        return self.result

    def _loop(self) -> None:
        s = self.s
        while True:
            self._harvest()
            self._harvest_chore()
            if self.fatal is not None:
                raise self.fatal
            level = self.stop.level
            if level >= 2:
                self.result.interrupted = True
                return
            # Nothing is planned or applied before the first poll is folded: until then the
            # loop knows only what earlier runs staged, and a target applied from that would
            # be applied again at once. (A plain run's one poll is its first.)
            if self.polled:
                self._plan()
                if level == 0:
                    self._sync_points()
                    self._dispatch()
            now = self.clock()
            if self.chore is None and s.follow and not self.draining and level == 0:
                if self.acc.n and now >= self.next_trim:
                    self.next_trim = now + s.trim_every_seconds
                    if self._trim():
                        continue  # (a stager that runs inline has ended it)
                if not self.polls_over and now >= self.next_poll:
                    self._start_poll(now)
                    continue
            elif self.chore is None and level == 0 and not self.polls_over:
                self._start_poll(now)  # a plain run's one poll
                continue
            if level >= 1 or self.draining:
                if not self.running and self.chore is None:
                    if level >= 1:
                        self.result.interrupted = not self.s.follow
                    else:
                        self._trim(final=True)  # trimming waits when stopped
                    return
                self.waiter.wait(None)  # until an apply or the stager's step ends (or a stop)
                continue
            # The stager's step in flight wakes the loop when it ends; the next poll waits
            # for it.
            wake = self.next_poll if self.chore is None else None
            nxt = self.sched.next_wake(self._candidates(), self._now_ms())
            if nxt is not None:
                wake = nxt / 1000 if wake is None else min(wake, nxt / 1000)
            self.waiter.wait(None if wake is None else max(0.0, wake - self.clock()))

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- state -----------------------------------------------------------------------

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
                sources={**self.state.sources, t.source: replace(ss, recorded=_with(ss, o))},
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

    # --- staging ---------------------------------------------------------------------

    def _give(self, chore: _Chore) -> None:
        """Hand the stager its next step; the loop is woken when it ends."""
        self.chore = chore
        chore.future.add_done_callback(lambda _f: self.waiter.wake())

    def _start_poll(self, now: float) -> None:
        if self.acc.n:
            self._summarize()
        self.acc = _Acc(n=self.acc.n + 1)
        self.result.polls = self.acc.n
        s = self.s
        last = not s.follow or (s.max_polls is not None and self.acc.n >= s.max_polls)
        self.polls_over = last
        sources = [
            src
            for src in s.sources
            if (retry := self.source_retry.get(src.name)) is None or retry[1] <= now
        ]
        self._give(_Chore("stage", self.stager.submit(self._stage_all, sources), at=now, last=last))

    def _stage_all(self, sources: Sequence[Source]) -> list[StageOutcome]:
        """On the stager: stage each source in turn; a stop ends it between two."""
        done: list[StageOutcome] = []
        for source in sources:
            if self.stop.level >= 1:
                break
            done.append(self.engine.stage(source))
        return done

    def _harvest_chore(self) -> None:
        """Fold the stager's step once it has ended. Its error (not a source's outage,
        which the engine reports in the outcome) ends the run, raised here."""
        chore = self.chore
        if chore is None or not chore.future.done():
            return
        self.chore = None
        if chore.future.cancelled():
            return
        if chore.kind == "stage":
            self.next_poll = self.clock() + self.s.poll_seconds
            for o in chore.future.result():
                self._staged(o, chore.at)
            self.polled = True
            if chore.last:
                self.draining = True
        elif chore.kind == "trim":
            self._trimmed(chore.bounds, chore.future.result())
        else:
            assert chore.point is not None
            self._recorded(chore.point, chore.future)

    def _staged(self, o: StageOutcome, now: float) -> None:
        sr = self.result.sources.setdefault(o.source, SourceRun(o.source))
        if o.unavailable is not None:
            self._unavailable(o.source, o.unavailable, now)
            return
        self.source_retry.pop(o.source, None)
        self._fold_stage(o)
        sr.staged_events += o.staged
        sr.quarantined += o.quarantined
        sr.partitions = {
            f"{t}/{p}": pt.last_offset for (t, p), pt in sorted(o.tally.partitions.items())
        }
        self.acc.staged += o.staged
        for e in o.errors:
            self._error(e)

    def _unavailable(self, name: str, why: str, now: float) -> None:
        count = self.source_retry.get(name, (0, 0.0))[0] + 1
        if not self.s.follow:
            self._error(f"source {name}: could not be read: {why}")
            self.source_retry[name] = (count, float("inf"))
            return
        # An outage is waited out: the wait doubles, capped low so that a broker back up is
        # read again within a minute (docs/kafka.md, "Broker outages").
        wait = min(SOURCE_MAX_BACKOFF_MS / 1000, self.s.poll_seconds * 2**count)
        self.source_retry[name] = (count, now + wait)
        self.out(
            f"warning: source {name}: Kafka unavailable ({why}); nothing was staged from it; "
            f"retrying in {wait:.0f}s (attempt {count})"
        )

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

    # --- applying --------------------------------------------------------------------

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

    def _candidate(self, t: TargetPlan) -> Candidate:
        needs = None
        for d in t.ddl:
            if d.status == READY and d.rename_from and t.stop_ts is not None:
                if d.commit_ts <= t.stop_ts:
                    before = d.commit_ts - 1
                    needs = Need(d.rename_from, before, self._oldest(t, before, (READY,)))
                break
        hit = self.blocked.get(t.name)
        reported = hit is not None and (hit == _STICKY or hit == t.blocked)
        return Candidate(
            name=t.name,
            # A sync point due: every target of the source is due now, lag or not.
            lag_ms=0 if t.source in self.sync_at else t.lag_ms,
            at=self._at(t),
            oldest=self._oldest(t, t.stop_ts, (READY,)),
            work=_work(t, reported),
            running=t.name in self.running,
            blocked=reported,
            needs=needs,
            upto=t.stop_ts,
            # What the engine checks before it copies this target's rows for a RENAME:
            # its committed marker (a row segment without rows commits nothing).
            stands=max(t.marker.applied_ts, t.marker.ddl_ts - 1),
        )

    def _candidates(self) -> list[Candidate]:
        return [self._candidate(t) for t, _ in self._selected()]

    def _dispatch(self) -> None:
        free = self.workers - len(self.running)
        if free <= 0 or self.halt:
            return
        pairs = {t.name: (t, sp) for t, sp in self._selected()}
        cands = [self._candidate(t) for t, _ in pairs.values()]
        # Every target due now, most urgent first; the first `free` start now. The others
        # of each one's source are its peers: the engine may read their rows once.
        due = self.sched.choose(cands, self._now_ms(), len(cands), drain=self.draining)
        peers: dict[str, list[tuple[TargetPlan, int | None]]] = {}
        for d in due:
            t = pairs[d.name][0]
            peers.setdefault(t.source, []).append((t, d.limit))
        for d in due[:free]:
            t, sp = pairs[d.name]
            job = ApplyJob(t, sp, d.limit, tuple(peers[t.source]))
            if d.limit is not None:
                self._note_wait(t, d.limit)
            self.running[t.name] = job
            fut = self.pool.submit(self._apply, job)
            fut.add_done_callback(lambda f, job=job: self._ended(job, f))

    def _ended(self, job: ApplyJob, fut: Future) -> None:
        # On the worker thread (or at once, for a pool that runs inline).
        self.done.put((job, fut))
        self.waiter.wake()

    def _should_stop(self) -> bool:
        return self.halt or self.stop.level >= 1

    def _apply(self, job: ApplyJob) -> tuple[ApplyOutcome | None, str | None, float]:
        """On a worker thread: the engine's outcome, or (None, why, seconds) for an error
        that is this target's own. `Fatal` (and anything not an Exception) goes through."""
        t0 = self.clock()
        try:
            return self.engine.apply(job, self._should_stop), None, self.clock() - t0
        except Fatal:
            raise
        except Exception as e:  # noqa: BLE001 - the failure of this target only
            return None, _first_line(e), self.clock() - t0

    def _harvest(self, final: bool = False) -> None:
        while True:
            try:
                job, fut = self.done.get_nowait()
            except queue.Empty:
                return
            name = job.target.name
            self.running.pop(name, None)
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is not None:
                if self.fatal is None and not final:
                    self.fatal = exc
                self.halt = True
                continue
            outcome, why, seconds = fut.result()
            if outcome is None:
                outcome = self._failed(job, why or "failed", seconds)
            self._record(job, outcome)

    def _failed(self, job: ApplyJob, why: str, seconds: float) -> ApplyOutcome:
        """An apply that raised: where its target stands is read again from the warehouse
        (it may have committed some steps)."""
        t = job.target
        try:
            # On the stager (after its step in flight): the read must not race a stage.
            started = self.stager.submit(self.engine.read_state).result()
            now = started.state.targets.get(t.name) or self.state.target(t.name)
        except Exception:  # noqa: BLE001 - keep what was known; the error is reported
            now = self.state.target(t.name)
        return ApplyOutcome(
            target=t.name,
            state=now,
            reached=now.marker.applied_ts,
            error=f"target {t.name}: {why}",
            seconds=seconds,
        )

    def _record(self, job: ApplyJob, o: ApplyOutcome) -> None:
        t = job.target
        before = (self.state.target(t.name), self._at(t))
        self._fold_apply(job, o)
        if (
            o.error is None
            and o.blocked is None
            and not o.interrupted
            and before == (o.state, self._at(t))
        ):
            # It was due, yet nothing moved: an engine that does not do what the plan says.
            # Treated as a failure, so that it is not applied again and again at once.
            o = replace(
                o,
                error=f"target {t.name}: its apply changed nothing (it stands at "
                f"{before[1]}, its rows stop at {t.stop_ts})",
            )
        r = self._target_run(t)
        r.applies += 1
        r.applied_ts = o.state.marker.applied_ts if o.state.exists else None
        r.inserted += o.inserted
        r.updated += o.updated
        r.deleted += o.deleted
        r.merges += o.merges
        r.quarantined += o.quarantined
        if o.loaded is not None:
            r.loaded = (r.loaded or 0) + o.loaded
        r.ddl.extend(o.ddl)
        r.seconds += o.seconds
        r.interrupted = o.interrupted
        if not o.interrupted and o.error is None:
            self.acc.applied += 1
        retry = self.sched.report(t.name, o.seconds, o.error is not None, self._now_ms())
        if o.blocked is not None:
            self.blocked[t.name] = t.blocked if t.blocked is not None else _STICKY
            self._error(o.blocked)
            r.blocked = o.blocked
        if o.error is not None:
            r.error = o.error
            again = ""
            if self.s.follow and not self.draining and retry is not None:
                again = f" (tried again in {(retry - self._now_ms()) / 1000:.0f}s)"
            self._error(o.error, again)
        elif not o.interrupted:
            r.error = None

    def _note_wait(self, t: TargetPlan, limit: int) -> None:
        d = next(d for d in t.ddl if d.status == READY and d.rename_from)
        r = self._target_run(t)
        r.waits_for = d.rename_from
        if (t.name, d.commit_ts) not in self.waits_noted:
            self.waits_noted.add((t.name, d.commit_ts))
            self.out(
                f"  {t.name}: its RENAME TABLE at commit_ts {d.commit_ts} copies rows of "
                f"{d.rename_from}, which has not applied up to {limit} yet: applied up to "
                "there first"
            )

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

    # --- sync points -----------------------------------------------------------------

    def _sync_points(self) -> None:
        """Start a sync point for each source whose resolved TSO is `sync_every_ms` past
        its last one (at that resolved TSO), and record those every target has reached."""
        every = self.s.sync_every_ms
        plan = self.plan
        if every is None or plan is None or self.halt:
            return
        for sp in plan.sources:
            name = sp.source.name
            res = sp.resolved_ts
            if name not in self.sync_at:
                last = self.synced.get(name)
                # A TSO's physical part is milliseconds, above 18 logical bits (codec facts 1.1).
                if res is None or res < 0 or (last is not None and res - last < every << 18):
                    continue
                self.sync_at[name] = res
            self._sync_reached(name, self.sync_at[name])

    def _sync_reached(self, source: str, tso: int) -> None:
        """Record the sync point of `source` at `tso` once every target of it holds its
        tables at `tso` in a commit, or stands behind it for good (blocked, failed)."""
        if self.chore is not None:
            return  # the stager records it once its step in flight ends; the targets stay at it
        at: list[str] = []
        behind: list[tuple[str, int]] = []
        for t, _ in self._selected():
            if t.source != source or t.absent:
                continue
            if t.name in self.running:
                return
            if self._covers(t, tso) >= tso:
                at.append(t.name)
                continue
            r = self.result.targets.get(t.name)
            if self.blocked.get(t.name) is not None or t.refused or (r is not None and r.error):
                behind.append((t.name, self.state.target(t.name).marker.applied_ts))
                continue
            return  # it has changes up to `tso` still to apply
        point = SyncPoint(source, tso, tuple(sorted(at)), tuple(sorted(behind)))
        future = self.stager.submit(self.engine.record_sync_point, point)
        self._give(_Chore("sync", future, point=point))

    def _recorded(self, point: SyncPoint, future: Future) -> None:
        """A sync point's record has ended: its targets go on past it."""
        source, tso = point.source, point.tso
        del self.sync_at[source]
        self.synced[source] = tso
        exc = future.exception()
        if isinstance(exc, Fatal) or (exc is not None and not isinstance(exc, Exception)):
            raise exc
        if exc is not None:  # the next sync point tries again
            self._error(
                f"source {source}: sync point at TSO {tso} not recorded: {_first_line(exc)}"
            )
            return
        behind = point.behind
        late = f", {len(behind)} behind ({', '.join(n for n, _ in behind)})" if behind else ""
        self.out(f"  {source}: sync point at TSO {tso}: {len(point.targets)} target(s){late}")
        self.result.sync_points.append(point)

    # --- trimming --------------------------------------------------------------------

    def _trim(self, final: bool = False) -> bool:
        """Hand the stager a trim of every source to its bound, if there is one (`final`:
        always, and wait for it); whether it was handed."""
        plan = self.plan
        if plan is None or self.halt:
            return False
        bounds: dict[str, int] = {}
        for sp in plan.sources:
            name = sp.source.name
            applied = [self._covers(t, sp.resolved_ts) for t in plan.targets if t.source == name]
            bound = trim_bound(applied, sp.resolved_ts, self.s.retention_ms, sp.open_bad)
            if bound is not None and bound > self.trimmed.get(name, -1):
                bounds[name] = bound
        if not bounds and not final:
            return False
        self._give(_Chore("trim", self.stager.submit(self.engine.trim, bounds), bounds=bounds))
        if final:
            self.chore.future.result()  # type: ignore[union-attr]
            self._harvest_chore()
        return True

    def _trimmed(self, bounds: dict[str, int], o: TrimOutcome) -> None:
        # A deferred source is trimmed at a later call, to the bound it then has.
        self.trimmed.update({k: v for k, v in bounds.items() if k not in o.deferred})
        for name, n in sorted(o.deleted.items()):
            if n:
                sr = self.result.sources.setdefault(name, SourceRun(name))
                sr.trimmed_events += n
                self.out(f"  {name}: {n} applied event(s) older than the retention deleted")
        if o.compacted is not None:
            self.out(o.compacted.line())

    def _covers(self, t: TargetPlan, resolved: int | None) -> int:
        """Up to where every staged change of `t`'s tables is in it: its marker, or, when
        nothing of it is pending below the resolved TSO, that TSO (a target with nothing to
        apply holds back no trim; `--follow` commits no marker for it)."""
        at = self.state.target(t.name).marker.applied_ts
        if resolved is None or resolved < 0:
            return at
        oldest = self._oldest(t, resolved, _NOT_APPLIED)
        if t.create is not None or t.load is not None or t.feature_parts:
            return at  # work without a commit_ts: nothing is trimmed past it
        return max(at, resolved if oldest is None else oldest - 1)

    # --- results ---------------------------------------------------------------------

    def _measure(self) -> int:
        """Staleness of every selected target and of every source, now; how many targets
        are past their lag."""
        now = self._now_ms()
        behind = 0
        resolved: dict[str, int | None] = {}
        plan = self.plan
        for sp in plan.sources if plan is not None else ():
            resolved[sp.source.name] = sp.resolved_ts
            sr = self.result.sources.setdefault(sp.source.name, SourceRun(sp.source.name))
            sr.resolved_ts = sp.resolved_ts
            lag = staging_lag_ms(now, sp.resolved_ts)
            sr.staging_lag_seconds = None if lag is None else lag / 1000
            sr.skipped_tables = {f"{db}.{t}": n for db, t, n in sp.skipped}
        for t, sp in self._selected():
            r = self._target_run(t)
            r.target_lag_seconds = t.lag_ms / 1000
            if r.applied_ts is None and t.exists:
                r.applied_ts = t.marker.applied_ts
            res = sp.resolved_ts
            upto = res if res is not None and res >= 0 else None
            oldest = self._oldest(t, upto, _NOT_APPLIED)
            st = staleness_ms(now, res, oldest)
            r.staleness_seconds = None if st is None else st / 1000
            # The TSO the target holds its tables as of (as `status` shows it): its marker,
            # or its source's resolved TSO when nothing of it is pending below that.
            r.current_ts = self._covers(t, res) if t.exists or r.applied_ts is not None else None
            r.over_lag = over_lag(now, oldest, t.lag_ms)
            behind += r.over_lag
            if r.waits_for is not None and not any(
                d.status == READY and d.rename_from for d in t.ddl
            ):
                r.waits_for = None
        return behind

    def _summarize(self) -> None:
        behind = self._measure()
        lags = [
            s.staging_lag_seconds
            for s in self.result.sources.values()
            if s.staging_lag_seconds is not None
        ]
        summary = PollSummary(
            n=self.acc.n,
            staged=self.acc.staged,
            applied=self.acc.applied,
            behind=behind,
            staging_lag_seconds=max(lags) if lags else None,
            errors=self.acc.errors,
        )
        self.result.last_poll = summary
        self.result.code = self._code()
        if self.on_poll is not None:
            self.on_poll(summary, self.result)

    def _code(self) -> int:
        if any(r.error or r.blocked for r in self.result.targets.values()):
            return 1
        if self.s.follow and not self.draining:
            return 1 if self.acc.errors else 0
        return 1 if self.result.errors else 0

    def _finish(self, announce: bool) -> None:
        """The results as the loop ends; the last poll's summary to `on_poll` unless the
        loop is raising."""
        if self.acc.n and announce:
            self._summarize()
        else:
            self._measure()
            self.result.code = self._code()


# Statuses of a resolved DDL its target has not applied (staleness counts them all).
_NOT_APPLIED = (READY, BLOCKED, HELD)
# A target blocked at run time where its plan says nothing of it: not applied again in
# this run.
_STICKY = "\x00blocked at run time"


def _work(t: TargetPlan, reported: bool) -> str | None:
    """What `t` has to do that has no commit_ts (due at once), if anything."""
    if t.create is not None:
        return "create"
    if t.feature_parts:
        return "table features"
    if t.load is not None:
        return "load"
    if t.blocked is not None and not reported:
        # Applied once, to apply the rows before its blocked DDL and report it.
        return "blocked: report it"
    return None


def _with(ss: SourceState, o: ApplyOutcome) -> dict[Key, list[Version]]:
    """`ss.recorded` with the versions an apply recorded (one per commit_ts)."""
    recorded: dict[Key, list[Version]] = {k: list(v) for k, v in ss.recorded.items()}
    for k, v in o.recorded:
        versions = [x for x in recorded.get(k, []) if x.commit_ts != v.commit_ts]
        recorded[k] = sorted([*versions, v], key=lambda x: x.commit_ts)
    return recorded


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


__all__ = [
    "LoopResult",
    "PollSummary",
    "Settings",
    "Sleeper",
    "SourceRun",
    "StopRequest",
    "TargetRun",
    "Waiter",
    "run_loop",
]
