"""Carry out one target's planned steps in Spark: create, table features, load, row segments,
DDL, or the stop at a blocked DDL, each its own commit carrying the target's marker.

The plan decided the steps (`TargetPlan.steps`, shown by `plan`); this module only runs
exactly those, in order, and records how far they got (`StepRunner.reached`, `marker`) and
what went wrong: a blocked DDL or a target's own error ends its steps (`blocked`,
`error`), a lost run lease or an unexpected error is kept in `crash` for the caller to
raise. When a target runs and
which targets wait for which (a RENAME TABLE that copies another target's rows) is the run
loop's business (`loop`, `schedule`); `spark.engine` calls this per apply.
"""

from __future__ import annotations

import fnmatch
import time
from collections import deque
from collections.abc import Callable, Sequence

from ticdc_sync.core.errors import BlockedError, UserError
from ticdc_sync.core.window import Marker
from ticdc_sync.plan.model import (
    WRITE_REWRITE,
    WRITE_ROUND,
    Catalog,
    Create,
    Ddl,
    Features,
    Halt,
    Layout,
    LoadRows,
    Rows,
    Step,
    Stop,
    TableProperties,
    TargetPlan,
    end_ts,
)
from ticdc_sync.spark.apply.ddl_commit import apply_ddl, apply_features, blocked_error
from ticdc_sync.spark.apply.relayout import change_layout, set_properties
from ticdc_sync.spark.apply.rewrite import Rewriter
from ticdc_sync.spark.apply.rows import TargetWriter
from ticdc_sync.spark.runtime import labels
from ticdc_sync.warehouse.lease import LeaseLost

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
    if isinstance(step, Layout):
        return "layout"
    if isinstance(step, TableProperties):
        return "properties"
    if isinstance(step, LoadRows):
        return "load"
    if isinstance(step, Catalog):
        return "catalog"
    return "blocked"


class StepRunner:
    """One target's queue of steps, its marker and what its steps did."""

    def __init__(
        self,
        writer: TargetWriter,
        target: TargetPlan,
        should_stop: StopCheck = _never,
        on_step: StepHook = _ignore,
        checked: set[str] | None = None,
    ) -> None:
        self.writer = writer
        # The row segments the plan sends to a rewrite; `checked`: the targets whose
        # uncommitted rewrite files this run removed already (one look per target per run).
        self.rewriter = Rewriter(writer, set() if checked is None else checked)
        self.target = target
        self.steps: deque[Step] = deque(target.steps)
        self.n_steps = len(self.steps)
        self.marker: Marker = target.marker
        self.done = False  # stopped (blocked, failed, interrupted) or nothing left
        self.interrupted = False  # stopped between two steps on request (`should_stop`)
        self.should_stop = should_stop
        self.on_step = on_step
        self.errors: list[str] = []
        self.crash: BaseException | None = None
        self.seconds = 0.0
        self.summarized = False  # its summary line is out
        # The commit_ts its completed steps reach: every change at or below is in the table
        # (a row segment without rows commits nothing, yet is done).
        self.reached: int = self.marker.applied_ts
        self.ran: list[Step] = []  # the steps run to their end, in order
        # Its next round segment was in a round that did not land it: the rewrite does.
        self.round_tried = False
        # The schema history holds the versions of its DDL steps already (a round records
        # those of all its targets at once).
        self.history_recorded = False
        # What its catalog step recorded (None: it has not run).
        self.catalog_record = None

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

    def advance(self, limit: int = END, keep_last: bool = False) -> None:
        """Run the steps that end at or before `limit` (all of them by default); with
        `keep_last`, all but the last (a round segment, which its round lands)."""
        if self.done:
            return
        w = self.writer
        t0 = time.monotonic()
        try:
            with labels.phase(w.spark, f"apply {w.name}"):
                while self.steps and end_ts(self.steps[0]) <= limit:
                    if keep_last and len(self.steps) == 1:
                        return
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
            self.done = True
        except UserError as e:
            w.result.error = str(e)
            self.errors.append(f"target {w.name}: {e}")
            self.done = True
        except Exception as e:  # noqa: BLE001 - the caller raises it
            self.crash = e
            self.done = True
        finally:
            self.seconds += time.monotonic() - t0
            if not self.steps:
                self.done = True
            if self.done and not self.summarized:
                self.summarized = True
                w.out(summary_line(self))
                self.on_step(self.target.name, None)

    def _run(self, step: Step) -> None:
        w = self.writer
        if isinstance(step, Create):
            w.create(step.schema, step.properties, step.partition_by, step.cluster_by)
        elif isinstance(step, Features):
            apply_features(w, self.marker, step.parts)
        elif isinstance(step, Layout):
            change_layout(w, step)
        elif isinstance(step, TableProperties):
            set_properties(w, step)
        elif isinstance(step, LoadRows):
            from ticdc_sync.spark.apply import load

            self.marker = load.load(w, step.load)
        elif isinstance(step, Rows) and not step.tables and step.error is None:
            pass  # no table of it has a schema yet (created later): no rows to read
        elif isinstance(step, Rows):
            self.rewriter.remove_orphans_once()
            if step.write not in (WRITE_REWRITE, WRITE_ROUND) or not self.rewriter.can_commit():
                self.marker = w.merge(self.marker, step)
            else:
                landed = None
                if step.write == WRITE_ROUND and not self.round_tried:
                    # A round of one (the run loop hands targets due together to one
                    # round: `SparkEngine.apply_round`); None: the rewrite lands it.
                    from ticdc_sync.spark.apply import rounds

                    item = rounds.RoundItem(w, self.marker, step)
                    landed = rounds.land(w.spark, w.state, [item])[0]
                self.marker = (
                    landed if landed is not None else self.rewriter.segment(self.marker, step)
                )
        elif isinstance(step, Ddl):
            self.marker = apply_ddl(
                w, self.marker, step.ddl, step.ahead, recorded=self.history_recorded
            )
        elif isinstance(step, Stop):
            raise blocked_error(w.name, step.ddl)
        elif isinstance(step, Halt):
            raise BlockedError(f"target {w.name} is blocked: {step.reason}")
        elif isinstance(step, Catalog):
            from ticdc_sync.spark.apply import catalog_sync

            self.catalog_record = catalog_sync.sync(w.spark, w.name, step.entry, w.state.warehouse)
        self._ran(step)

    def _ran(self, step: Step) -> None:
        self.writer.result.applied_ts = self.marker.applied_ts
        self.ran.append(step)
        if isinstance(step, (Rows, LoadRows)) or (isinstance(step, Ddl) and not step.ahead):
            self.reached = max(self.reached, end_ts(step))

    def landed(self, marker: Marker, seconds: float) -> None:
        """Its next step, a row segment, was landed by a round of several targets
        (`rounds.land`) and its target now stands at `marker`."""
        step = self.steps.popleft()
        self.marker = marker
        self._ran(step)
        self.seconds += seconds
        if not self.steps:
            self.done = True
            self.summarized = True
            self.writer.out(summary_line(self))
            self.on_step(self.target.name, None)


def summary_line(p: StepRunner) -> str:
    """The line a target's apply ends with."""
    r = p.writer.result
    return (
        f"apply {p.target.name}: +{r.inserted} ~{r.updated} -{r.deleted} in {r.merges} "
        f"merge(s), {len(r.ddl_applied)} DDL, applied ts {r.applied_ts} ({p.seconds:.1f}s)"
        + (", interrupted" if p.interrupted else "")
    )
