"""Progress of a run's phases, read from Spark while they run (`console.progress_from`).

The runner says which phase runs (`phase`), with what it knows of the work's size: records
in Kafka between the staged positions and the end offsets, bytes of capture files
(`sized`); the executor says which step each target is at (`step`). A poll (`line`, from
the console's thread) reads the phase's Spark jobs, found by their job group
(`labels.phase`): tasks done of all tasks, from Spark's status store, and records and
bytes read by the staging read (the job named `labels.read_job`), which Spark updates as
tasks finish and at executor heartbeats. Must not start jobs or change what a run does.

Over Spark Connect there is no status store to poll: the server streams each operation's
stages (tasks done of all tasks, bytes read) to the client, and a handler registered on
the run's session (`attach`) keeps them by the phase of the thread that runs the operation
(`labels.current`). Coarser: no records read, and the applies' own sessions (`fanout`)
report no tasks (their targets and steps still show).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from ticdc_sync.core.progress import PhaseStatus, render
from ticdc_sync.spark.runtime import labels
from ticdc_sync.spark.runtime.remote import is_connect

_DONE = ("COMPLETE", "FAILED", "SKIPPED")


@dataclass
class _Phase:
    status: PhaseStatus
    groups: tuple[str, ...]
    read_job: str | None
    started: float
    before: set[int] = field(default_factory=set)  # jobs of these groups from earlier phases


class RunProgress:
    """What a run is doing now, as one line of text on demand."""

    def __init__(self, spark=None, console=None) -> None:
        self.spark = spark
        self.console = console
        self._lock = threading.Lock()
        self._phase: _Phase | None = None
        # Caches of what no longer changes: a job's stages and name, a finished stage's
        # metrics (tasks done, tasks, records, bytes).
        self._job_stages: dict[int, list[int]] = {}
        self._job_names: dict[int, str] = {}
        self._stage_done: dict[int, tuple[int, int, int, int]] = {}
        # Wall seconds of each phase that ended (run_results' `phases`; staging and
        # applies overlap, so their seconds do too).
        self._seconds: dict[str, float] = {}
        # Spark Connect: per operation, (its phase's job group, when first heard of, tasks
        # done, tasks, bytes read), from the server's progress messages.
        self._ops: dict[str, tuple[str, float, int, int, int]] = {}

    def attach(self, spark) -> None:
        """The session whose jobs to read (once it exists)."""
        self.spark = spark
        if is_connect(spark):
            spark.registerProgressHandler(self._on_progress)

    def _on_progress(self, stages, inflight_tasks, operation_id, done) -> None:
        """Spark Connect's progress message of an operation (in the thread running it)."""
        group = labels.current()
        if group is None or operation_id is None:
            return
        stages = list(stages or ())
        tasks_done = sum(int(s.num_completed_tasks) for s in stages)
        tasks = sum(int(s.num_tasks) for s in stages)
        read = sum(int(s.num_bytes_read) for s in stages)
        with self._lock:
            seen = self._ops.get(operation_id)
            first = seen[1] if seen is not None else time.monotonic()
            self._ops[operation_id] = (group, first, tasks_done, tasks, read)

    @contextmanager
    def phase(
        self,
        name: str,
        *,
        groups: Sequence[str] = (),
        read_job: str | None = None,
        bytes_total: int | None = None,
        targets_total: int | None = None,
    ) -> Iterator[PhaseStatus]:
        """The phase `name` runs inside the block; its Spark jobs are those of the job
        groups `groups` (phase texts, as given to `labels.phase`)."""
        phase = self.begin(
            name,
            groups=groups,
            read_job=read_job,
            bytes_total=bytes_total,
            targets_total=targets_total,
        )
        try:
            yield phase.status
        finally:
            self.end(phase)

    def begin(
        self,
        name: str,
        *,
        groups: Sequence[str] = (),
        read_job: str | None = None,
        bytes_total: int | None = None,
        targets_total: int | None = None,
    ) -> _Phase:
        """Start the phase `name` (`phase` without a block: for a phase that another
        thread's work ends, the applies of a run); `end` ends it."""
        status = PhaseStatus(name, bytes_total=bytes_total, targets_total=targets_total)
        if targets_total is not None:
            status.targets_done = 0
        ids = tuple(labels.group_id(g) for g in groups)
        phase = _Phase(status, ids, read_job, time.monotonic(), self._jobs(ids))
        with self._lock:
            self._phase = phase
        if self.console is not None:
            self.console.phase(self._intro(status))
        return phase

    def end(self, phase: _Phase) -> None:
        with self._lock:
            if self._phase is phase:
                self._phase = None
            name = phase.status.name
            took = time.monotonic() - phase.started
            self._seconds[name] = self._seconds.get(name, 0.0) + took

    def seconds(self) -> dict[str, float]:
        """Wall seconds of each phase that ended so far (a phase that ran several times is
        summed), in the order they first ended."""
        with self._lock:
            return {k: round(v, 3) for k, v in self._seconds.items()}

    @staticmethod
    def _intro(st: PhaseStatus) -> str:
        known = []
        if st.bytes_total is not None:
            from ticdc_sync.core.progress import size

            known.append(f"{size(st.bytes_total)} of capture files")
        if st.targets_total is not None:
            known.append(f"{st.targets_total} target(s)")
        return st.name + (f" ({', '.join(known)})" if known else "")

    def sized(self, records: int | None = None, bytes_: int | None = None) -> None:
        """What the current phase has to read, once known."""
        with self._lock:
            if self._phase is not None:
                if records is not None:
                    self._phase.status.records_total = records
                if bytes_ is not None:
                    self._phase.status.bytes_total = bytes_

    def step(self, target: str, text: str | None) -> None:
        """Target `target` is at step `text` (None: it is done)."""
        with self._lock:
            if self._phase is None:
                return
            st = self._phase.status
            if text is None:
                st.steps.pop(target, None)
                st.targets_done = (st.targets_done or 0) + 1
            else:
                st.steps[target] = text

    # ------------------------------------------------------------------ polling

    def line(self) -> str | None:
        """The current phase's progress line (None outside phases)."""
        with self._lock:
            phase = self._phase
            if phase is None:
                return None
            st = phase.status
            st.elapsed = time.monotonic() - phase.started
        if self.spark is not None and phase.groups:
            # Spark busy or stopping: show what is known.
            with contextlib.suppress(Exception):
                self._poll(phase)
        with self._lock:
            return render(st)

    def _jobs(self, groups: tuple[str, ...]) -> set[int]:
        if self.spark is None or not groups or is_connect(self.spark):
            return set()
        tracker = self.spark.sparkContext.statusTracker()
        return {j for g in groups for j in tracker.getJobIdsForGroup(g)}

    def _poll(self, phase: _Phase) -> None:
        if is_connect(self.spark):
            self._poll_connect(phase)
            return
        sc = self.spark.sparkContext
        tracker = sc.statusTracker()
        store = sc._jsc.sc().statusStore()
        done = total = records = read_bytes = 0
        reading = False
        for job in sorted(self._jobs(phase.groups) - phase.before):
            stages = self._job_stages.get(job)
            if stages is None:
                info = tracker.getJobInfo(job)
                if info is None:
                    continue
                stages = self._job_stages[job] = list(info.stageIds)
            is_read = phase.read_job is not None and self._name(store, job) == phase.read_job
            reading = reading or is_read
            for sid in stages:
                d, t, r, b = self._stage(store, sid)
                done += d
                total += t
                if is_read:
                    records += r
                    read_bytes += b
        with self._lock:
            st = phase.status
            st.tasks_done, st.tasks_total = done, total
            if reading:
                st.records, st.bytes = records, read_bytes

    def _poll_connect(self, phase: _Phase) -> None:
        with self._lock:
            ops = [o for o in self._ops.values() if o[0] in phase.groups and o[1] >= phase.started]
            st = phase.status
            st.tasks_done = sum(o[2] for o in ops)
            st.tasks_total = sum(o[3] for o in ops)
            if phase.read_job is not None and ops:
                st.bytes = sum(o[4] for o in ops)

    def _name(self, store, job: int) -> str:
        name = self._job_names.get(job)
        if name is None:
            name = self._job_names[job] = str(store.job(job).name())
        return name

    def _stage(self, store, sid: int) -> tuple[int, int, int, int]:
        """(tasks done, tasks, records read, bytes read) of a stage; skipped stages count
        nothing."""
        cached = self._stage_done.get(sid)
        if cached is not None:
            return cached
        try:
            sd = store.lastStageAttempt(sid)
        except Exception:  # noqa: BLE001 - not known to the store yet
            return (0, 0, 0, 0)
        status = str(sd.status().toString())
        if status == "SKIPPED":
            got = (0, 0, 0, 0)
        else:
            got = (
                int(sd.numCompleteTasks()),
                int(sd.numTasks()),
                int(sd.inputRecords()),
                int(sd.inputBytes()),
            )
        if status in _DONE:
            self._stage_done[sid] = got
        return got
