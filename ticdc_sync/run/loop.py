"""The run loop of `ticdc-sync run`: stage every source each poll, apply targets on their lag
budget in worker threads, trim the staging table, stop when asked. It is written against
`engine.Engine`, so it runs (and is tested) without Spark.

Three kinds of thread. The stager stages every source once per poll; the same one thread
makes the run's other writes to the warehouse (trims, sync points) between two stages, so
they never race a stage (a trim there only hands the engine its bounds: the engine rewrites
the staging table beside the polls). Due targets (`schedule`) go to a pool of apply workers. The loop
thread only decides: it hands the stager its next step and each free worker its next
target the moment either ends, and waits for neither. Each `StageOutcome` and
`ApplyOutcome` is folded on the loop thread into the in-memory warehouse state: tallies, DDL
events, each upstream table's pending commit_ts ranges, markers, schema history. So
re-planning (`replan`: in a run a `plan.Planner`, which plans again only the targets a fold
changed) needs nothing from the warehouse. Trim
bounds come from `retention.trim_bound` over the markers the loop knows.

A plain run stages once, then drains: it applies everything pending up to the resolved
TSO, lag ignored, through the same scheduler, and exits. `--follow` polls until it is
stopped; with `max_polls` it drains after that many polls. A first stop ends staging and
lets in-flight applies finish their current step; a second ends the loop at once. A
`Fatal` error from the engine stops everything and is raised. Any other error in an apply
fails that target only: `--follow` tries it again after a backoff, and a plain run ends
with exit 1 naming it.

Results per target and per poll (staleness against the lag, staging freshness) are kept
for run_results (`results`). Decides nothing about what a target's apply does (the
plan does), and does no I/O of its own. No pyspark.

This module holds the loop thread's own decisions (`_Loop`); its jobs are mixins beside it,
one module each: what it knows (`loop_state`), staging (`loop_staging`), applies
(`loop_applies`), sync points (`loop_sync_points`), trims (`loop_trimming`) and what it
reports (`loop_report`); its settings and stop request are `loop_settings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor

from ticdc_sync.run.engine import ApplyOutcome, Engine, StageOutcome
from ticdc_sync.run.loop_applies import Applies
from ticdc_sync.run.loop_maintenance import Maintaining
from ticdc_sync.run.loop_settings import (
    Out,
    Replan,
    Settings,
    Sleeper,
    StopRequest,
    Waiter,
)
from ticdc_sync.run.loop_staging import Staging
from ticdc_sync.run.loop_sync_points import SyncPoints
from ticdc_sync.run.loop_trimming import Trimming
from ticdc_sync.run.results import LoopResult, PollSummary, SourceRun, TargetRun

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
    on_stage: Callable[[StageOutcome, LoopResult], None] | None = None,
    on_apply: Callable[[ApplyOutcome, LoopResult], None] | None = None,
) -> LoopResult:
    """Run the loop until it is done (a plain run, or `max_polls`) or stopped; the results.
    `on_poll` hears each poll's summary once the next poll begins (and the last at the
    end); `on_stage` each source's stage and `on_apply` each apply, once folded into the
    results (a source that could not be read, and a failed apply, too). All three are
    called on the loop thread. `clock` is wall time in seconds (compared with TSO wall times); `waiter`, `pool`
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
        on_stage,
        on_apply,
    )
    return loop.run()


class _Loop(Staging, Applies, SyncPoints, Trimming, Maintaining):
    """The run loop: its state (`LoopState`) and its jobs put together. This part decides
    what the loop thread does next and folds the stager's steps as they end."""

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
                self._harvest_upkeep()
            self.stager.shutdown(wait=not at_once, cancel_futures=True)
            self._finish(announce=ok)
        return self.result

    def _loop(self) -> None:
        s = self.s
        while True:
            self._harvest()
            self._harvest_upkeep()
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
                    self._check_catalog()
                    self._sync_points()
                    if s.follow and not self.draining:
                        self._upkeep(overdue=True)
                    self._dispatch()
                    if s.follow and not self.draining:
                        self._upkeep()
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
                if not self.running and self.chore is None and not self.maintaining:
                    if level >= 1:
                        self.result.interrupted = not self.s.follow
                    elif self.polled and not self.upkeep_final_done:
                        # Every target looked at once, between the last applies and the
                        # final trim (the run waits for them).
                        self.upkeep_final_done = True
                        self._upkeep(final=True)
                        continue
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
