"""Carry out a Plan in Spark: each target's steps, targets side by side, in epochs at renames.

The plan decided what every target does (`plan.steps.target_steps`); this module only runs
the steps and reports what happened. Targets are independent (each commits to its own table
with its own marker) and run side by side (`fanout`), except across a RENAME TABLE that
moves one target's rows into another: the target the rows leave must have reached the
rename's commit_ts - 1 before the one they enter copies them (by time travel, so the order
of the two at the rename itself does not matter). So a source's targets advance in epochs:
everything before the first such rename, then the renames at it, then the next epoch.
"""

from __future__ import annotations

import fnmatch
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial

from ticdc_sync.errors import BlockedError, UserError
from ticdc_sync.lease import LeaseLost
from ticdc_sync.model import Project
from ticdc_sync.plan.model import Plan, TargetPlan
from ticdc_sync.plan.steps import (
    Create,
    Ddl,
    Features,
    Halt,
    LoadRows,
    Rows,
    Step,
    Stop,
    end_ts,
    target_steps,
)
from ticdc_sync.spark import fanout, labels
from ticdc_sync.spark.ddl_commit import apply_ddl, apply_features, blocked_error
from ticdc_sync.spark.rows import TargetWriter
from ticdc_sync.spark.state import State
from ticdc_sync.window import Marker

Out = Callable[[str], None]
END = 2**63 - 1


def selected(name: str, select: Sequence[str], exclude: Sequence[str] = ()) -> bool:
    if select and not any(fnmatch.fnmatchcase(name, pat) for pat in select):
        return False
    return not any(fnmatch.fnmatchcase(name, pat) for pat in exclude)


StopCheck = Callable[[], bool]
StepHook = Callable[[str, "str | None"], None]


def _never() -> bool:
    return False


def _ignore(_target: str, _step: str | None) -> None:
    return None


def step_text(step: Step) -> str:
    """What a step is, for progress reports."""
    if isinstance(step, Create):
        return "create"
    if isinstance(step, Rows):
        return "merge"
    if isinstance(step, Ddl):
        return "DDL"
    if isinstance(step, Features):
        return "table features"
    if isinstance(step, LoadRows):
        return "load"
    return "blocked"


class _Progress:
    """One target's queue of steps, marker and outcome across the epochs of a run."""

    def __init__(
        self,
        writer: TargetWriter,
        target: TargetPlan,
        should_stop: StopCheck = _never,
        on_step: StepHook = _ignore,
    ) -> None:
        self.writer = writer
        self.target = target
        self.steps: deque[Step] = deque(target_steps(target))
        self.n_steps = len(self.steps)
        self.marker: Marker = target.marker
        self.done = False  # stopped (blocked, failed, interrupted) or nothing left
        self.interrupted = False  # stopped between two steps on request (`should_stop`)
        self.should_stop = should_stop
        self.on_step = on_step
        self.errors: list[str] = []
        self.crash: BaseException | None = None
        self.seconds = 0.0
        self.summary: dict | None = None  # its run_results entry, once it is done

    def _next(self) -> Step | None:
        """The next step to run, or None when asked to stop (each step is its own commit
        with the marker, so stopping between two of them is safe)."""
        if self.should_stop():
            self.interrupted = True
            self.done = True
            return None
        step = self.steps.popleft()
        self.on_step(
            self.target.name,
            f"{step_text(step)} {self.n_steps - len(self.steps)}/{self.n_steps}",
        )
        return step

    def advance(self, limit: int, barrier: int | None) -> None:
        """Run the steps that end at or before `limit`, then the DDL at `barrier`, if next."""
        if self.done:
            return
        w = self.writer
        t0 = time.monotonic()
        try:
            with labels.phase(w.spark, f"apply {w.name}"):
                while self.steps and end_ts(self.steps[0]) <= limit:
                    step = self._next()
                    if step is None:
                        return
                    self._run(step)
                nxt = self.steps[0] if self.steps else None
                if barrier is not None and isinstance(nxt, Ddl) and nxt.commit_ts == barrier:
                    step = self._next()
                    if step is None:
                        return
                    self._run(step)
        except LeaseLost as e:
            # Not this target's failure: the whole run must stop committing. Every other
            # target stops at its own next commit; the run then ends with this error.
            self.crash = e
            self.done = True
        except BlockedError as e:
            w.result.blocked = {"message": str(e)}
            self.errors.append(str(e))
            w.out(f"error: {e}")
            self.done = True
        except UserError as e:
            w.result.error = str(e)
            self.errors.append(f"target {w.name}: {e}")
            w.out(f"error: target {w.name}: {e}")
            self.done = True
        except Exception as e:  # noqa: BLE001 - re-raised once every target has finished
            self.crash = e
            self.done = True
        finally:
            self.seconds += time.monotonic() - t0
            if not self.steps:
                self.done = True
            if self.done and self.summary is None:
                self.summary = _summary(self, w.out)
                self.on_step(self.target.name, None)
            if isinstance(w.out, fanout.GroupedOut):
                w.out.flush()

    def _run(self, step: Step) -> None:
        w = self.writer
        if isinstance(step, Create):
            w.create(step.schema)
        elif isinstance(step, Features):
            apply_features(w, self.marker, step.parts)
        elif isinstance(step, LoadRows):
            from ticdc_sync.spark import load

            self.marker = load.load(w, step.load)
        elif isinstance(step, Rows):
            self.marker = w.merge(self.marker, step)
        elif isinstance(step, Ddl):
            self.marker = apply_ddl(w, self.marker, step.ddl, step.ahead)
        elif isinstance(step, Stop):
            raise blocked_error(w.name, step.ddl)
        elif isinstance(step, Halt):
            raise BlockedError(f"target {w.name} is blocked: {step.reason}")
        w.result.applied_ts = self.marker.applied_ts


