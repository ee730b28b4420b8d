"""The run loop's applies: each target as a candidate (what it waits for, what it needs
first), due ones handed to free apply workers as `schedule` orders them, and each apply's
outcome folded into the state and the results (`Applies`, a mixin of the loop).

What an apply does is the plan's and the engine's; this decides only when. No pyspark.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future
from dataclasses import replace

from ticdc_sync.core.errors import Fatal
from ticdc_sync.plan import catalog
from ticdc_sync.plan.model import (
    READY,
    WRITE_ROUND,
    Create,
    Features,
    Rows,
    TableProperties,
    TargetPlan,
    end_ts,
    without_rows,
)
from ticdc_sync.run.engine import ApplyJob, ApplyOutcome
from ticdc_sync.run.loop_state import STICKY_BLOCK, LoopState, first_line, work_without_ts
from ticdc_sync.run.schedule import Candidate, Need

# What an apply worker hands back for one target: its outcome (None: it raised, with why),
# the worker seconds it took (in a round, its share), and the seconds from its dispatch
# until its changes were visible (in a round, the whole round's).
Applied = tuple[ApplyOutcome | None, str | None, float, float]


class Applies(LoopState):
    def _candidate(self, t: TargetPlan) -> Candidate:
        needs = None
        for d in t.ddl:
            if d.status == READY and d.rename_from and t.stop_ts is not None:
                if d.commit_ts <= t.stop_ts:
                    before = d.commit_ts - 1
                    needs = Need(d.rename_from, before, self._oldest(t, before, (READY,)))
                break
        hit = self.blocked.get(t.name)
        reported = hit is not None and (hit == STICKY_BLOCK or hit == t.blocked)
        return Candidate(
            name=t.name,
            # A sync point due: every target of the source is due now, lag or not.
            lag_ms=0 if t.source in self.sync_at else t.lag_ms,
            at=self._at(t),
            oldest=self._oldest(t, t.stop_ts, (READY,)),
            work=work_without_ts(t, reported, t.name in self.catalog_checked),
            running=t.name in self.running or t.name in self.maintaining,
            blocked=reported,
            needs=needs,
            upto=t.stop_ts,
            # What the engine checks before it copies this target's rows for a RENAME:
            # its committed marker (a row segment without rows commits nothing).
            stands=max(t.marker.applied_ts, t.marker.ddl_ts - 1),
        )

    def _candidates(self) -> list[Candidate]:
        return [self._candidate(t) for t, _ in self._selected()]

    def _check_catalog(self) -> None:
        """Once per run, before the first apply of a target with a catalog step: the
        catalog loads (`plan.catalog.to_check`). One that cannot (a plugin class missing, a
        metastore down) raises here, on the loop thread, and ends the run before any
        target commits. A plan without catalog steps checks nothing (yet)."""
        check = getattr(self.engine, "check_catalog", None)
        if self.catalog_loaded or check is None:
            return
        name = catalog.to_check(t for t, _ in self._selected())
        if name is not None:
            check(name)
            self.catalog_loaded = True

    def _dispatch(self) -> None:
        free = self.workers - self._busy()
        if free <= 0 or self.halt:
            return
        pairs = {t.name: (t, sp) for t, sp in self._selected()}
        cands = [self._candidate(t) for t, _ in pairs.values()]
        # Every target due now, most urgent first; the first `free` start now. Those whose
        # steps left are one round segment go together, as one round on one worker
        # (`Engine.apply_round`); of the others, the rest of each one's source are its
        # peers: the engine may read their rows once.
        due = self.sched.choose(cands, self._now_ms(), len(cands), drain=self.draining)
        together, rest = [], []
        for d in due:
            grouped = self.engine.rounds and in_round(pairs[d.name][0], d.limit)
            (together if grouped else rest).append(d)
        if together:
            jobs = [ApplyJob(pairs[d.name][0], pairs[d.name][1], d.limit) for d in together]
            self._start_round(jobs)
            free -= 1
        peers: dict[str, list[tuple[TargetPlan, int | None]]] = {}
        for d in rest:
            t = pairs[d.name][0]
            peers.setdefault(t.source, []).append((t, d.limit))
        for d in rest[:free]:
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

    def _busy(self) -> int:
        """Workers applying now: a round of several targets takes one."""
        alone = [n for n in self.running if n not in self.in_rounds]
        return len(alone) + len(set(self.in_rounds.values())) + len(self.maintaining)

    def _start_round(self, jobs: list[ApplyJob]) -> None:
        self.round_count += 1
        for job in jobs:
            self.running[job.target.name] = job
            self.in_rounds[job.target.name] = self.round_count
        fut = self.pool.submit(self._apply_round, jobs)
        fut.add_done_callback(lambda f, jobs=jobs: self._round_ended(jobs, f))

    def _round_ended(self, jobs: list[ApplyJob], fut: Future) -> None:
        # On the worker thread: each target's outcome as if it had been applied alone.
        exc = None if fut.cancelled() else fut.exception()
        for i, job in enumerate(jobs):
            one: Future = Future()
            if fut.cancelled():
                one.cancel()
            elif exc is not None:
                one.set_exception(exc)
            else:
                one.set_result(fut.result()[i])
            self.done.put((job, one))
        self.waiter.wake()

    def _apply_round(self, jobs: list[ApplyJob]) -> list[Applied]:
        """On a worker thread: each target's result as `_apply` gives it. Its seconds are
        its share of the round (its outcome's), its latency the whole round's: no target's
        changes are visible before the round has committed them all."""
        t0 = self.clock()
        try:
            outcomes = self.engine.apply_round(jobs, self._should_stop)
        except Fatal:
            raise
        except Exception as e:  # noqa: BLE001 - the failure of these targets only
            took = self.clock() - t0
            return [(None, first_line(e), took / max(1, len(jobs)), took) for _ in jobs]
        took = self.clock() - t0
        return [(o, None, o.seconds, took) for o in outcomes]

    def _should_stop(self) -> bool:
        return self.halt or self.stop.level >= 1

    def _apply(self, job: ApplyJob) -> Applied:
        """On a worker thread: the engine's outcome, or (None, why, seconds, seconds) for an
        error that is this target's own. `Fatal` (and anything not an Exception) goes
        through."""
        t0 = self.clock()
        try:
            o = self.engine.apply(job, self._should_stop)
        except Fatal:
            raise
        except Exception as e:  # noqa: BLE001 - the failure of this target only
            took = self.clock() - t0
            return None, first_line(e), took, took
        took = self.clock() - t0
        return o, None, took, took

    def _harvest(self, final: bool = False) -> None:
        while True:
            try:
                job, fut = self.done.get_nowait()
            except queue.Empty:
                return
            name = job.target.name
            self.running.pop(name, None)
            self.in_rounds.pop(name, None)
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is not None:
                if self.fatal is None and not final:
                    self.fatal = exc
                self.halt = True
                continue
            outcome, why, seconds, latency = fut.result()
            if outcome is None:
                outcome = self._failed(job, why or "failed", seconds)
            self._record(job, outcome, latency)

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

    def _record(self, job: ApplyJob, o: ApplyOutcome, latency: float) -> None:
        t = job.target
        before = (self.state.target(t.name), self._at(t))
        self._fold_apply(job, o)
        # Its first apply in this run checked its catalog entry (which may change nothing).
        checking = t.catalog is not None and t.name not in self.catalog_checked
        if o.error is None and not o.interrupted:
            self.catalog_checked.add(t.name)
        if (
            not checking
            and o.error is None
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
        retry = self.sched.report(
            t.name, o.seconds, o.error is not None, self._now_ms(), latency=latency
        )
        if o.blocked is not None:
            self.blocked[t.name] = t.blocked if t.blocked is not None else STICKY_BLOCK
            self._error(o.blocked)
            r.blocked = o.blocked
        if o.error is not None:
            r.error = o.error
            r.failures += 1
            again = ""
            if self.s.follow and not self.draining and retry is not None:
                again = f" (tried again in {(retry - self._now_ms()) / 1000:.0f}s)"
            self._error(o.error, again)
        elif not o.interrupted:
            r.error = None
        if self.on_apply is not None:
            self.on_apply(o, self.result)

    def _note_wait(self, t: TargetPlan, limit: int) -> None:
        d = next(d for d in t.ddl if d.status == READY and d.rename_from)
        r = self._target_run(t)
        r.waits_for = d.rename_from
        if (t.name, d.commit_ts) not in self.waits_noted:
            self.waits_noted.add((t.name, d.commit_ts))
            self.out(
                f"  {t.name}: its RENAME TABLE or EXCHANGE PARTITION at commit_ts {d.commit_ts} copies rows of "
                f"{d.rename_from}, which has not applied up to {limit} yet: applied up to "
                "there first"
            )


def in_round(t: TargetPlan, limit: int | None) -> bool:
    """Whether what `t` has left to do is one row segment the plan sends to a round, after
    at most its creation, table features and entry properties (a first catch-up creates
    every target), and steps that read no rows (`without_rows`: a CREATE TABLE or an ADD
    COLUMN from the stream, which commit first, each at its own point)."""
    if not t.steps:
        return False
    last = t.steps[-1]
    return (
        isinstance(last, Rows)
        and last.write == WRITE_ROUND
        and last.error is None
        and (limit is None or end_ts(last) <= limit)
        and all(
            isinstance(s, (Create, Features, TableProperties)) or without_rows(s)
            for s in t.steps[:-1]
        )
    )
