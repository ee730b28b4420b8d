"""The declared project as frozen dataclasses: what the YAML files say, checked and typed.

`project` builds these; `plan` and the Spark runner read them. Enum values are the
words users write in YAML. No I/O and no pyspark here.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ticdc_sync.core.upstream import TableSchema

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same behaviour for what this package uses (str() and format()
    # give the value; members compare equal to their value).
    from enum import Enum

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class Protocol(StrEnum):
    CANAL_JSON = "canal-json"
    DEBEZIUM = "debezium"
    OPEN_PROTOCOL = "open-protocol"


class Action(StrEnum):
    """What to do with one kind of DDL. `rebuild` is only valid for `narrow_column`."""

    APPLY = "apply"
    SKIP = "skip"
    FAIL = "fail"
    REBUILD = "rebuild"


class DdlKind(StrEnum):
    """The DDL kinds a policy can be set for (YAML keys under `ddl:`)."""

    CREATE_TABLE = "create_table"
    ADD_COLUMN = "add_column"
    DROP_COLUMN = "drop_column"
    RENAME_COLUMN = "rename_column"
    WIDEN_COLUMN = "widen_column"  # MODIFY COLUMN that Delta type widening can follow
    NARROW_COLUMN = "narrow_column"  # MODIFY COLUMN that narrows or changes type family
    SET_DEFAULT = "set_default"
    TRUNCATE_TABLE = "truncate_table"
    RENAME_TABLE = "rename_table"
    DROP_TABLE = "drop_table"
    PRIMARY_KEY = "primary_key"
    PARTITION = "partition"  # TRUNCATE/DROP/EXCHANGE PARTITION: rows change without row events
    RECOVER_TABLE = "recover_table"
    # A DDL the parser does not understand: its effect on columns is unknown, so it is never
    # lumped with `other` (which is known to change no column).
    UNPARSED = "unparsed"
    OTHER = "other"  # indexes, comments, charset, TiFlash, placement, views, ...


DEFAULT_DDL_POLICY: dict[DdlKind, Action] = {
    DdlKind.CREATE_TABLE: Action.APPLY,
    DdlKind.ADD_COLUMN: Action.APPLY,
    DdlKind.DROP_COLUMN: Action.APPLY,
    DdlKind.RENAME_COLUMN: Action.APPLY,
    DdlKind.WIDEN_COLUMN: Action.APPLY,
    DdlKind.NARROW_COLUMN: Action.FAIL,
    DdlKind.SET_DEFAULT: Action.APPLY,
    DdlKind.TRUNCATE_TABLE: Action.APPLY,
    DdlKind.RENAME_TABLE: Action.APPLY,
    DdlKind.DROP_TABLE: Action.APPLY,
    DdlKind.PRIMARY_KEY: Action.APPLY,
    DdlKind.PARTITION: Action.APPLY,
    DdlKind.RECOVER_TABLE: Action.FAIL,
    DdlKind.UNPARSED: Action.FAIL,
    DdlKind.OTHER: Action.APPLY,
}


class FeatureUse(StrEnum):
    """What a target does when a DDL first needs a Delta table feature (`table_features`)."""

    # Rebuild a target smaller than `TableFeatures.rebuild_below`, enable on a larger one:
    # every reader keeps reading the small targets that most tables are, and a large one
    # is not rewritten at each DDL (docs/table-features.md).
    AUTO = "auto"
    ENABLE = "enable"  # enable it, in its own commit just before the change
    REBUILD = "rebuild"  # keep it off: rewrite the table with the new schema in one commit
    FAIL = "fail"  # keep it off: block the target at that DDL


# Default `table_features.rebuild_below`: a rewrite reads and writes the whole target once
# per such DDL, a cost that grows with it; above this, the feature costs less than the
# rewrites (most targets of a many-table database are far below it).
REBUILD_BELOW = 1 << 30


@dataclass(frozen=True, slots=True)
class TableFeatures:
    """The Delta table features a target may carry (`table_features` in defaults or on a
    table entry): a compatibility setting for readers that lack some of them."""

    # False: a MERGE rewrites the files holding the rows it replaces, so every reader can
    # read the target (delta-rs's to_pyarrow_table/to_pandas refuse deletion vectors);
    # True: it marks them instead (deletion vectors).
    deletion_vectors: bool = False
    column_mapping: FeatureUse = FeatureUse.AUTO  # at the first RENAME/DROP COLUMN
    type_widening: FeatureUse = FeatureUse.AUTO  # at the first widening MODIFY
    # `auto`: a target of fewer bytes (its data files, as its Delta log lists them) is
    # rewritten without the feature, a larger one gets it.
    rebuild_below: int = REBUILD_BELOW

    def with_overrides(self, overrides: dict[str, object]) -> TableFeatures:
        from dataclasses import replace

        return replace(self, **overrides) if overrides else self


class Mode(StrEnum):
    """What a target keeps of its upstream table (`mode` on a table entry or in defaults)."""

    MIRROR = "mirror"  # the table as it is now
    SOFT_DELETE = "soft_delete"  # the mirror plus the deleted rows, marked with their delete
    HISTORY = "history"  # every version of every row with its validity (SCD type 2)


class BadMessagePolicy(StrEnum):
    FAIL = "fail"
    QUARANTINE = "quarantine"


class TransportKind(StrEnum):
    FILES = "files"
    KAFKA = "kafka"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a declaration came from, for messages: a project-relative file and a line."""

    file: str
    line: int | None = None

    def render(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


class LargeMessageHandle(StrEnum):
    """TiCDC's `large-message-handle-option`: what it does with a message larger than
    `max-message-bytes` (tiflow/ticdc pkg/config/large_message.go)."""

    NONE = "none"  # TiCDC fails the changefeed
    HANDLE_KEY_ONLY = "handle-key-only"  # only the handle-key columns are sent
    CLAIM_CHECK = "claim-check"  # the whole message goes to external storage


class Compression(StrEnum):
    """TiCDC's `large-message-handle-compression` of each encoded message
    (pkg/compression/compress.go: snappy block format, lz4 frame format)."""

    NONE = "none"
    SNAPPY = "snappy"
    LZ4 = "lz4"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Protocol options, mirroring TiCDC's sink-uri flags (YAML keys use dashes)."""

    enable_tidb_extension: bool = True
    content_compatible: bool = False
    only_output_updated_columns: bool = False
    debezium_disable_schema: bool = False
    # TiCDC server time zone: TIMESTAMP values in Canal-JSON and Open Protocol are
    # wall-clock strings in this zone (codec facts 0.1). IANA name or "UTC" or "+08:00".
    time_zone: str = "UTC"
    # The changefeed's `[sink.kafka-config.large-message-handle]` settings (docs/kafka.md,
    # Large messages): claim-checked messages are read from `claim_check_storage_uri`.
    large_message_handle_option: LargeMessageHandle = LargeMessageHandle.NONE
    large_message_handle_compression: Compression = Compression.NONE
    claim_check_storage_uri: str | None = None
    claim_check_raw_value: bool = False


class ExportFiletype(StrEnum):
    """Dumpling's `--filetype`."""

    SQL = "sql"
    CSV = "csv"


@dataclass(frozen=True, slots=True)
class DumplingOptions:
    """The Dumpling flags an export was made with (YAML keys are the flag names); the
    defaults are Dumpling's own. `time_zone` is the export session's time zone (TiDB's
    `time_zone`, or Dumpling's `--params time_zone=...`): TIMESTAMP values are wall-clock
    text in it."""

    filetype: ExportFiletype = ExportFiletype.SQL
    csv_separator: str = ","
    csv_delimiter: str = '"'
    csv_null_value: str = "\\N"
    csv_line_terminator: str = "\r\n"
    no_header: bool = False
    escape_backslash: bool = True
    time_zone: str = "UTC"


@dataclass(frozen=True, slots=True)
class InitialLoad:
    """Where a source's targets are loaded from before they follow the changefeed: a
    Dumpling export (a folder, relative to the project, or a URI) at its snapshot TSO."""

    dumpling: str
    options: DumplingOptions = field(default_factory=DumplingOptions)
    origin: Origin = field(default_factory=lambda: Origin("?"))


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    protocol: Protocol
    topics: tuple[str, ...]
    topic_pattern: str | None = None
    options: SourceOptions = field(default_factory=SourceOptions)
    origin: Origin = field(default_factory=lambda: Origin("?"))
    initial_load: InitialLoad | None = None

    @property
    def has_commit_ts(self) -> bool:
        """Whether messages carry a TiDB commit_ts and watermarks (codec facts 1.6, 3.4, 4.5)."""
        if self.protocol is Protocol.CANAL_JSON:
            return self.options.enable_tidb_extension
        return True


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A route: upstream `db.table` pattern (fnmatch globs) -> target name template."""

    upstream: str
    name: str  # may contain {db} and {table}
    source: str | None = None  # None: every source
    keys: tuple[str, ...] = ()  # empty: the upstream primary key (handle key)
    ddl: dict[DdlKind, Action] = field(default_factory=dict)
    on_bad_message: BadMessagePolicy | None = None  # None: project default
    # Row columns the user chose to drop when the target lacks them (lower-cased names).
    ignore_columns: tuple[str, ...] = ()
    # `table_features` set on the entry (field name -> value), over the project defaults.
    table_features: dict[str, object] = field(default_factory=dict)
    origin: Origin = field(default_factory=lambda: Origin("?"))
    # False: this entry's targets start from the changefeed even when their source has an
    # `initial_load`.
    initial_load: bool = True
    # `target_lag` of the entry in milliseconds; None: the project default.
    target_lag_ms: int | None = None
    mode: Mode | None = None  # None: the project default (`defaults.mode`)
    # `rewrite_below` of the entry in bytes; None: the project default.
    rewrite_below: int | None = None
    # `maintenance` of the entry, over the project default's (fields left None).
    maintenance: MaintenanceOptions | None = None
    # The catalog name of each target (`schema`, `table`: templates with {db} and {table};
    # the table's default is the target's name), and whether a dropped or renamed-away
    # target's catalog entry is dropped ("drop") or kept ("keep"); used only when the
    # profile output names a catalog.
    catalog_schema: str = "{db}"
    catalog_table: str | None = None
    catalog_on_drop: str = "drop"
    # Extra TBLPROPERTIES (`core.table_properties` says which keys may be set) and the
    # table's comment (default: the upstream table's COMMENT); a change of either for an
    # existing target is a planned step (`plan.properties`). `accept_reader_loss`: a
    # `delta.*` key that may take readers away is accepted (Spark's writers only).
    properties: tuple[tuple[str, str], ...] = ()
    comment: str | None = None
    accept_reader_loss: bool = False
    # The layout each target is created with: its partition columns (`PARTITIONED BY`) or
    # its clustering columns (Delta liquid clustering, `CLUSTER BY`), upstream columns of
    # its table; never both. `layout_line`: the line of the key in the entry's file.
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    layout_line: int | None = None

    @property
    def upstream_db(self) -> str:
        return self.upstream.split(".", 1)[0]

    @property
    def upstream_table(self) -> str:
        return self.upstream.split(".", 1)[1]

    @property
    def is_pattern(self) -> bool:
        return any(ch in self.upstream for ch in "*?[")

    def matches(self, db: str, table: str) -> bool:
        # MySQL identifiers are case-insensitive on most deployments; TiDB lower-cases
        # table names by default (lower_case_table_names=2 semantics), so match that way.
        return fnmatch.fnmatchcase(db.lower(), self.upstream_db.lower()) and fnmatch.fnmatchcase(
            table.lower(), self.upstream_table.lower()
        )

    def target_name(self, db: str, table: str) -> str:
        return self.name.replace("{db}", db).replace("{table}", table)

    def catalog_names(self, db: str, table: str) -> tuple[str, str]:
        """(schema, table) of the target of upstream `db.table` in the output's catalog."""
        tbl = self.catalog_table if self.catalog_table is not None else self.name
        return (
            self.catalog_schema.replace("{db}", db).replace("{table}", table),
            tbl.replace("{db}", db).replace("{table}", table),
        )


class OverrideAction(StrEnum):
    """What to do with one specific upstream DDL instead of what its text says."""

    SKIP = "skip"  # not applied: no Delta change, and the schema history does not follow it
    APPLY_AS = "apply_as"  # read `sql` instead of the DDL's own text, then apply as usual
    APPLIED = "applied"  # the history follows `sql`; no Delta statement (changed by hand)


@dataclass(frozen=True, slots=True)
class DdlOverride:
    """A decision about one upstream DDL, named by its table and commit_ts (`ddl_overrides`
    in ticdc_sync.yml)."""

    upstream: str  # db.table the DDL is keyed under, as `plan` shows it
    commit_ts: int
    action: OverrideAction
    sql: str | None = None
    source: str | None = None  # None: every source
    note: str | None = None
    origin: Origin = field(default_factory=lambda: Origin("?"))

    def matches(self, source: str, db: str, table: str, commit_ts: int) -> bool:
        db_, _, tbl_ = self.upstream.partition(".")
        return (
            commit_ts == self.commit_ts
            and (self.source is None or self.source == source)
            and db_.lower() == db.lower()
            and tbl_.lower() == table.lower()
        )


# How long a target's oldest unapplied change may wait, without `target_lag` anywhere.
DEFAULT_TARGET_LAG_MS = 60_000
# Targets smaller than this apply a row segment by rewriting their files (one Spark write,
# one commit) rather than by a MERGE, without `rewrite_below` anywhere: up to it, a small
# target's MERGE rewrote the files it touched anyway, which for a table this small is all
# of them (benchmarks/README.md).
DEFAULT_REWRITE_BELOW = 16 << 20


# A target's maintenance by the run that holds the lease, without `maintenance` anywhere:
# compaction once it has this many files averaging under SMALL_FILE_BYTES, VACUUM at most
# this often of the files removed longer ago than the retention, which is how far back the
# target can be read (`as_of`, its versions, sync points).
DEFAULT_COMPACT_SMALL_FILES = 32
DEFAULT_VACUUM_EVERY_MS = 3_600_000
DEFAULT_RETAIN_MS = 7 * 24 * 3600 * 1000
# Files under this size count as small (OPTIMIZE bin-packs them).
SMALL_FILE_BYTES = 32 << 20


@dataclass(frozen=True, slots=True)
class MaintenanceOptions:
    """`maintenance:` of `defaults` or of a table entry as written (None: not set there)."""

    enabled: bool | None = None
    compact_small_files: int | None = None  # 0: never compacted
    retain_ms: int | None = None
    vacuum_every_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Maintenance:
    """A target's maintenance, each setting resolved with where it is set (the entry's
    file:line, "ticdc_sync.yml defaults" or "built-in default")."""

    enabled: bool = True
    compact_small_files: int = DEFAULT_COMPACT_SMALL_FILES
    retain_ms: int = DEFAULT_RETAIN_MS
    vacuum_every_ms: int = DEFAULT_VACUUM_EVERY_MS
    retain_from: str = "built-in default"
    origin: str = "built-in default"  # where the first setting that differs is set


@dataclass(frozen=True, slots=True)
class Defaults:
    ddl: dict[DdlKind, Action] = field(default_factory=lambda: dict(DEFAULT_DDL_POLICY))
    on_bad_message: BadMessagePolicy = BadMessagePolicy.FAIL
    table_features: TableFeatures = field(default_factory=TableFeatures)
    target_lag_ms: int | None = None  # `defaults.target_lag`; None: DEFAULT_TARGET_LAG_MS
    mode: Mode | None = None  # `defaults.mode`; None: mirror
    rewrite_below: int | None = None  # `defaults.rewrite_below`; None: DEFAULT_REWRITE_BELOW
    maintenance: MaintenanceOptions = field(default_factory=MaintenanceOptions)


@dataclass(frozen=True, slots=True)
class Transport:
    kind: TransportKind
    captures: str | None = None  # files: folder, relative to the project root or absolute
    bootstrap_servers: str | None = None  # kafka
    kafka_options: dict[str, str] = field(default_factory=dict)  # passed to the Kafka client
    starting_offsets: str = "earliest"


# `catalog.metastore` of an output: a Hive metastore kept in the warehouse (a laptop's).
EMBEDDED_METASTORE = "embedded"


@dataclass(frozen=True, slots=True)
class CatalogOutput:
    """The catalog an output's targets are registered in (`catalog:` of a profile output):
    `name` is a Spark catalog (`spark_catalog`, the session catalog, or a catalog plugin
    the session's conf configures); `metastore` the session catalog's Hive metastore: a
    `thrift://host:port` URI, EMBEDDED_METASTORE (Derby, in the warehouse), or None (as the
    Spark conf says)."""

    name: str = "spark_catalog"
    metastore: str | None = None


@dataclass(frozen=True, slots=True)
class Output:
    """The selected profile target: Spark, warehouse, transport."""

    name: str  # target name, e.g. "dev"
    spark_master: str = "local[*]"
    spark_conf: dict[str, str] = field(default_factory=dict)
    # A Spark Connect server (`spark.remote`, else $SPARK_REMOTE): `sc://host:port`. When
    # set, the run is a client of that server: no local JVM, no master, no jars here.
    spark_remote: str | None = None
    jars_dir: str | None = None  # air-gapped: a folder of jars instead of Maven Central
    warehouse: str = "warehouse"  # path or URI where Delta tables and state live
    # The warehouse's run lease (ticdc_sync/warehouse/lease.py): its ttl, and how long a run waits
    # for it while another run holds it.
    run_lease_ttl: float = 120.0
    run_lease_wait: float = 0.0
    # Targets applied at once (`run.apply_workers`); None: from the Spark master
    # (`plan.workers.apply_workers`).
    apply_workers: int | None = None
    # Where `run` serves its Prometheus metrics (`run.metrics_port`, `run.metrics_address`);
    # None: not served (unless `--metrics-port`), and 127.0.0.1.
    metrics_port: int | None = None
    metrics_address: str | None = None
    transport: Transport = field(default_factory=lambda: Transport(TransportKind.FILES, "captures"))
    catalog: CatalogOutput | None = None  # None: targets are paths only


@dataclass(frozen=True, slots=True)
class Project:
    name: str
    root: Path  # never rendered into plans
    output: Output
    defaults: Defaults
    sources: tuple[Source, ...]
    tables: tuple[TableEntry, ...]
    seed_schemas: dict[tuple[str, str], TableSchema] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    ddl_overrides: tuple[DdlOverride, ...] = ()
    # How long applied events stay staged (`staging.retention`), in milliseconds.
    staging_retention_ms: int = 7 * 24 * 3600 * 1000
    # `sync_points: every ...` in milliseconds of TiDB time (None: no sync points).
    sync_every_ms: int | None = None

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)

    def route(self, source: str, db: str, table: str) -> TableEntry | None:
        """The first table entry that claims upstream `db.table` from `source`, if any."""
        for t in self.tables:
            if (t.source is None or t.source == source) and t.matches(db, table):
                return t
        return None

    def ddl_policy(self, entry: TableEntry, kind: DdlKind) -> Action:
        return entry.ddl.get(kind, self.defaults.ddl.get(kind, DEFAULT_DDL_POLICY[kind]))

    def table_features(self, entry: TableEntry) -> TableFeatures:
        """The table features the target of `entry` may carry (entry over defaults)."""
        return self.defaults.table_features.with_overrides(entry.table_features)

    def target_lag(self, entry: TableEntry) -> tuple[int, str]:
        """The `target_lag` of the targets of `entry` in milliseconds, and where it is set."""
        if entry.target_lag_ms is not None:
            return entry.target_lag_ms, entry.origin.render()
        return self.target_lag_default()

    def target_lag_default(self) -> tuple[int, str]:
        """The `target_lag` of entries without one, and where it is set."""
        if self.defaults.target_lag_ms is not None:
            return self.defaults.target_lag_ms, "ticdc_sync.yml defaults"
        return DEFAULT_TARGET_LAG_MS, "built-in default"

    def rewrite_below(self, entry: TableEntry) -> tuple[int, str]:
        """The `rewrite_below` of the targets of `entry` in bytes, and where it is set."""
        if entry.rewrite_below is not None:
            return entry.rewrite_below, entry.origin.render()
        if self.defaults.rewrite_below is not None:
            return self.defaults.rewrite_below, "ticdc_sync.yml defaults"
        return DEFAULT_REWRITE_BELOW, "built-in default"

    def maintenance(self, entry: TableEntry) -> Maintenance:
        """The maintenance of the targets of `entry`: each setting from the entry, else the
        defaults, else built in."""
        own = entry.maintenance or MaintenanceOptions()
        df = self.defaults.maintenance
        values: dict[str, object] = {}
        for name in ("enabled", "compact_small_files", "retain_ms", "vacuum_every_ms"):
            for opts, where in ((own, entry.origin.render()), (df, "ticdc_sync.yml defaults")):
                if getattr(opts, name) is not None:
                    values[name] = getattr(opts, name)
                    if name == "retain_ms":
                        values["retain_from"] = where
                    break
        origin = "built-in default"
        if own != MaintenanceOptions():
            origin = entry.origin.render()
        elif df != MaintenanceOptions():
            origin = "ticdc_sync.yml defaults"
        return Maintenance(**{**_fields(Maintenance()), **values, "origin": origin})

    def mode(self, entry: TableEntry) -> tuple[Mode, str]:
        """The mode of the targets of `entry`, and where it is set."""
        if entry.mode is not None:
            return entry.mode, entry.origin.render()
        if self.defaults.mode is not None:
            return self.defaults.mode, "ticdc_sync.yml defaults"
        return Mode.MIRROR, "built-in default"

    def ddl_override(self, source: str, db: str, table: str, commit_ts: int) -> DdlOverride | None:
        """The override of one DDL (by the table it is keyed under and its commit_ts)."""
        for o in self.ddl_overrides:
            if o.matches(source, db, table, commit_ts):
                return o
        return None

    def bad_message_policy(self, entry: TableEntry | None) -> BadMessagePolicy:
        if entry is not None and entry.on_bad_message is not None:
            return entry.on_bad_message
        return self.defaults.on_bad_message

    def quarantines(self, source: str, db: str, table: str) -> bool:
        """Whether an undecodable record of upstream `db.table` of `source` goes to the
        quarantine (`table` empty when the record names no table): by its entry's
        `on_bad_message`, else the default; always for a table no entry routes (its rows are
        skipped anyway: the record is kept and counted rather than blocking the source).
        Decided here, once, for staging, where no plan exists yet; a target's plan carries
        its own policy (`TargetPlan.on_bad_message`)."""
        if table and self.route(source, db, table) is None:
            return True
        entry = self.route(source, db, table) if table else None
        return self.bad_message_policy(entry) is BadMessagePolicy.QUARANTINE


def _fields(m: Maintenance) -> dict[str, object]:
    return {k: getattr(m, k) for k in Maintenance.__dataclass_fields__}
