"""What the engine knows, as plain data: the input of `plan` besides the project files.

Filled from the warehouse itself (`warehouse.read_state`, no JVM): the staging table's tallies
and DDL events, the schema history, each target's marker, columns and table features. A run
fills the same structure after staging (with the tallies it just computed), so `plan` and
`run` decide from the same facts. Data only: no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ticdc_sync.codecs.dumpling_export import Export
from ticdc_sync.core.staged import SourceTally
from ticdc_sync.core.upstream import Key, Version
from ticdc_sync.core.window import DdlEvent, Marker

# CatalogRecord.state
REGISTERED = "registered"
UNREGISTERED = "unregistered"  # dropped from the catalog (the Delta table stays)
KEPT = "kept"  # left in the catalog by `catalog_on_drop: keep`


@dataclass(frozen=True, slots=True)
class CatalogRecord:
    """What a target's last catalog step did (the `catalog` state table): its qualified
    name, the location it named, and REGISTERED, UNREGISTERED or KEPT."""

    name: str
    location: str
    state: str


@dataclass(frozen=True, slots=True)
class TargetState:
    """One target's Delta table as the warehouse holds it."""

    name: str
    exists: bool
    marker: Marker = field(default_factory=Marker)
    columns: tuple[tuple[str, str], ...] = ()  # (name, Spark type) without _commit_ts
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()  # every table property
    description: str | None = None  # its Delta description (a table entry's `comment`)
    version: int | None = None  # newest Delta version
    data_bytes: int = 0  # its data files' bytes (table_features.rebuild_below)
    # Where it lives (`locations.find_target`: an earlier version's folder name is kept);
    # None: not looked up (`target_location` then).
    location: str | None = None
    # Its catalog entry as the last catalog step recorded it (`CatalogRecord`); None: none.
    catalog: CatalogRecord | None = None
    partition_by: tuple[str, ...] = ()  # its partition columns
    cluster_by: tuple[str, ...] = ()  # its clustering columns (liquid clustering)

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.reader_features) | set(self.writer_features)))

    def property(self, name: str) -> str | None:
        return dict(self.properties).get(name)


@dataclass(frozen=True, slots=True)
class SourceState:
    """One source's staged state."""

    name: str
    tally: SourceTally = field(default_factory=SourceTally)
    # False when the newest staging commit's own events are not in `tally` (a commit of an
    # earlier version, whose tallies end before it): its watermarks and tables are then not
    # counted yet.
    tally_complete: bool = True
    ddl_events: tuple[DdlEvent, ...] = ()
    recorded: dict[Key, list[Version]] = field(default_factory=dict)
    # Protocol column metadata and pk names of one row, for upstream tables with no schema.
    metadata: dict[Key, tuple[dict[str, str], tuple[str, ...]]] = field(default_factory=dict)
    # First open (not quarantined) bad record per (topic, partition).
    open_bad: dict[tuple[str, int], int] = field(default_factory=dict)
    # Each partition's progress (highest watermark, or approximate ts without commit_ts)
    # capped just before its first open bad record; a partition missing here counts with
    # its tally's progress.
    progress: dict[tuple[str, int], int | None] = field(default_factory=dict)
    # The source's `initial_load` export as found (`dumpling.discover`), or why it cannot
    # be read (only an error for targets that still need loading, `plan.loads`).
    export: Export | None = None
    export_error: str | None = None


@dataclass(frozen=True, slots=True)
class WarehouseState:
    """Everything `plan` reads from the warehouse. An empty state is a warehouse no run has
    written yet."""

    sources: dict[str, SourceState] = field(default_factory=dict)
    targets: dict[str, TargetState] = field(default_factory=dict)
    staging_version: int | None = None  # newest version of the staging table
    history_version: int | None = None  # newest version of the schema history table

    def source(self, name: str) -> SourceState:
        return self.sources.get(name) or SourceState(name)

    def target(self, name: str) -> TargetState:
        return self.targets.get(name) or TargetState(name, exists=False)
