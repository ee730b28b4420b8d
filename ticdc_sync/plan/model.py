"""The plan as data: what a run will do, target by target, DDL by DDL, Delta commit by commit.

`build` makes it from the project and the warehouse state; `render` shows it as text and
JSON; the Spark executor carries out exactly these objects. Frozen dataclasses, no I/O, no
pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ticdc_sync.codecs.dumpling_export import DataFile
from ticdc_sync.core.model import (
    DEFAULT_REWRITE_BELOW,
    DEFAULT_TARGET_LAG_MS,
    BadMessagePolicy,
    DumplingOptions,
    Maintenance,
    Mode,
    Source,
    TableEntry,
    TableFeatures,
)
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.core.window import Marker
from ticdc_sync.ddl.changes import AddColumn, DeltaChange
from ticdc_sync.ddl.timeline import DdlGroup, Timeline
from ticdc_sync.plan.policy import Decision
from ticdc_sync.warehouse.state import KEPT, REGISTERED, UNREGISTERED, CatalogRecord

FORMAT_VERSION = 1

# Operations of a Delta part (`DeltaPart.op`); `sql` parts run their statement.
OP_SQL = "sql"
OP_CREATE = "create"  # create the target with `schema` (replacing a dropped one)
OP_BACKFILL = "backfill"  # the UPDATE of an added column; nothing when the table has no rows
# Rewrite the table in one commit, `column` cast to `new_type`, renamed to `new_name`, or
# left out (`drop_column`): a change without the table feature it would need, or a narrowing.
OP_REBUILD = "rebuild"
OP_COPY_FROM = "copy_from"  # rows of target `source_target` as of just before the DDL
# In an OP_COPY_FROM's `sql` (EXCHANGE PARTITION): where the engine puts the source target as
# of its version just before the DDL (no `sql`: every row is copied, as a RENAME TABLE does).
COPY_SOURCE = "{source}"
OP_RECORD = "record"  # a commit that only records the marker


@dataclass(frozen=True, slots=True)
class DeltaPart:
    """One Delta commit of a DDL on one target; each carries the target's marker with its
    index, so a run killed half-way resumes at the next part."""

    describe: str
    op: str
    sql: str | None = None
    tolerate: tuple[str, ...] = ()  # error fragments meaning "already done" (a resumed run)
    schema: TableSchema | None = None  # OP_CREATE
    properties: tuple[tuple[str, str], ...] = ()  # OP_CREATE: its TBLPROPERTIES
    partition_by: tuple[str, ...] = ()  # OP_CREATE: its partition columns
    cluster_by: tuple[str, ...] = ()  # OP_CREATE: its clustering columns
    column: str | None = None  # OP_REBUILD
    new_type: str | None = None  # OP_REBUILD
    new_name: str | None = None  # OP_REBUILD
    drop_column: bool = False  # OP_REBUILD
    source_target: str | None = None  # OP_COPY_FROM (its `sql`, if any, reads `COPY_SOURCE`)
    feature: str | None = None  # the table feature this part enables, if any
    feature_dropped: str | None = None  # the table feature this part removes, if any
    # An OP_SQL ADD COLUMNS: the column it adds (the engine may commit it without Spark:
    # `spark/runtime/metadata_commit.py`). OP_RECORD: `properties` are what its SQL sets.
    added: AddColumn | None = None


@dataclass(frozen=True, slots=True)
class ChangeStep:
    """One Delta change of a DDL, the target's decision about it, and its Delta parts."""

    change: DeltaChange
    decision: Decision
    parts: tuple[DeltaPart, ...] = ()


# TargetDdl.status
READY = "ready"  # resolved, decided, will be applied
BLOCKED = "blocked"  # a change is blocked by policy, or the DDL could not be replayed
WAITING = "waiting"  # beyond the resolved TSO: a later run applies it
HELD = "held"  # behind a blocked DDL of the same target
DONE = "done"  # already applied (shown only while a multi-part DDL is half done)