def execute(
    spark,
    state: State,
    project: Project,
    plan: Plan,
    *,
    select: Sequence[str] = (),
    exclude: Sequence[str] = (),
    out: Out = print,
    should_stop: StopCheck = _never,
    on_step: StepHook = _ignore,
) -> tuple[dict[str, dict], list[str]]:
    """Bring every selected target of `plan` to where the plan says. Returns each target's
    run_results entry and the error lines (blocked or failed targets); an unexpected error
    is raised after every other target has finished. `should_stop` is asked before each
    step: when it says so, every target stops there (`interrupted` in its entry).
    `on_step(target, text)` hears which step each target begins, and None when it is done."""
    results: dict[str, dict] = {}
    errors: list[str] = []
    crash: BaseException | None = None
    for sp in plan.sources:
        targets = [
            t
            for t in plan.targets
            if t.source == sp.source.name and selected(t.name, select, exclude)
        ]
        if not targets:
            continue
        side_by_side = len(targets) > 1
        progress = []
        for t in targets:
            w = TargetWriter(spark, state, project, sp.source, t, sp.timeline, out)
            if side_by_side:
                w.rebind(fanout.target_session(spark), fanout.GroupedOut(out))
            progress.append(_Progress(w, t, should_stop, on_step))
        barriers = sorted(
            {
                s.commit_ts
                for p in progress
                for s in p.steps
                if isinstance(s, Ddl) and s.ddl.rename_from
            }
        )
        # Every target reaches the barrier's commit_ts - 1 before any DDL at the barrier
        # runs: the rows a rename moves are read as of then.
        phases = [x for b in barriers for x in ((b - 1, None), (b - 1, b))] + [(END, None)]
        for limit, barrier in phases:
            tasks = [partial(p.advance, limit, barrier) for p in progress if not p.done]
            for outcome in fanout.run_all(tasks, side_by_side):
                if isinstance(outcome, BaseException):
                    crash = crash or outcome
        for p in progress:
            crash = crash or p.crash
            errors.extend(p.errors)
            results[p.target.name] = p.summary or _summary(p, out)
    if crash is not None:
        raise crash
    return results, errors


def _summary(p: _Progress, out: Out) -> dict:
    r = p.writer.result
    out(
        f"apply {p.target.name}: +{r.inserted} ~{r.updated} -{r.deleted} in {r.merges} "
        f"merge(s), {len(r.ddl_applied)} DDL, applied ts {r.applied_ts} ({p.seconds:.1f}s)"
        + (", interrupted" if p.interrupted else "")
    )
    return {
        "source": p.target.source,
        "upstream": sorted(f"{d}.{t}" for d, t in p.target.upstreams),
        "applied_ts": r.applied_ts,
        "inserted": r.inserted,
        "updated": r.updated,
        "deleted": r.deleted,
        "merges": r.merges,
        "ddl": r.ddl_applied,
        "blocked": r.blocked,
        "error": r.error,
        "quarantined": r.quarantined,
        "interrupted": p.interrupted,
        "loaded": r.loaded,
        "seconds": round(p.seconds, 3),
    }
