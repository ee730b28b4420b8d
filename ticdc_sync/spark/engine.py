"""The Spark side of `engine.Engine`: stage a source in one commit, apply one target's planned
steps, trim the staging table, read the warehouse at the start of a run.

The run loop (`loop`) decides when each of these happens and keeps the state between them;
this module only carries them out and reports what happened (`engine.StageOutcome`,
`ApplyOutcome`, ...). A target's apply runs the steps its plan lists (`executor.StepRunner`,
in a session of its own), and reports its new state as delta-rs reads it. Targets of one
source due in the same round (`ApplyJob.peers`) read their staged rows from one copy of the
window (`shared_window`), a cache dropped when they are done and at the end of the run
(`close`). The run's own writes (stage, trim, sync points) come from the loop's stager
thread, one at a time. A trim there only raises a source's trimmed bound, which the next
staging commit publishes; the DELETE that follows, and the staging table's compaction, run
beside the polls on a thread of their own (`maintenance`), committing nothing a poll
conflicts with.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ticdc_sync.core.errors import Fatal, UserError
from ticdc_sync.core.model import Project, Source, TransportKind
from ticdc_sync.core.upstream import key
from ticdc_sync.plan.model import WRITE_ROUND, Create, Ddl, LoadRows
from ticdc_sync.run.engine import (
    ApplyJob,
    ApplyOutcome,
    MaintainJob,
    StageOutcome,
    Started,
    StopCheck,
    SyncPoint,
    TableSpan,
    TargetMaintained,
    TrimOutcome,
)
from ticdc_sync.spark.apply import maintain, rounds
from ticdc_sync.spark.apply.ddl_commit import history_rows
from ticdc_sync.spark.apply.executor import END, StepRunner, summary_line
from ticdc_sync.spark.apply.rows import TargetWriter
from ticdc_sync.spark.apply.shared_window import Windows
from ticdc_sync.spark.runtime import fanout, labels, raised
from ticdc_sync.spark.staging import staged_batch
from ticdc_sync.spark.staging.batch import labels_phase, resolve_bad_records, stage_source
from ticdc_sync.spark.staging.maintenance import Maintained, Maintenance
from ticdc_sync.spark.staging.state import State
from ticdc_sync.spark.staging.table import COMPACT_ABOVE_FILES
from ticdc_sync.spark.staging.trim import TrimJob, may_delete
from ticdc_sync.warehouse import read as warehouse

if TYPE_CHECKING:
    from ticdc_sync.spark.runtime.progress import RunProgress

Out = Callable[[str], None]


class SparkEngine:
    """`engine.Engine` over one SparkSession and the warehouse's state tables."""

    rounds = True

    def __init__(
        self,
        project: Project,
        spark,
        state: State,
        *,
        out: Out = print,
        progress: RunProgress | None = None,
        follow: bool = False,
        side_by_side: bool = True,
        on_step: Callable[[str, str | None], None] | None = None,
        on_first_apply: Callable[[], None] | None = None,
        trace: Out | None = None,
    ) -> None:
        from ticdc_sync.spark.runtime.progress import RunProgress

        self.project = project
        self.spark = spark
        self.state = state
        self.out = out
        self.progress = progress or RunProgress()
        self.follow = follow
        # Several targets at once: each one's lines printed together when it is done.
        self.side_by_side = side_by_side
        # What each apply's session starts from: the run's settings before any block set
        # one of its own (`fanout.runtime_conf`).
        self.session_conf = fanout.runtime_conf(spark)
        self.on_step = on_step or (lambda _t, _s: None)
        self.on_first_apply = on_first_apply
        # Where the whole trace of an error of Spark's goes (the log file).
        self.trace: Out = trace or (lambda _text: None)
        self._lock = threading.Lock()
        # Targets whose files a killed run wrote and never committed were looked for
        # (`rewrite.Rewriter.remove_orphans_once`): once per target per run.
        self.orphans_checked: set[str] = set()
        self.names = [s.name for s in project.sources]
        # The staged windows read once for the targets of a round (None: each target
        # reads the staging table itself). They are copied on apply threads, so in a
        # session of their own too, never in the run's (whose staging sets its own).
        self.windows: Windows | None = Windows(
            fanout.target_session(spark, self.session_conf), state
        )
        # The staging table's trims and compaction run beside the polls, in a session of
        # their own.
        self.maintenance = Maintenance(
            state.staging, lambda: fanout.target_session(spark, self.session_conf)
        )
        # What this process compacted and vacuumed of each target (`maintain`).
        self.upkeep = maintain.Memory()
        # Per source, the bound its staged events were last deleted up to by this process.
        self._deleted_to: dict[str, int] = {}
        # Sources whose DELETE failed since the last trim: tried again at the next trim,
        # not after every poll.
        self._failed: set[str] = set()
        # What ended beside the polls since the last trim reported it (`_harvest`).
        self._ended = Maintained()

    def close(self, *, at_once: bool = False) -> None:
        """The end of the run: wait for the staging table's maintenance still running
        (unless `at_once`: each of its commits is atomic, and a trim published and not yet
        deleted is deleted by a later run), say how it ended, and drop what the applies
        cached (the shared windows)."""
        if not at_once and self.maintenance.busy():
            self.out("  waiting for the staging table's trim or compaction to end")
            self.maintenance.wait()
        self._harvest()
        for line in _outcome(self._take_ended()).lines():
            self.out(line)
        if self.windows is not None:
            self.windows.close()

    # --- start -------------------------------------------------------------------------

    def read_state(self) -> Started:
        """The warehouse as the run finds it: read through delta-rs like `plan` does, with
        the tallies (and partition progress before open bad records) computed here."""
        tallies, progress = {}, {}
        for source in self.project.sources:
            tallies[source.name] = self.state.staging.tally(source.name)
            progress[source.name] = self._capped(source)
        ws = warehouse.read_state(self.project, tallies=tallies, progress=progress)
        staged = {
            name: {t: TableSpan(t_rows(tally, t), lo, hi) for t, (lo, hi) in tally.spans.items()}
            for name, tally in tallies.items()
        }
        from ticdc_sync.read import sync_points

        return Started(ws, staged, sync_points.newest_tsos(self.project))

    def _capped(self, source: Source) -> dict[tuple[str, int], int | None]:
        """Each partition with an open bad record: its progress just before that record."""
        tally = self.state.staging.tally(source.name)
        open_bad = self.state.quarantine.first_open(source.name) if tally.bad else {}
        parts = self.state.staging.partitions(source.name, open_bad)
        return {
            (p.topic, p.partition): self.state.staging.capped_watermark(source.name, p)
            for p in parts
            if p.first_bad_offset is not None
        }

    # --- staging -----------------------------------------------------------------------

    def stage(self, source: Source) -> StageOutcome:
        """Read what the source holds after the staged positions, stage it in one commit,
        and settle its open bad records (quarantined where their table's policy says so).
        That commit publishes any trimmed bound raised since the last one: its DELETE then
        starts beside the polls."""
        with labels.pool(self.spark, labels.STAGE_POOL):
            outcome = self._stage(source)
        self._maintain(compact=False)
        return outcome

    def _stage(self, source: Source) -> StageOutcome:
        t0 = time.monotonic()
        staging = self.state.staging
        staging.last_batch.pop(source.name, None)
        try:
            staged, records = stage_source(
                self.project, self.spark, self.state, source, self.out, self.progress
            )
        except Exception as e:  # noqa: BLE001 - a Kafka outage is the loop's to wait out
            why = self._unavailable(e)
            if why is None:
                raise
            return StageOutcome(
                source.name,
                0,
                staging.tally(source.name),
                unavailable=why,
                seconds=time.monotonic() - t0,
            )
        res: dict = {}
        phase = f"resolve {source.name}"
        with labels_phase(self.spark, phase), self.progress.phase(phase, groups=[phase]):
            errors = resolve_bad_records(self.project, self.state, source, res, self.out)
            tally = staging.tally(source.name)
            if not tally.partitions:
                topics = ", ".join(source.topics) or f"pattern {source.topic_pattern}"
                self.out(
                    f"warning: source {source.name} has read nothing from its topics ever "
                    f"({topics})"
                )
            open_bad = self.state.quarantine.first_open(source.name) if tally.bad else {}
            batch = staging.last_batch.get(source.name)
            tables: dict[tuple[str, str], TableSpan] = {}
            ddl: tuple = ()
            metadata: dict = {}
            if batch is not None and staged:
                tables = staged_batch.tables(batch)
                ddl = staged_batch.ddl_events(staging, batch)
                metadata = staged_batch.new_table_metadata(staging, batch)
            return StageOutcome(
                source=source.name,
                staged=staged,
                tally=tally,
                ddl=ddl,
                tables=tables,
                open_bad=open_bad,
                progress=self._capped(source) if open_bad else {},
                metadata=metadata,
                quarantined=int(res.get("quarantined", 0)),
                errors=tuple(errors),
                seconds=time.monotonic() - t0,
                records=records,
            )

    def _unavailable(self, e: Exception) -> str | None:
        """Why a `--follow` run could not read Kafka (it tries again later), or None."""
        if not self.follow or self.project.output.transport.kind is not TransportKind.KAFKA:
            return None
        from ticdc_sync.spark.transports.kafka import is_unavailable

        if not is_unavailable(self.project.output.transport, e):
            return None
        text = str(e).strip()
        return (text.splitlines()[0] if text else type(e).__name__)[:300]

    def check_catalog(self, catalog: str) -> None:
        """The output's catalog loads (`catalog_sync.check`), before any apply."""
        from ticdc_sync.spark.apply import catalog_sync

        catalog_sync.check(self.spark, catalog)

    # --- applying ----------------------------------------------------------------------

    def apply(self, job: ApplyJob, should_stop: StopCheck) -> ApplyOutcome:
        """Run `job.target`'s steps (up to `job.limit`, every step when None), each its own
        commit with the target's marker; a target's own failure is reported in the
        outcome, a lost run lease raises `Fatal`, and an error of Spark's is raised said by
        its Java class and message (`raised.SparkFailure`), its trace in the log."""
        try:
            return self._apply(job, should_stop)
        except Exception as e:
            raise self._said(e, [job.target.name]) from e

    def apply_round(self, jobs: Sequence[ApplyJob], should_stop: StopCheck) -> list[ApplyOutcome]:
        """`_apply_round`, with an error of Spark's said as `apply` says it."""
        try:
            return self._apply_round(jobs, should_stop)
        except Exception as e:
            raise self._said(e, [j.target.name for j in jobs]) from e

    def _said(self, e: Exception, targets: list[str]) -> Exception:
        """`e`, or for an error of Spark's, what says it (its trace goes to the log file,
        and with `--debug` to the terminal)."""
        if isinstance(e, (UserError, Fatal)):
            return e
        failure = raised.spark_failure(e)
        if failure is None:
            return e
        self.trace(f"trace of the error of {', '.join(targets)}:\n{failure.trace.rstrip()}")
        return failure

    def _apply(self, job: ApplyJob, should_stop: StopCheck) -> ApplyOutcome:
        self._first_apply()
        t, sp = job.target, job.source
        out: Out = fanout.GroupedOut(self.out) if self.side_by_side else self.out
        # Always a session of its own (`fanout`), even with one apply worker: the apply
        # runs on a worker thread while the loop's stager thread stages (`--follow`), trims
        # and records sync points on the run's session, and a commit's userMetadata (the
        # target's marker, the staging tallies) and the MERGE's settings are session confs.
        spark = fanout.target_session(self.spark, self.session_conf)
        w = TargetWriter(spark, self.state, sp.source, t, out)
        p = StepRunner(w, t, should_stop, self.on_step, self.orphans_checked)
        windows = self.windows
        with labels.pool(spark, labels.APPLY_POOL):
            window = None
            try:
                if windows is not None:
                    peers = job.peers or ((t, job.limit),)
                    window = windows.acquire(sp.source.name, t, job.limit, peers)
                w.use_window(window)
                p.advance(END if job.limit is None else job.limit)
            finally:
                w.use_window(None)
                if windows is not None:
                    windows.release(sp.source.name, t.name, window)
                fanout.done(spark)
        return self._outcome(t, w, p, out)

    def _first_apply(self) -> None:
        """Call `on_first_apply` once, at the run's first apply or round."""
        with self._lock:
            first, self.on_first_apply = self.on_first_apply, None
        if first is not None:
            first()

    def _outcome(
        self, t, w: TargetWriter, p: StepRunner, out: Out, history: _Once | None = None
    ) -> ApplyOutcome:
        """What one target's apply did, after its steps ran."""
        if p.crash is not None:
            # A lost run lease (`Fatal`) ends the run; anything else fails this target.
            raise p.crash
        r = w.result
        if not p.summarized:
            # Stopped at `limit` (a RENAME ahead waits for another target): say where.
            out(summary_line(p))
        if isinstance(out, fanout.GroupedOut):
            out.flush()
        location = t.location
        recorded = ()
        if any(isinstance(s, (Ddl, LoadRows, Create)) for s in p.ran):
            ups = {(db.lower(), tb.lower()) for db, tb in t.upstreams}
            every = (
                history() if history is not None else warehouse.recorded_history(self.project, ups)
            )
            history_of = every.get(t.source, {})
            mine = {k for k in history_of if k in ups}
            recorded = tuple((k, v) for k in sorted(mine) for v in history_of[k])
        return ApplyOutcome(
            target=t.name,
            state=dataclasses.replace(
                warehouse.target_state(t.name, location),
                catalog=p.catalog_record or (t.catalog.recorded if t.catalog else None),
            ),
            reached=p.reached,
            inserted=r.inserted,
            updated=r.updated,
            deleted=r.deleted,
            merges=r.merges,
            quarantined=r.quarantined,
            loaded=r.loaded,
            ddl=tuple(r.ddl_applied),
            recorded=recorded,
            blocked=(r.blocked or {}).get("message"),
            error=r.error and f"target {t.name}: {r.error}",
            interrupted=p.interrupted,
            seconds=p.seconds,
            ran=tuple(p.ran),
        )

    def _apply_round(self, jobs: Sequence[ApplyJob], should_stop: StopCheck) -> list[ApplyOutcome]:
        """Land the one round segment (`WRITE_ROUND`) each of `jobs`' targets has left
        (after its creation, if any, which runs first), in one round (`rounds.land`): one
        Spark job for all, one commit each. A target the round does not land runs its step
        alone (the rewrite). Outcomes in `jobs`' order."""
        self._first_apply()
        spark = fanout.target_session(self.spark, self.session_conf)
        runners: list[tuple[ApplyJob, TargetWriter, StepRunner, Out]] = []
        for job in jobs:
            t, sp = job.target, job.source
            # Always grouped: the round's targets run their steps ahead of the round in
            # turn, then the round; each target's lines still print together.
            out: Out = fanout.GroupedOut(self.out)
            w = TargetWriter(spark, self.state, sp.source, t, out)
            runners.append(
                (job, w, StepRunner(w, t, should_stop, self.on_step, self.orphans_checked), out)
            )
        try:
            with labels.pool(spark, labels.APPLY_POOL):
                self._record_history(runners)
                for job, _, p, _ in runners:
                    # Its creation, table features and DDL that reads no rows first, each
                    # its own commit (`plan.model.without_rows`); its round segment last.
                    p.advance(END if job.limit is None else job.limit, keep_last=True)
                if not should_stop():
                    self._round(spark, [(w, p) for _, w, p, _ in runners if _round_next(p)])
                for job, _, p, _ in runners:
                    # What the round did not land (and an interrupted round), one by one.
                    p.advance(END if job.limit is None else job.limit)
        finally:
            fanout.done(spark)
        # `_outcome` raises a lost lease (`p.crash`) before any outcome is kept. The schema
        # history is read once for the round's targets, not once per target.
        ups = {key(db, tb) for job in jobs for db, tb in job.target.upstreams}
        history = _Once(lambda: warehouse.recorded_history(self.project, ups))
        return [self._outcome(job.target, w, p, out, history) for job, w, p, out in runners]

    def _record_history(self, runners) -> None:
        """The schema versions of the DDL steps ahead of the round's segments, for every
        target of the round, in one commit (`ddl_commit.history_rows`), not one each."""
        rows = [
            row
            for _, w, p, _ in runners
            for step in list(p.steps)[:-1]
            if isinstance(step, Ddl)
            for row in history_rows(w, step.ddl)
        ]
        if rows:
            self.state.history.append(rows)
        for _, _, p, _ in runners:
            p.history_recorded = True

    def _round(self, spark, runners: list[tuple[TargetWriter, StepRunner]]) -> None:
        t0 = time.monotonic()
        items, landing = [], []
        for w, p in runners:
            p.round_tried = True
            self.on_step(w.name, "round")
            p.rewriter.remove_orphans_once()
            if p.rewriter.can_commit():
                items.append(rounds.RoundItem(w, p.marker, p.steps[0]))
                landing.append(p)
        with labels.phase(spark, f"round of {len(items)} target(s)"):
            markers = rounds.land(spark, self.state, items)
        # Each target's share of the round: what the schedule expects its applies to take.
        share = (time.monotonic() - t0) / max(1, len(runners))
        for p, marker in zip(landing, markers, strict=True):
            if marker is not None:
                p.landed(marker, share)

    # --- trimming ----------------------------------------------------------------------

    def trim(self, bounds: Mapping[str, int], *, final: bool = False) -> TrimOutcome:
        """Raise each source's trimmed bound (`retention.trim_bound` decided it) where the
        staging table holds events at or below it: the next staging commit publishes it,
        and only then are they deleted, beside the polls (`maintenance`), in a DELETE that
        carries no tallies. Start that, and a compaction of the staging table when it has
        gathered many files. `final` (the run ends: no poll follows): publish the bounds in
        a commit of their own and wait for the DELETEs and the compaction. Reports what
        ended beside the polls since the last trim."""
        staging = self.state.staging
        with labels_phase(self.spark, "retention"), labels.pool(self.spark, labels.STAGE_POOL):
            for name, bound in sorted(bounds.items()):
                trimmed = staging.tally(name).trimmed
                if trimmed is not None and trimmed >= bound:
                    continue
                if may_delete(staging.events_path, name, bound):
                    staging.intend_trim(name, bound)
            if final:
                staging.publish()
        self._failed.clear()
        if final:
            # A round started earlier first; then this run's last trims, all waited for.
            self.maintenance.wait()
            self._maintain(compact=True)
            self.maintenance.wait()
        else:
            self._maintain(compact=True)
        self._harvest()
        return _outcome(self._take_ended())

    def _maintain(self, *, compact: bool) -> None:
        """Start the staging table's maintenance beside the polls unless it is running: the
        DELETE of each trim a commit has published and this process has not run yet (after
        a restart: each published one, the first time, which deletes what a run killed in
        between left; not one that failed since the last trim), and (`compact`) a
        compaction if one is due."""
        self._harvest()
        if self.maintenance.busy():
            return
        staging = self.state.staging
        jobs = []
        for name in self.names:
            published = staging.published(name)
            job = TrimJob.of(name, published) if published is not None else None
            due = job is not None and job.upto_ts > self._deleted_to.get(name, -1)
            if due and name not in self._failed:
                jobs.append(job)
        self.maintenance.start(jobs, COMPACT_ABOVE_FILES if compact else None)

    def _harvest(self) -> None:
        """Fold the maintenance rounds that ended into what the next trim reports."""
        for m in self.maintenance.ended():
            for name, (bound, n) in m.trimmed.items():
                self._deleted_to[name] = max(self._deleted_to.get(name, -1), bound)
                _, before = self._ended.trimmed.get(name, (bound, 0))
                self._ended.trimmed[name] = (bound, before + n)
                self._ended.failed.pop(name, None)
            self._ended.failed.update(m.failed)
            self._failed.update(m.failed)
            if m.compacted is not None:
                self._ended.compacted = m.compacted

    def _take_ended(self) -> Maintained:
        ended, self._ended = self._ended, Maintained()
        return ended

    # --- targets' maintenance -----------------------------------------------------------

    def maintain(self, job: MaintainJob) -> TargetMaintained:
        """Compact and VACUUM `job`'s target as due (`apply.maintain`), in a session of its
        own on the worker the loop gave it (no apply of the target runs meanwhile)."""
        spark = fanout.target_session(self.spark, self.session_conf)
        try:
            with (
                labels.pool(spark, maintain_pool()),
                labels.job_name(spark, f"{labels.PREFIX}maintain {job.target}"),
            ):
                return maintain.maintain(spark, job, self.upkeep)
        except Exception as e:  # noqa: BLE001 - this target's maintenance only
            text = str(e).strip()
            why = (text.splitlines()[0] if text else type(e).__name__)[:300]
            return TargetMaintained(job.target, error=why)
        finally:
            fanout.done(spark)

    # --- sync points -------------------------------------------------------------------

    def record_sync_point(self, point: SyncPoint) -> None:
        """Append the sync point's rows (`sync_points.rows`: each target's Delta version at
        its TSO, read from the target's log after its commits) to the warehouse's
        `sync_points` table in one commit."""
        from ticdc_sync.read import sync_points
        from ticdc_sync.spark.runtime.conf import before_commit

        found = sync_points.rows(self.project, point)
        if not found:
            return
        before_commit("sync_point")
        with labels.pool(self.spark, labels.STAGE_POOL):
            (
                self.spark.createDataFrame(found, sync_points.SCHEMA)
                .write.format("delta")
                .mode("append")
                .save(sync_points.location(self.project))
            )


class _Once:
    """A value computed at its first call, then kept."""

    def __init__(self, make: Callable[[], object]) -> None:
        self._make = make
        self._done = False
        self._value: object = None

    def __call__(self):
        if not self._done:
            self._value = self._make()
            self._done = True
        return self._value


def maintain_pool() -> str:
    """Targets' maintenance shares the staging table's compaction pool: weighted like the
    applies, below staging."""
    return labels.COMPACT_POOL


def _round_next(p: StepRunner) -> bool:
    """Whether the next step of `p` is a round segment (its creation went well)."""
    return not p.done and bool(p.steps) and getattr(p.steps[0], "write", None) == WRITE_ROUND


def _outcome(m: Maintained) -> TrimOutcome:
    """What a trim reports of the maintenance that ended beside the polls."""
    deleted = {name: n for name, (_, n) in m.trimmed.items()}
    return TrimOutcome(deleted, failed=dict(m.failed), compacted=m.compacted)


def t_rows(tally, t: tuple[str, str]) -> int:
    return tally.tables.get(t, (0, 0))[0]


__all__ = ["SparkEngine", "UserError"]