@dataclass(frozen=True, slots=True)
class TargetDdl:
    """One DDL commit_ts as it concerns one target."""

    commit_ts: int
    group: DdlGroup
    upstreams: tuple[str, ...]  # the upstream tables of this target it touches
    steps: tuple[ChangeStep, ...]
    parts: tuple[DeltaPart, ...]  # every Delta commit, in order (never empty)
    status: str
    reason: str | None = None  # why blocked / held / waiting
    setting: str | None = None  # what lets a blocked DDL through
    rename_from: str | None = None  # target whose rows move into this one
    renamed_to: str | None = None  # where this target's upstream table went
    additive: bool = False  # may move ahead of the rows before it (window.fuse_additive)
    parts_done: int = 0  # parts committed already (a resumed DDL)
    features_added: tuple[str, ...] = ()  # table features the target gains with this DDL

    @property
    def sql(self) -> str:
        return self.group.sql

    @property
    def where(self) -> str:
        e = self.group.events[0]
        return e.where()


@dataclass(frozen=True, slots=True)
class LoadTable:
    """One upstream table of an initial load: its schema at the snapshot and its files."""

    db: str
    table: str
    schema: TableSchema
    schema_file: str
    files: tuple[DataFile, ...]


@dataclass(frozen=True, slots=True)
class Load:
    """The initial load of one target from a Dumpling export, before anything else: the
    export's rows as of `snapshot_ts` in one Delta commit whose marker says the target is at
    that TSO, so the changefeed's events at or below it are replays (`marker`)."""

    export: str  # as the project names it (shown in plans)
    location: str  # the export's folder; never rendered
    snapshot_ts: int
    options: DumplingOptions
    tables: tuple[LoadTable, ...]
    reload: bool = False  # `--reload`: replaces what the target holds (and its columns)

    @property
    def files(self) -> tuple[DataFile, ...]:
        return tuple(f for t in self.tables for f in t.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def marker(self) -> Marker:
        """The target's marker once loaded: every row change and DDL up to the snapshot is
        in the table (`Marker.ddl_done` holds for staged DDL at or below it)."""
        return snapshot_marker(self.snapshot_ts)


def snapshot_marker(snapshot_ts: int) -> Marker:
    """A target as of an export's snapshot: the row changes and DDL at or below it are
    replays (`Marker.ddl_done` holds for them)."""
    return Marker(snapshot_ts, snapshot_ts, 0, 1)


@dataclass(frozen=True, slots=True)
class Staged:
    """One upstream table's row changes staged of all time, from the tallies: how many, and
    the lowest and highest commit_ts among them (None: a tally of an earlier version, which
    did not keep them). What `plan.write_path` estimates a segment's size from."""

    db: str
    table: str
    rows: int
    lo: int | None = None
    hi: int | None = None


# A target's column after the next run (`plan.columns`): mark ("+" added, "-" dropped, "~"
# renamed or retyped, " " as it is), name, MySQL type, Delta type.
NextColumn = tuple[str, str, str, str]


# CatalogEntry.action
CATALOG_REGISTER = "register"  # an external Delta table at the target's location
CATALOG_DROP = "drop"  # the upstream table is gone: its entry is dropped (the data stays)
CATALOG_KEEP = "keep"  # gone, and `catalog_on_drop: keep` leaves the entry as it is
CATALOG_NONE = "none"  # the target does not exist after the run: nothing to name yet


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A target's name in the output's catalog and what the run does to it (`plan.catalog`):
    `recorded` is what the last catalog step recorded (None: none yet)."""

    catalog: str
    schema: str
    table: str
    location: str  # never rendered as is (`<warehouse>`)
    comment: str
    action: str
    recorded: CatalogRecord | None = None
    gone: bool = False  # the target's upstream table was dropped or renamed away already

    @property
    def name(self) -> str:
        """`catalog.schema.table`, as a user types it (unquoted)."""
        return f"{self.catalog}.{self.schema}.{self.table}"

    @property
    def short_name(self) -> str:
        """The name to query it by: `schema.table` in the session catalog."""
        if self.catalog == "spark_catalog":
            return f"{self.schema}.{self.table}"
        return self.name

    def done(self) -> CatalogRecord:
        """What the catalog step records once it has carried the entry out."""
        state = {CATALOG_REGISTER: REGISTERED, CATALOG_DROP: UNREGISTERED}.get(self.action, KEPT)
        return CatalogRecord(self.name, self.location, state)


@dataclass(frozen=True, slots=True)
class TargetPlan:
    """One target: where it stands and what the next run does to it."""

    name: str
    source: str
    entry: TableEntry
    upstreams: tuple[tuple[str, str], ...]
    location: str
    exists: bool
    marker: Marker
    keys: tuple[str, ...]
    keys_from: str
    schema: TableSchema | None  # upstream schema as of the target's applied TSO
    create: TableSchema | None  # created from this schema before anything else
    create_from: str | None  # "seed", "history", "inferred", "export" (with `create`)
    columns: tuple[tuple[str, str], ...]  # the target's Delta columns now (without _commit_ts)
    features: tuple[str, ...]  # its Delta table features now (as created, for a new target)
    ddl: tuple[TargetDdl, ...]
    stop_ts: int | None  # rows apply up to this commit_ts (None: nothing resolved)
    blocked: str | None = None  # why the target stops before `resolved`
    notes: tuple[str, ...] = ()
    settings: TableFeatures = field(default_factory=TableFeatures)  # `table_features`
    # Commits that bring an existing target's features to `settings` (DROP FEATURE, or
    # enabling deletion vectors again), before anything else; each keeps the marker.
    feature_parts: tuple[DeltaPart, ...] = ()
    load: Load | None = None  # loaded from a Dumpling export first
    # `target_lag` in milliseconds, and where it is set: the entry's file:line,
    # "ticdc_sync.yml defaults" or "built-in default".
    lag_ms: int = DEFAULT_TARGET_LAG_MS
    lag_from: str = "built-in default"
    # A target not created yet whose upstream tables did not exist at its source's export
    # snapshot (dropped or renamed away at or before it): it starts at that snapshot, as a
    # load would, with nothing to load.
    from_snapshot: int | None = None
    # Why the target cannot start at all (its load is impossible): nothing is created, loaded
    # or applied, and the run fails it (`blocked` says the same).
    refused: str | None = None
    # What happens to a row change whose value does not fit (`on_bad_message`, decided
    # once from the entry and the project defaults).
    on_bad_message: BadMessagePolicy = BadMessagePolicy.FAIL
    # What the run does to the target, in order (`plan.steps.target_steps`): the engine runs
    # exactly these.
    steps: tuple[Step, ...] = ()
    next_columns: tuple[NextColumn, ...] = ()  # its columns after the run (`plan.columns`)
    # What the target keeps (`mode`), where that is set, and the columns the mode adds
    # after `_commit_ts` (name, Delta type; `sqlgen_history`).
    mode: Mode = Mode.MIRROR
    mode_from: str = "built-in default"
    mode_columns: tuple[tuple[str, str], ...] = ()
    # Its data files' bytes when planned (an export's, when it is loaded first), its table
    # features once `feature_parts` have run (what its first step finds), and
    # `rewrite_below` with where it is set: what each row segment's `write` is decided by
    # (`plan.write_path`).
    data_bytes: int = 0
    features_then: tuple[str, ...] = ()
    rewrite_below: int = DEFAULT_REWRITE_BELOW
    rewrite_from: str = "built-in default"
    # Its upstream tables' row changes staged so far (`Staged`), in `upstreams` order: what
    # sends a segment of many changes past the round (`plan.write_path`).
    staged: tuple[Staged, ...] = ()
    # What the run that holds the lease does to keep it healthy, and how far back it can be
    # read (`maintenance`, entry over defaults; `plan.maintenance` decides when).
    maintenance: Maintenance = field(default_factory=Maintenance)
    # Its name in the output's catalog and what the run's catalog step does (None: no
    # catalog, or nothing to name yet).
    catalog: CatalogEntry | None = None
    # Its layout (`plan.layout`): as the table has it, or as it is created.
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    # The step that changes an existing target's layout to its entry's, if it differs.
    relayout: Layout | None = None
    # The step that brings an existing target's properties and description to its entry's.
    reprops: TableProperties | None = None

    @property
    def catalog_pending(self) -> bool:
        """Its catalog step has not recorded its entry yet (a missing registration)."""
        c = self.catalog
        return c is not None and c.action != CATALOG_NONE and c.recorded != c.done()

    @property
    def to_create(self) -> bool:
        return not self.exists

    @property
    def absent(self) -> bool:
        """Not created, and this plan does not create it: its tables were gone by the
        export's snapshot (`from_snapshot`) and no DDL after it brings one back (yet)."""
        return (
            not self.exists
            and self.from_snapshot is not None
            and self.create is None
            and not self.pending
        )

    @property
    def start(self) -> Marker:
        """The marker the row and DDL steps start from: after the load, if there is one (or
        at the snapshot its tables were gone by)."""
        if self.load is not None:
            return self.load.marker
        if self.from_snapshot is not None and not self.exists:
            return snapshot_marker(self.from_snapshot)
        return self.marker

    @property
    def pending(self) -> tuple[TargetDdl, ...]:
        return tuple(d for d in self.ddl if d.status != DONE)


@dataclass(frozen=True, slots=True)
class SourcePlan:
    source: Source
    resolved_ts: int | None  # None: nothing staged; -1: not every partition has a watermark
    partitions: int
    skipped: tuple[tuple[str, str, int], ...]  # unrouted tables with their row counts
    timeline: Timeline = field(repr=False, compare=False, default_factory=Timeline)
    notes: tuple[str, ...] = ()
    open_bad: bool = False  # an undecodable record is not quarantined yet


@dataclass(frozen=True, slots=True)
class Plan:
    project: str
    target: str  # the profile target (dev, prod)
    warehouse: str  # the real location; never rendered (`<warehouse>` stands for it)
    output: dict[str, Any]
    defaults: dict[str, Any]
    routes: tuple[dict[str, Any], ...]
    overrides: tuple[dict[str, Any], ...]
    sources: tuple[SourcePlan, ...]
    targets: tuple[TargetPlan, ...]
    warnings: tuple[str, ...]
    project_digest: str  # SHA-256 of the project files the plan was made from

    def target_plan(self, name: str) -> TargetPlan | None:
        return next((t for t in self.targets if t.name == name), None)

    def source_plan(self, name: str) -> SourcePlan | None:
        return next((s for s in self.sources if s.source.name == name), None)

    @property
    def has_pending(self) -> bool:
        """Changes a run would make: targets to create or load, DDL to apply (or blocked),
        table features to change."""
        return any(
            (t.to_create and not t.absent)
            or t.pending
            or t.feature_parts
            or t.relayout is not None
            or t.reprops is not None
            or t.load is not None
            or t.catalog_pending
            for t in self.targets
        )


# --------------------------------------------------------------------------- a target's steps
# What the run does to a target, in order (`plan.steps.target_steps` builds them).

Properties = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Create:
    """Create the target from a known schema (seed, history, inferred), with `properties`
    (`table_features.create_properties`) as its TBLPROPERTIES."""

    schema: TableSchema
    properties: Properties = ()
    partition_by: tuple[str, ...] = ()  # PARTITIONED BY (`plan.layout`)
    cluster_by: tuple[str, ...] = ()  # CLUSTER BY


@dataclass(frozen=True, slots=True)
class Layout:
    """Bring an existing target to its entry's layout (`plan.layout`): clustering changes
    in place (ALTER TABLE ... CLUSTER BY, NONE for none); a new partitioning (`rebuild`)
    rewrites its rows in one commit with the new partition columns (then clusters, if
    asked). `was`: the layout it had, as `plan` shows it."""

    partition_by: tuple[str, ...]
    cluster_by: tuple[str, ...]
    rebuild: bool
    was: str


@dataclass(frozen=True, slots=True)
class TableProperties:
    """Bring an existing target's properties and description to its table entry's
    (`plan.properties`): `unset` the keys the entry set before and names no more, `set` the
    ones it adds or changes (with the record of the keys it names), `comment` its
    description (None: as it is). `sql`: the statements, one commit each, in order."""

    set: Properties
    unset: tuple[str, ...]
    comment: str | None
    sql: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Features:
    """Bring an existing target's table features to its `table_features` setting (DROP
    FEATURE, or enable deletion vectors again): commits that keep the marker as it is."""

    parts: tuple[DeltaPart, ...]


@dataclass(frozen=True)
class LoadRows:
    """Load the target from a Dumpling export (`Load`): one commit, at its snapshot TSO."""

    load: Load


@dataclass(frozen=True, slots=True)
class SchemaSpan:
    """Rows of one upstream table with lo < commit_ts <= hi are typed with `schema`; `fill`
    gives the SQL literal (lowercased name -> SQL) of each target column it lacks that a
    later schema of the segment adds (that ADD's backfill; any other lacking column is
    NULL)."""

    lo: int
    hi: int
    schema: TableSchema
    fill: Properties = ()


@dataclass(frozen=True, slots=True)
class RowTable:
    """One upstream table's rows in a segment: the schema spans they are typed with."""

    db: str
    table: str
    spans: tuple[SchemaSpan, ...]

    @property
    def upstream(self) -> str:
        return f"{self.db}.{self.table}"


# How a row segment lands (`Rows.write`, decided by `plan.write_path`).
WRITE_MERGE = "merge"  # one MERGE (or INSERT) through Delta's own writer
# The table's rows and the segment's changes merged in one Spark write of new files, then
# one commit that removes the old files and adds the new ones (`spark.apply.rewrite`).
WRITE_REWRITE = "rewrite"
# As a rewrite, but the new files of every target due in the same round come from ONE Spark
# job for all of them (typed in one query, merged per target in Arrow), then one commit per
# target (`spark.apply.rounds`): a target's fixed cost is its commit, not a query of its own.
WRITE_ROUND = "round"


@dataclass(frozen=True, slots=True)
class Rows:
    """Apply the row changes with lo < commit_ts <= hi in one commit on `keys`, each upstream
    table's rows typed by its `tables` entry (a table without a schema in the segment has no
    entry: no rows to type), by `write` (WRITE_MERGE, WRITE_REWRITE or WRITE_ROUND; `write_why` says
    why). `error`: the segment cannot be merged (no keys, shards with different keys, a
    key that is not a column); running it fails the target with it."""

    lo: int
    hi: int
    keys: tuple[str, ...] = ()
    keys_from: str = "none"
    tables: tuple[RowTable, ...] = ()
    error: str | None = None
    write: str = WRITE_MERGE
    write_why: str = ""


@dataclass(frozen=True, slots=True)
class Ddl:
    """Apply one DDL. `ahead`: moved before the rows that precede it (`fuse_additive`); its
    commits then keep the marker's applied_ts, since those rows are not in the table yet."""

    ddl: TargetDdl
    ahead: bool = False

    @property
    def commit_ts(self) -> int:
        return self.ddl.commit_ts


@dataclass(frozen=True, slots=True)
class Stop:
    """The target is blocked at this DDL."""

    ddl: TargetDdl


@dataclass(frozen=True, slots=True)
class Halt:
    """The target cannot start at all (`TargetPlan.refused`): nothing is created, loaded
    or applied, and the run fails it with `reason`."""

    reason: str


@dataclass(frozen=True, slots=True)
class Catalog:
    """Bring the target's catalog entry to `entry` (register, drop or keep it), after the
    steps before it (`at`: the commit_ts they reach; -1 before anything else)."""

    entry: CatalogEntry
    at: int = -1


Step = Create | Features | Layout | TableProperties | LoadRows | Rows | Ddl | Stop | Halt | Catalog


# Statements of an OP_SQL part that change the table's metadata only (ADD COLUMNS, SET
# TBLPROPERTIES, a type widening...): they read no rows. Not DROP FEATURE, which rewrites
# files, nor ADD CONSTRAINT, which checks every row.
_READS_ROWS = ("DROP FEATURE", "ADD CONSTRAINT", "REORG", "OPTIMIZE")


def without_rows(step: Step) -> bool:
    """Whether `step` is carried out without reading any row: a DDL whose every part
    creates the table (a CREATE TABLE from the stream) or changes its metadata only (ADD
    COLUMN, ...), or a row segment of no table (before its table is created). Such steps
    may run ahead of a round segment (`run.loop_applies.in_round`)."""
    if isinstance(step, Rows):
        return not step.tables and step.error is None
    if not isinstance(step, Ddl) or step.ddl.rename_from:
        return False
    for part in step.ddl.parts:
        if part.op in (OP_CREATE, OP_RECORD):
            continue
        sql = (part.sql or "").upper()
        if part.op != OP_SQL or not sql.startswith("ALTER TABLE"):
            return False
        if any(word in sql for word in _READS_ROWS):
            return False
    return True


def end_ts(step: Step) -> int:
    """The commit_ts a step brings its target to (-1 for a creation)."""
    if isinstance(step, Rows):
        return step.hi
    if isinstance(step, LoadRows):
        return step.load.snapshot_ts
    if isinstance(step, (Ddl, Stop)):
        return step.ddl.commit_ts
    if isinstance(step, Catalog):
        return step.at
    return -1  # Create, Features, Layout, TableProperties, Halt: before anything else
