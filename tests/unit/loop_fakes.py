"""An in-memory `Engine` and re-planner for the run loop's tests, a fake clock that is also
the loop's waiter, and a pool that runs applies inline.

The engine keeps each target's truth (its marker) and checks what the loop must never
do: apply one target twice at once, or copy a RENAME's rows before their target has
reached it. The re-planner makes real `TargetPlan`s from a few facts per target.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from ticdc_sync.core.model import Protocol, Source, TableEntry
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.ddl.timeline import DdlGroup
from ticdc_sync.plan.model import (
    BLOCKED,
    OP_COPY_FROM,
    READY,
    WRITE_ROUND,
    Create,
    DeltaPart,
    Plan,
    Rows,
    SourcePlan,
    TargetDdl,
    TargetPlan,
)
from ticdc_sync.run.engine import (
    ApplyJob,
    ApplyOutcome,
    StageOutcome,
    Started,
    SyncPoint,
    TableSpan,
    TrimOutcome,
)
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

T0 = 1_700_000_000_000  # wall time of the tests' upstream, ms


def ts(ms: float) -> int:
    """The TSO at wall time `ms` (codec facts 1.1)."""
    return int(ms) << 18


def source(name: str = "s") -> Source:
    return Source(name, Protocol.CANAL_JSON, ("t",))


class Clock:
    """Wall time that moves only when the loop sleeps; also the loop's waiter.

    A timed sleep moves the time only once no apply is running (`busy`) except those
    parked on purpose by a test, so what could happen before it has happened: time moves
    as in a discrete-event simulation. A sleep for an apply to end waits for real, with a
    safety limit (a loop that never wakes fails the test instead of hanging it)."""

    def __init__(self, start_ms: int = T0 + 1_000) -> None:
        self.t = start_ms / 1000
        self._event = threading.Event()
        self.sleeps: list[float] = []
        self.busy: Callable[[], bool] = lambda: False

    def __call__(self) -> float:
        return self.t

    @property
    def ms(self) -> int:
        return int(round(self.t * 1000))

    def wake(self) -> None:
        self._event.set()

    def wait(self, seconds: float | None) -> None:
        give_up = time.monotonic() + 10
        while True:
            if self._event.is_set():
                self._event.clear()
                return
            if seconds is not None and not self.busy():
                self.sleeps.append(seconds)
                self.t += seconds
                return
            assert time.monotonic() < give_up, "the loop waited for an apply that never ended"
            self._event.wait(0.005)


class Inline(Executor):
    """Runs each apply at once, on the loop's thread: deterministic decisions."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the loop like a thread would
            f.set_exception(e)
        return f

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


class Threads(ThreadPoolExecutor):
    """Worker threads that tell the clock an apply is on its way from its submission on
    (a thread may start it after the loop has gone on)."""

    def __init__(self, workers: int, fake: Fake) -> None:
        super().__init__(workers, thread_name_prefix="apply")
        self.fake = fake

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        with self.fake.lock:
            self.fake.inflight += 1
        f = super().submit(fn, *args, **kwargs)
        f.add_done_callback(lambda _f: self.fake.landed())
        return f


@dataclass
class Spec:
    """One target of the fake project: one upstream table `app.<name>`."""

    name: str
    lag_ms: int = 60_000
    source: str = "s"
    block_at: int | None = None  # wall ms of a DDL its policy blocks
    rename_from: tuple[str, int] | None = None  # (target, wall ms) of a RENAME into it
    renamed_at: int | None = None  # wall ms of a RENAME that moves its table away
    create: bool = False  # created from a known schema before anything else
    round: bool = False  # its rows are one round segment (`WRITE_ROUND`)


@dataclass
class Call:
    name: str
    limit: int | None
    stages: int  # stage calls made before it
    at_ms: int


Batch = tuple[int, dict[str, list[int]]]  # (resolved wall ms, table -> commit wall ms)


