"""The engine interface the run loop (`loop`) is written against, and the plain data it
exchanges: what a start read, a staging commit, an apply and a trim report back.

`spark/` implements `Engine`; tests implement it in memory. Nothing here decides anything
and nothing here does I/O: the loop decides, the engine carries out. No pyspark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ticdc_sync.core.model import Maintenance, Source
from ticdc_sync.core.staged import SourceTally
from ticdc_sync.core.upstream import Key, Version
from ticdc_sync.core.window import DdlEvent
from ticdc_sync.plan.model import SourcePlan, Step, TargetPlan
from ticdc_sync.warehouse.state import TargetState, WarehouseState

StopCheck = Callable[[], bool]


@dataclass(frozen=True, slots=True)
class TableSpan:
    """Row changes of one upstream table: how many, and their lowest and highest commit_ts."""

    rows: int
    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class Started:
    """What the warehouse holds when the run starts (`Engine.read_state`)."""

    state: WarehouseState
    # Per source, per upstream table (as staged: db, tbl): the span of every row change
    # staged so far (lo may be any lower bound; hi must be the highest staged commit_ts).
    # Tells the loop what is pending from before the run without reading a staged row. A
    # table with staged rows missing here counts as pending up to its source's highest
    # watermark: its target is applied once, perhaps for nothing.
    staged: Mapping[str, Mapping[tuple[str, str], TableSpan]] = field(default_factory=dict)
    # Per source, the TSO of its newest sync point recorded: the next one is due
    # `sync_points` past it, not at once (a run started again records none twice).
    synced: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """One source staged in one commit (`Engine.stage`), and its open bad records settled
    (quarantined where their table's policy says so)."""

    source: str
    staged: int  # events this commit staged (0: nothing new was read, no commit)
    tally: SourceTally  # the source's tally after it
    ddl: tuple[DdlEvent, ...] = ()  # the DDL events this commit staged
    tables: Mapping[tuple[str, str], TableSpan] = field(default_factory=dict)  # its row changes
    # After it, as `SourceState` holds them: the first open bad record per partition, and
    # each partition's progress capped just before it (partitions without one: absent).
    open_bad: Mapping[tuple[str, int], int] = field(default_factory=dict)
    progress: Mapping[tuple[str, int], int | None] = field(default_factory=dict)
    # Protocol column metadata and key names of upstream tables first staged in this commit
    # (`SourceState.metadata`), for tables no DDL or seed describes.
    metadata: Mapping[Key, tuple[dict[str, str], tuple[str, ...]]] = field(default_factory=dict)
    quarantined: int = 0  # undecodable records moved to the quarantine now
    errors: tuple[str, ...] = ()  # undecodable records that stop their partitions (policy fail)
    # The source could not be read now (say, Kafka is unreachable): nothing was staged, and
    # the loop reads it again later. Any other failure to stage raises.
    unavailable: str | None = None
    seconds: float = 0.0
    records: int | None = None  # Kafka records read (None: not counted, capture files)


@dataclass(frozen=True, slots=True)
class ApplyJob:
    """One target to apply: its plan, its source's plan, and how far it may go."""

    target: TargetPlan
    source: SourcePlan
    # Run only the steps that end at or before this commit_ts (a RENAME TABLE ahead copies
    # rows from a target that is not there yet); None: every step.
    limit: int | None = None
    # The targets of the same source due in the same round (this one among them), with
    # their limits: the engine may read their staged rows once for all of them. A hint
    # only: what this apply does is the same without it.
    peers: tuple[tuple[TargetPlan, int | None], ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    """What one apply did (`Engine.apply`). A target that failed or is blocked comes back
    here too, with where it stands."""

    target: str
    state: TargetState  # the target's table afterwards: exists, marker, columns, features
    # Every change with commit_ts at or below this is in the target: its last step's end,
    # above `state.marker.applied_ts` when the last row segment had no rows (no commit).
    reached: int
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    merges: int = 0
    quarantined: int = 0
    loaded: int | None = None  # rows of an initial load
    ddl: tuple[str, ...] = ()  # the DDL changes applied, described
    # Upstream schema versions it recorded in the schema history (of the target's source).
    recorded: tuple[tuple[Key, Version], ...] = ()
    blocked: str | None = None  # stopped at a DDL its policy blocks: why
    error: str | None = None  # this target failed: why (tried again later in --follow)
    interrupted: bool = False  # stopped between two steps because `should_stop` said so
    seconds: float = 0.0
    ran: tuple[Step, ...] = ()  # the plan's steps it ran to their end, in order


@dataclass(frozen=True, slots=True)
class Compacted:
    """How a compaction of the staging table ended: its seconds, and why it failed (None:
    it did not)."""

    seconds: float
    error: str | None = None

    def line(self) -> str:
        if self.error is not None:
            return f"  staging table not compacted ({self.error}); tried again later"
        return f"  staging table compacted beside the polls ({self.seconds:.1f}s)"


@dataclass(frozen=True, slots=True)
class TrimOutcome:
    """What the staging table's trims and compaction did beside the polls since the last
    trim reported (`Engine.trim`): a trim's DELETE runs after the commit that publishes its
    bound, so a trim reports the DELETEs that ended since the one before it."""

    deleted: Mapping[str, int] = field(default_factory=dict)  # per source trimmed: events deleted
    # Per source whose DELETE failed: why (its bound stays published; tried again later).
    failed: Mapping[str, str] = field(default_factory=dict)
    # A compaction of the staging table (beside the polls) ended since the last trim.
    compacted: Compacted | None = None

    def lines(self) -> list[str]:
        """What the run prints of it."""
        out = [
            f"  {name}: {n} applied event(s) older than the retention deleted"
            for name, n in sorted(self.deleted.items())
            if n
        ]
        out += [
            f"  {name}: staged events not trimmed ({why}); tried again later"
            for name, why in sorted(self.failed.items())
        ]
        if self.compacted is not None:
            out.append(self.compacted.line())
        return out


@dataclass(frozen=True, slots=True)
class MaintainJob:
    """One look at a target's health between its applies (`Engine.maintain`): compact and
    VACUUM it if due (`plan.maintenance.due`)."""

    target: str
    location: str
    maintenance: Maintenance
    # The TSO of the newest sync point of its source (None: none): its version is kept.
    held_tso: int | None = None


@dataclass(frozen=True, slots=True)
class TargetMaintained:
    """What a look at a target found and did (`Engine.maintain`)."""

    target: str
    files: int = 0  # data files of its newest version, after
    bytes: int = 0  # their bytes
    # Bytes of files on disk its newest version does not use: removed, awaiting VACUUM
    # (None: not known, a remote table).
    removed_bytes: int | None = None
    compacted: bool = False
    vacuumed: bool = False
    # Wall seconds of its last compaction and VACUUM (or its creation; None: not known).
    last_compacted: float | None = None
    last_vacuumed: float | None = None
    seconds: float = 0.0
    error: str | None = None  # why it failed (tried again at the next look)

    def lines(self) -> list[str]:
        """What the run prints of it."""
        if self.error is not None:
            return [f"  {self.target}: not maintained ({self.error}); tried again later"]
        done = [w for w, d in (("compacted", self.compacted), ("vacuumed", self.vacuumed)) if d]
        if not done:
            return []
        return [
            f"  {self.target}: {' and '.join(done)} ({self.files} file(s), "
            f"{self.bytes} bytes; {self.seconds:.1f}s)"
        ]


@dataclass(frozen=True, slots=True)
class SyncPoint:
    """Every target of one source at one TSO (`sync_points`), to be recorded in the
    warehouse: each target of `targets` holds exactly its upstream tables at `tso` in a
    committed Delta version; those `behind` (blocked or failed) stand at their own ts."""

    source: str
    tso: int
    targets: tuple[str, ...]
    behind: tuple[tuple[str, int], ...] = ()  # (target, where it stands)


class Engine(Protocol):
    """What the run loop asks of an engine. `stage`, `trim`, `record_sync_point` and
    `read_state` are called one at a time, on one thread (the stager's, after the start:
    the staging table has one writer); `apply` and `apply_round` on worker threads, beside
    them, never twice at once for one target."""

    def read_state(self) -> Started:
        """The warehouse as it is (at the start, and after an apply raised): cheap, it
        must not scan staged rows."""
        ...

    def stage(self, source: Source) -> StageOutcome:
        """Read the source's records after its staged positions, decode and stage them in
        one commit, and settle its open bad records. Raises `Fatal` for run-fatal errors."""
        ...

    def apply(self, job: ApplyJob, should_stop: StopCheck) -> ApplyOutcome:
        """Run the target's steps in order (create, table features, load, rows, DDL, stop),
        up to `job.limit`; ask `should_stop` before each step and stop there when it says
        so. A blocked or failed target is an outcome; raises only `Fatal`."""
        ...

    # Whether `apply_round` lands several targets' round segments together; if not, the
    # loop applies each target alone (`apply`).
    rounds: bool

    def apply_round(self, jobs: Sequence[ApplyJob], should_stop: StopCheck) -> list[ApplyOutcome]:
        """`apply` for several targets at once, each with one row segment left that the
        plan sends to a round (`WRITE_ROUND`), after at most its creation and table
        features: their outcomes, in `jobs`' order, as
        `apply` gives each. Raises only `Fatal`."""
        ...

    def trim(self, bounds: Mapping[str, int], *, final: bool = False) -> TrimOutcome:
        """Trim each source's staged row and watermark events at or below its bound
        (`retention.trim_bound`), and compact the staging table when it has many files,
        both beside the polls: what ended is reported by a later trim. `final` (the run
        ends after it): wait for them, and report them."""
        ...

    def maintain(self, job: MaintainJob) -> TargetMaintained:
        """Look at the target and compact and VACUUM it as `plan.maintenance.due` says, on an
        apply worker while no apply of the target runs; a failure is an outcome. (Optional:
        an engine without it maintains nothing.)"""
        ...

    def check_catalog(self, catalog: str) -> None:
        """Load `catalog` and reach its store (`plan.catalog.check_statement`), once per run
        before any target whose plan has a catalog step is applied; raises `UserError` with
        the catalog's own reason when it cannot. (Optional: an engine without it checks
        nothing.)"""
        ...

    def record_sync_point(self, point: SyncPoint) -> None:
        """Record `point` durably in the warehouse, with the Delta version of each target
        that holds it (called after those targets' commits)."""
        ...
