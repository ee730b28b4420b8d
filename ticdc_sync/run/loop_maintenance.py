"""The run loop's maintenance of targets: each existing target looked at between its applies
(`Engine.maintain`: compaction and VACUUM when `plan.maintenance.due` says so), on an apply
worker left free, never while the target applies (a target being maintained counts as
running: the scheduler does not hand it out), and what each look found folded into the
results (`Maintaining`, a mixin of the loop).

`--follow` looks at each target at most every `plan.maintenance.check_every_ms`, with a
worker no due apply wants; a look overdue by `plan.maintenance.overdue_after_ms` takes the
next worker that frees before the due applies do (one such look at a time), so applies that
keep every worker busy cannot hold maintenance off for ever. A plain run (and a follower
that drains at `max_polls`) looks at every target once at its end. A stop request starts
none. The engine decides nothing: it
reads the table and does what the plan's settings say is due. No pyspark.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future

from ticdc_sync.plan.maintenance import check_every_ms, overdue_after_ms
from ticdc_sync.plan.model import TargetPlan
from ticdc_sync.run.engine import MaintainJob, TargetMaintained
from ticdc_sync.run.loop_state import LoopState, first_line


class Maintaining(LoopState):
    def _maintainable(self, t: TargetPlan) -> bool:
        return (
            t.exists
            and t.maintenance.enabled
            and t.name not in self.running
            and t.name not in self.maintaining
            and getattr(self.engine, "maintain", None) is not None
        )

    def _upkeep(self, final: bool = False, overdue: bool = False) -> None:
        """Hand free workers the targets due a look (`final`: every target, once;
        `overdue`: only a look overdue, before the applies take the free workers)."""
        if self.halt or self.stop.level >= 1:
            return
        if overdue and self.maintaining:
            return  # one look at a time goes before the applies
        now = self.clock()
        for t, _sp in self._selected():
            if not self._maintainable(t):
                continue
            if final:
                if t.name in self.upkept_final:
                    continue
                self.upkept_final.add(t.name)
            else:
                every = check_every_ms(t.maintenance) / 1000
                at = self.next_upkeep.setdefault(t.name, now + every)
                late = overdue_after_ms(t.maintenance) / 1000
                if now < (at + late if overdue else at) or self.workers - self._busy() <= 0:
                    continue
                self.next_upkeep[t.name] = now + every
            job = MaintainJob(t.name, t.location, t.maintenance, self.synced.get(t.source))
            fut = self.pool.submit(self._maintain_one, job)
            self.maintaining[t.name] = fut
            fut.add_done_callback(lambda f, job=job: self._upkept(job, f))
            if overdue:
                return

    def _maintain_one(self, job: MaintainJob) -> TargetMaintained:
        """On a worker thread: the engine's outcome; its error is the outcome's."""
        try:
            return self.engine.maintain(job)  # type: ignore[attr-defined]
        except Exception as e:  # noqa: BLE001 - this target's maintenance only
            return TargetMaintained(job.target, error=first_line(e))

    def _upkept(self, job: MaintainJob, fut: Future) -> None:
        # On the worker thread.
        self.upkeep_done.put((job, fut))
        self.waiter.wake()

    def _harvest_upkeep(self) -> None:
        while True:
            try:
                job, fut = self.upkeep_done.get_nowait()
            except queue.Empty:
                return
            self.maintaining.pop(job.target, None)
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is not None:  # not an Exception: a stop at once, a crash
                if self.fatal is None:
                    self.fatal = exc
                self.halt = True
                continue
            self._fold_upkeep(fut.result())

    def _fold_upkeep(self, m: TargetMaintained) -> None:
        r = self.result.targets.get(m.target)
        if r is None:
            t = self.plan.target_plan(m.target) if self.plan is not None else None
            if t is None:
                return
            r = self._target_run(t)
        r.maintained += 1
        if m.error is not None:
            # A warning, not a run error: the target's rows are as they were, and the
            # next look tries again (the metrics and alerts keep count).
            if r.maintenance_error != m.error:
                self.out(
                    f"warning: target {m.target}: not maintained ({m.error}); tried again later"
                )
            r.maintenance_error = m.error
            return
        r.maintenance_error = None
        r.files, r.bytes, r.removed_bytes = m.files, m.bytes, m.removed_bytes
        r.compactions += int(m.compacted)
        r.vacuums += int(m.vacuumed)
        r.last_compacted = m.last_compacted
        r.last_vacuumed = m.last_vacuumed
        for line in m.lines():
            self.out(line)