@dataclass
class Fake:
    """The engine and the re-planner of one test."""

    specs: list[Spec]
    batches: dict[str, list[Batch]]  # per source: one batch per stage call
    clock: Clock
    markers: dict[str, int] = field(default_factory=dict)  # wall ms each target starts at
    hooks: dict[str, Callable] = field(default_factory=dict)  # target -> before its apply
    # Before each stage: (the call's number from 1, the source) -> an outcome instead.
    stage_hook: Callable[[int, str], StageOutcome | None] | None = None
    # Staged by an earlier run and not applied: (resolved wall ms, table -> commit wall ms).
    before: Batch | None = None
    spans_at_start: bool = True  # the engine tells what `before` holds, without a scan
    rounds: bool = False  # lands round segments together (`apply_round`)

    def __post_init__(self) -> None:
        self.by_name = {s.name: s for s in self.specs}
        self.lock = threading.Lock()
        self.active: Counter[str] = Counter()
        self.max_active = 0
        self.overlaps: list[str] = []
        self.bad_copies: list[str] = []
        self.calls: list[Call] = []
        self.round_calls: list[tuple[str, ...]] = []
        self.stage_calls = 0
        self.staged_n: Counter[str] = Counter()
        self.tallies: dict[str, SourceTally] = {}
        self.rows: dict[str, list[int]] = {s.name: [] for s in self.specs}  # staged commit_ts
        self.trims: list[dict[str, int]] = []
        self.sync_points: list[tuple[SyncPoint, int]] = []
        self.read_states = 0
        self.parked = 0
        self.inflight = 0  # submitted to `Threads` and not ended
        self.writing: list[str] = []  # stage, trim, ... running now
        self.write_overlaps: list[str] = []
        self.clock.busy = lambda: max(self.inflight, sum(self.active.values())) > self.parked

        self.targets: dict[str, TargetState] = {
            name: TargetState(name, exists=True, marker=Marker(ts(ms), -1, -1, 0))
            for name, ms in self.markers.items()
        }
        for s in self.specs:
            if s.name not in self.targets and not s.create:
                self.targets[s.name] = TargetState(s.name, exists=True, marker=Marker(-1))
        self.at_start: dict = {}
        if self.before is not None:
            self.staged_n["s"] = -1
            outcome = self.stage(source("s"))  # what an earlier run staged
            self.stage_calls = 0
            if self.spans_at_start:
                self.at_start = {"s": dict(outcome.tables)}

    def landed(self) -> None:
        with self.lock:
            self.inflight -= 1

    # --- Engine ---------------------------------------------------------------------

    @contextmanager
    def _writer(self, what: str) -> Iterator[None]:
        """What the Spark engine needs of the loop: one of stage, trim, record_sync_point
        and read_state at a time (they share the staging table and the run's session)."""
        with self.lock:
            self.writing.append(what)
            if len(self.writing) > 1:
                self.write_overlaps.append("+".join(self.writing))
        try:
            yield
        finally:
            with self.lock:
                self.writing.remove(what)

    def read_state(self) -> Started:
        with self._writer("read_state"):
            return self._read_state()

    def _read_state(self) -> Started:
        self.read_states += 1
        sources = {n: SourceState(n, tally=t.copy()) for n, t in self.tallies.items()}
        return Started(WarehouseState(sources=sources, targets=dict(self.targets)), self.at_start)

    def park(self, until: Callable[[], bool], limit: float = 10) -> bool:
        """Hold an apply until `until()` (checked often), at most `limit` seconds."""
        with self.lock:
            self.parked += 1
        try:
            give_up = time.monotonic() + limit
            while not until():
                if time.monotonic() > give_up:
                    return False
                time.sleep(0.002)
            return True
        finally:
            with self.lock:
                self.parked -= 1

    def stage(self, src: Source) -> StageOutcome:
        with self._writer("stage"):
            return self._stage(src)

    def _stage(self, src: Source) -> StageOutcome:
        self.stage_calls += 1
        if self.stage_hook is not None:
            got = self.stage_hook(self.stage_calls, src.name)
            if got is not None:
                return got
        i = self.staged_n[src.name]
        self.staged_n[src.name] += 1
        batches = self.batches.get(src.name, [])
        if i < 0 and self.before is not None:
            resolved, rows = self.before
        elif i < len(batches):
            resolved, rows = batches[i]
        else:
            resolved, rows = (batches[-1][0] if batches else T0), {}
        old = self.tallies.get(src.name, SourceTally())
        n = sum(len(v) for v in rows.values())
        last = old.partitions.get(("t", 0))
        tally = SourceTally(
            {("t", 0): PartitionTally("t", 0, (last.last_offset if last else -1) + n + 1)},
            dict(old.tables),
        )
        tally.partitions[("t", 0)] = PartitionTally(
            "t", 0, tally.partitions[("t", 0)].last_offset, watermark=ts(resolved)
        )
        for table, cs in rows.items():
            r, d = tally.tables.get(("app", table), (0, 0))
            tally.tables[("app", table)] = (r + len(cs), d)
            self.rows[table] += [ts(c) for c in cs]
        self.tallies[src.name] = tally
        return StageOutcome(
            source=src.name,
            staged=n,
            tally=tally.copy(),
            tables={
                ("app", t): TableSpan(len(cs), ts(min(cs)), ts(max(cs)))
                for t, cs in rows.items()
                if cs
            },
        )

    def apply(self, job: ApplyJob, should_stop) -> ApplyOutcome:
        t = job.target
        with self.lock:
            self.active[t.name] += 1
            if self.active[t.name] > 1:
                self.overlaps.append(t.name)
            self.max_active = max(self.max_active, sum(self.active.values()))
            self.calls.append(Call(t.name, job.limit, self.stage_calls, self.clock.ms))
        try:
            hook = self.hooks.get(t.name)
            if hook is not None:
                got = hook(job, should_stop)
                if got is not None:
                    return got
            return self._apply(job)
        finally:
            with self.lock:
                self.active[t.name] -= 1

    def apply_round(self, jobs, should_stop) -> list[ApplyOutcome]:
        assert self.rounds, "a round given to an engine that does not take rounds"
        self.round_calls.append(tuple(job.target.name for job in jobs))
        return [self.apply(job, should_stop) for job in jobs]

    def _apply(self, job: ApplyJob) -> ApplyOutcome:
        t = job.target
        old = self.targets.get(t.name, TargetState(t.name, exists=False))
        upto = t.stop_ts if job.limit is None or t.stop_ts is None else min(t.stop_ts, job.limit)
        reached = old.marker.applied_ts if upto is None else max(upto, old.marker.applied_ts)
        rows = [c for c in self.rows[t.name] if old.marker.applied_ts < c <= reached]
        ddl_ts = old.marker.ddl_ts
        done = []
        for d in t.ddl:
            if d.status != READY or d.commit_ts > reached:
                continue
            if d.rename_from is not None:
                # What the Spark engine checks before it copies (ddl_commit._check_caught_up).
                m = self.targets[d.rename_from].marker
                if m.applied_ts < d.commit_ts - 1 and m.ddl_ts < d.commit_ts:
                    self.bad_copies.append(f"{t.name} copied {d.rename_from} at {m}")
            ddl_ts = max(ddl_ts, d.commit_ts)
            done.append(d.sql)
        applied = max(rows) if rows else old.marker.applied_ts
        if done:
            applied = max(applied, ddl_ts)
        # The table features the plan says it has once created, and those its
        # table_features setting adds or drops.
        features = set(old.features if old.exists else t.features)
        features |= {p.feature for p in t.feature_parts if p.feature}
        features -= {p.feature_dropped for p in t.feature_parts if p.feature_dropped}
        state = TargetState(
            t.name,
            exists=True,
            marker=Marker(applied, ddl_ts, 0, 1),
            writer_features=tuple(sorted(features)),
        )
        self.targets[t.name] = state
        blocked = t.blocked if job.limit is None else None
        return ApplyOutcome(
            target=t.name,
            state=state,
            reached=reached,
            inserted=len(rows),
            merges=1 if rows else 0,
            ddl=tuple(done),
            blocked=blocked,
        )

    def trim(self, bounds, *, final: bool = False) -> TrimOutcome:
        with self._writer("trim"):
            self.trims.append(dict(bounds))
        return TrimOutcome(deleted={s: 1 for s in bounds})

    def record_sync_point(self, point: SyncPoint) -> None:
        # What the Spark engine records: each target at the point holds it in a commit.
        for name in point.targets:
            assert self.targets[name].marker.applied_ts <= point.tso, (name, point)
            staged = [c for c in self.rows[name] if self.at(name) < c <= point.tso]
            assert not staged, f"{name} has changes up to the sync point it has not applied"
        with self._writer("record_sync_point"):
            self.sync_points.append((point, self.clock.ms))

    # --- re-planner -------------------------------------------------------------------

    def replan(self, state: WarehouseState) -> Plan:
        sources = sorted({s.source for s in self.specs} | set(self.batches))
        sps = []
        resolved: dict[str, int | None] = {}
        for name in sources:
            parts = state.source(name).tally.partitions
            marks = [p.watermark for p in parts.values()]
            resolved[name] = min(m for m in marks if m is not None) if marks else None
            sps.append(SourcePlan(source(name), resolved[name], len(parts), ()))
        targets = [self._target(s, state, resolved[s.source]) for s in self.specs]
        return Plan(
            project="p",
            target="dev",
            warehouse="mem",
            output={},
            defaults={},
            routes=(),
            overrides=(),
            sources=tuple(sps),
            targets=tuple(sorted(targets, key=lambda t: t.name)),
            warnings=(),
            project_digest="0" * 64,
        )

    def _target(self, s: Spec, state: WarehouseState, resolved: int | None) -> TargetPlan:
        st = state.target(s.name)
        marker = st.marker
        stop = resolved
        ddl: list[TargetDdl] = []
        blocked = None
        if s.rename_from is not None and resolved is not None:
            c = ts(s.rename_from[1])
            if marker.ddl_ts < c <= resolved:
                ddl.append(_ddl(s.name, c, READY, rename_from=s.rename_from[0]))
        if s.renamed_at is not None and resolved is not None:
            c = ts(s.renamed_at)
            if marker.ddl_ts < c <= resolved:
                ddl.append(_ddl(s.name, c, READY))
        if s.block_at is not None and resolved is not None and ts(s.block_at) <= resolved:
            c = ts(s.block_at)
            ddl.append(_ddl(s.name, c, BLOCKED))
            stop = min(resolved, c - 1)
            blocked = f"target {s.name}: blocked at commit_ts {c} by DDL `DROP COLUMN x`"
        steps: tuple = ()
        if s.round and stop is not None and stop > marker.applied_ts and not ddl:
            steps = (Rows(marker.applied_ts, stop, ("id",), write=WRITE_ROUND),)
        create = None
        if s.create and not st.exists:
            create = TableSchema("app", s.name, (Column("id", "int"),), ("id",))
            if steps:
                steps = (Create(create), *steps)
        return TargetPlan(
            name=s.name,
            source=s.source,
            entry=TableEntry(upstream=f"app.{s.name}", name=s.name),
            upstreams=(("app", s.name),),
            location=f"mem/{s.name}",
            exists=st.exists,
            marker=marker,
            keys=("id",),
            keys_from="primary key",
            schema=None,
            create=create,
            create_from="seed" if create else None,
            columns=(),
            features=(),
            ddl=tuple(sorted(ddl, key=lambda d: d.commit_ts)),
            stop_ts=stop,
            blocked=blocked,
            lag_ms=s.lag_ms,
            lag_from="test",
            steps=steps,
        )

    # --- facts for assertions -----------------------------------------------------------

    def names(self) -> list[str]:
        return [c.name for c in self.calls]

    def at(self, name: str) -> int:
        return self.targets[name].marker.applied_ts


def _ddl(name: str, c: int, status: str, rename_from: str | None = None) -> TargetDdl:
    sql = f"RENAME TABLE app.{rename_from} TO app.{name}" if rename_from else "DROP COLUMN x"
    event = DdlEvent("app", name, c, sql)
    parts = (
        (DeltaPart("copy rows", OP_COPY_FROM, source_target=rename_from),)
        if rename_from
        else (DeltaPart("drop", "sql", sql="ALTER TABLE t DROP COLUMN x"),)
    )
    return TargetDdl(
        commit_ts=c,
        group=DdlGroup(c, (event,), ()),
        upstreams=(f"app.{name}",),
        steps=(),
        parts=parts,
        status=status,
        reason="blocked by policy" if status == BLOCKED else None,
        rename_from=rename_from,
    )
