"""What `ticdc-sync verify` compares, decided without Spark: which export each target is
compared with and which of its upstream tables feed it, which columns compare, which rows
of the target count as live, and the SQL that normalises, hashes and shows a value.

- The export: `--export DIR` for every selected target, else each source's
  `initial_load.dumpling`. Its `metadata` gives the snapshot TSO the lake is read at
  (`spark.as_of`); its files are read and typed as an initial load reads them
  (`spark.apply.load.export_rows`) from the `Load` a check carries, so equal values are of
  one type on both sides.
- Routing: a target gathers every upstream table routed into it (`TargetPlan.upstreams`,
  plus any table of the export the project's routes send to it: shards). The export's
  union of them is what the target must hold.
- Absence: a target the export holds none of whose upstream tables did not exist at its
  snapshot TSO either (created or renamed in after it, dropped or renamed away at or
  before it, as the source's DDL timeline tells: `as_of.absent_at`, the readers' own
  decision) is absent at that TSO: nothing of it is compared, and it does not differ. One
  whose table did exist then is an export that left it out: an error.
- Columns: the target's columns but `_commit_ts` and its mode's own (`sqlgen_history`). A
  column of the export's data the target lacks, or (mirror, soft_delete) a target column no
  upstream table has, is a difference of the schema. Not compared: a generated upstream
  column (Dumpling does not export its values) and a history target's column that upstream
  dropped (the target keeps it, docs/history.md).
- Live rows: a mirror's every row, a soft_delete target's rows not marked deleted, a
  history target's versions valid at the TSO (read at its newest applied state when that
  is later: `read_at`).
- Values: each side's value of a column is of the target's Spark type; a float's -0.0 and
  0.0 hash as one, so do its NaNs. A row's hash is xxhash64 over (is NULL, value) of each
  compared column (a NULL never hashes as a value moved to another column); a side's
  checksum is the sum of its rows' hashes modulo 2^64, order-independent, also over a
  repeated row (where an XOR would cancel it out).

Pure: reads an export's listing and small files (`codecs.dumpling_export`), never rows;
no pyspark. `spark.verify` runs the comparison, `read.verify_report` reports it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ticdc_sync.codecs.dumpling_export import (
    Export,
    ExportTable,
    data_columns,
    data_filetype,
    discover,
    discover_for,
)
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import BadMessagePolicy, DumplingOptions, Mode, Project
from ticdc_sync.core.sqlgen import COMMIT_TS, quote
from ticdc_sync.core.sqlgen_history import ALL_MODE_COLUMNS, IS_DELETED, VALID_FROM, VALID_TO
from ticdc_sync.core.upstream import key
from ticdc_sync.plan.model import Load, LoadTable, Plan, TargetPlan
from ticdc_sync.project import routing
from ticdc_sync.read.as_of import Absent, absent_at
from ticdc_sync.read.snapshot import catalog_name

MISSING = "missing"  # a key upstream that the lake lacks
EXTRA = "extra"  # a key in the lake that upstream lacks
CHANGED = "changed"  # a key on both sides whose values differ
KINDS = (MISSING, EXTRA, CHANGED)
# A side's checksum: the sum of its rows' xxhash64 modulo 2^64, as 16 hex digits.
CHECKSUM_MOD = 2**64


@dataclass(frozen=True, slots=True)
class Check:
    """One target compared with one export at the export's snapshot TSO."""

    target: str
    source: str
    mode: Mode
    exists: bool  # the target has a Delta table (else the lake holds none of its rows)
    keys: tuple[str, ...]  # its merge keys: differing rows are found and listed by them
    export: Export
    load: Load  # the export's tables that feed the target, read as a load reads them
    routed: tuple[tuple[str, str], ...]  # every upstream table routed into the target
    on_bad_message: BadMessagePolicy
    read_at: int | None = None  # the TSO the lake is read at (None: the export's)
    catalog_name: str | None = None  # its name in the output's catalog, if registered

    @property
    def tso(self) -> int:
        return self.export.snapshot_ts

    @property
    def lake_tso(self) -> int:
        return self.tso if self.read_at is None else self.read_at

    @property
    def upstreams(self) -> tuple[str, ...]:
        """The routed tables the export holds (`db.table`)."""
        return tuple(f"{t.db}.{t.table}" for t in self.load.tables)

    @property
    def not_in_export(self) -> tuple[str, ...]:
        """Routed tables the export does not hold: they did not exist at its snapshot."""
        held = {key(t.db, t.table) for t in self.load.tables}
        return tuple(f"{db}.{t}" for db, t in self.routed if key(db, t) not in held)


@dataclass(frozen=True, slots=True)
class AbsentTarget:
    """A selected target none of whose upstream tables existed at its export's snapshot
    TSO (`as_of.absent_at` over its source's DDL timeline): nothing of it to compare."""

    target: str
    source: str
    export: Export
    absent: Absent

    @property
    def tso(self) -> int:
        return self.export.snapshot_ts


# --------------------------------------------------------------------------- exports


def export_options(project: Project, source: str) -> DumplingOptions:
    """The Dumpling flags an export given with `--export` is read with: those of the
    source's `initial_load` (the export the team makes), else Dumpling's defaults."""
    s = next(s for s in project.sources if s.name == source)
    return s.initial_load.options if s.initial_load is not None else DumplingOptions()


class _Exports:
    """The export of each source, each folder found once per set of flags."""

    def __init__(self, project: Project, given: str | None) -> None:
        self.project = project
        self.given = given
        self._found: dict[tuple[str, DumplingOptions], Export] = {}
        self._filetype = None
        if given is not None:
            self.location = given if "://" in given else str(Path(given).resolve())
            self.shown = given.rstrip("/") or "."
            if "://" not in given and not Path(self.location).is_dir():
                raise UserError(
                    f"verify: --export {given}: no such folder (hint: give the folder of a "
                    "finished Dumpling export of the upstream, the one holding `metadata`)"
                )
            self._filetype = data_filetype(self.location, self.shown)

    def of(self, source: str) -> tuple[Export, DumplingOptions]:
        if self.given is None:
            s = next(s for s in self.project.sources if s.name == source)
            if s.initial_load is None:
                raise UserError(
                    f"verify: source {source} has no `initial_load` export to compare its "
                    "targets with (hint: give a Dumpling export of the upstream with --export "
                    "DIR, or select other targets with --tables)"
                )
            options = s.initial_load.options
            where = (s.initial_load.dumpling, options)
            if where not in self._found:
                self._found[where] = discover_for(self.project, s.initial_load)
            return self._found[where], options
        options = export_options(self.project, source)
        if self._filetype is not None:
            options = replace(options, filetype=self._filetype)
        where = (self.location, options)
        if where not in self._found:
            self._found[where] = discover(self.location, self.shown, options)
        return self._found[where], options


def _matches(name: str, names: Sequence[str]) -> bool:
    return not names or any(fnmatch.fnmatchcase(name, pat) for pat in names)


def selected(
    plan: Plan, names: Sequence[str], unknown: Sequence[Check] = ()
) -> list[TargetPlan | Check]:
    """The plan's targets matching `names` (fnmatch globs or names; all when empty), then
    the `unknown` ones (targets the export's tables are routed to that the plan does not
    know), by name."""
    out: list[TargetPlan | Check] = [t for t in plan.targets if _matches(t.name, names)]
    out += [c for c in unknown if _matches(c.target, names)]
    unmatched = [p for p in names if not any(_matches(_name(t), (p,)) for t in out)]
    if unmatched:
        known = ", ".join([*(t.name for t in plan.targets), *(c.target for c in unknown)])
        known = known or "none"
        raise UserError(
            f"verify: --tables {' '.join(unmatched)} matches no target (targets: {known}) "
            "(hint: `ticdc-sync plan` lists them; globs like 'canal_*' work)"
        )
    return out


def _name(t: TargetPlan | Check) -> str:
    return t.target if isinstance(t, Check) else t.name


def _unplanned(
    project: Project, plan: Plan, exports: _Exports, names: Sequence[str]
) -> list[Check]:
    """Targets the project's routes send a table of the `--export` to that the plan does
    not know (no Delta table, nothing staged of them: the lake holds none of their rows),
    each a check without a lake table. (The plan knows every target of a source's own
    `initial_load` export: it loads them.)"""
    if exports.given is None:
        return []
    known = {t.name for t in plan.targets}
    grouped: dict[str, tuple[str, list[ExportTable], DumplingOptions, Export]] = {}
    for s in sorted(project.sources, key=lambda s: s.name):
        found, options = exports.of(s.name)
        for et in found.tables.values():
            name = routing.target_of(project, s.name, et.db, et.table)
            if name is None or name in known or not _matches(name, names):
                continue
            grouped.setdefault(name, (s.name, [], options, found))[1].append(et)
    out: list[Check] = []
    for name, (source, tables, options, found) in sorted(grouped.items()):
        tables.sort(key=lambda et: (et.db, et.table))
        r = routing.route(project, source, tables[0].db, tables[0].table)
        assert r is not None
        keys, _ = routing.merge_keys(r.entry, tables[0].schema)
        out.append(
            Check(
                target=name,
                source=source,
                mode=project.mode(r.entry)[0],
                exists=False,
                keys=keys,
                export=found,
                load=_load(found, options, tables),
                routed=tuple((et.db, et.table) for et in tables),
                on_bad_message=project.bad_message_policy(r.entry),
            )
        )
    return out


def checks(
    project: Project, plan: Plan, names: Sequence[str] = (), export: str | None = None
) -> tuple[tuple[Check, ...], tuple[str, ...], tuple[AbsentTarget, ...]]:
    """The targets to compare (by name); the selected targets passed over because neither
    the lake nor the export holds anything of them (each with why); and the selected
    targets absent at their export's TSO (none of their upstream tables existed then).

    Refused (`UserError`): a pattern that matches no target; a source without an export
    to compare with; an export that cannot be read; a target whose tables' schema files
    cannot be read; a target the lake holds whose upstream tables the export holds none
    of although one of them existed at its TSO (an export of other tables, or one that
    left them out: select the targets it covers)."""
    exports = _Exports(project, export)
    out: list[Check] = []
    passed: list[str] = []
    absent: list[AbsentTarget] = []
    chosen = selected(plan, names, unknown=_unplanned(project, plan, exports, names))
    for t in chosen:
        if isinstance(t, Check):
            out.append(t)
            continue
        found, options = exports.of(t.source)
        routed = set(t.upstreams) | {
            (et.db, et.table)
            for et in found.tables.values()
            if routing.target_of(project, t.source, et.db, et.table) == t.name
        }
        broken = [found.unreadable[k] for k in (key(*u) for u in routed) if k in found.unreadable]
        if broken:
            raise UserError(f"verify: target {t.name}: {broken[0].why}")
        tables = sorted(
            (et for et in (found.table(db, tbl) for db, tbl in routed) if et is not None),
            key=lambda et: (et.db, et.table),
        )
        if not tables:
            # (No table of the export is routed to it: `routed` is the plan's upstreams.)
            sp = plan.source_plan(t.source)
            gone = absent_at(t, sp.timeline, found.snapshot_ts) if sp is not None else None
            if gone is not None:
                absent.append(AbsentTarget(t.name, t.source, found, gone))
                continue
            ups = ", ".join(f"{db}.{tbl}" for db, tbl in sorted(routed)) or "none known"
            if not t.exists:
                passed.append(
                    f"{t.name}: no Delta table, and the export holds none of its upstream "
                    f"tables ({ups})"
                )
                continue
            raise UserError(
                f"verify: target {t.name}: the Dumpling export {found.shown} holds none of its "
                f"upstream tables ({ups}) (hint: export them too, or leave the target out "
                "with --tables)"
            )
        out.append(
            Check(
                target=t.name,
                source=t.source,
                mode=t.mode,
                exists=t.exists,
                keys=t.keys,
                export=found,
                load=_load(found, options, tables),
                routed=tuple(sorted(routed)),
                on_bad_message=t.on_bad_message,
                read_at=read_at(t, found.snapshot_ts),
                catalog_name=catalog_name(t),
            )
        )
    return tuple(out), tuple(passed), tuple(absent)


def read_at(t: TargetPlan, tso: int) -> int:
    """The TSO target `t` is read at to compare it with an export at `tso`. A history
    target keeps every version with its validity, so its newest applied state holds the
    versions valid at any TSO it has applied (docs/history.md): it is read there and
    filtered at `tso` (`live_rows_sql`), without the staged changes up to `tso` a read
    merges into a mirror only. Any other target is read at `tso`."""
    if t.mode is Mode.HISTORY and t.exists:
        return max(tso, t.marker.applied_ts)
    return tso


def _load(export: Export, options: DumplingOptions, tables: Sequence[ExportTable]) -> Load:
    return Load(
        export=export.shown,
        location=export.location,
        snapshot_ts=export.snapshot_ts,
        options=options,
        tables=tuple(LoadTable(t.db, t.table, t.schema, t.schema_file, t.files) for t in tables),
    )


# --------------------------------------------------------------------------- columns


@dataclass(frozen=True, slots=True)
class Columns:
    """What compares of one target: its columns, with the reasons for the rest."""

    compared: tuple[tuple[str, str], ...]  # (name, Spark type), in the target's order
    keys: tuple[str, ...]  # the keys differences are found by (() : counted, not listed)
    only_upstream: tuple[str, ...]  # in the export's data, not in the target
    only_lake: tuple[str, ...]  # in the target, in no upstream table (mirror, soft_delete)
    not_compared: tuple[tuple[str, str], ...]  # (column, why)
    notes: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.compared)


def columns(check: Check, target_columns: Sequence[tuple[str, str]]) -> Columns:
    """The columns of `check` that compare, given the target's columns as read at the TSO
    (name, Spark type; `_commit_ts` and the mode's columns are left out here)."""
    data: dict[str, str] = {}  # lower name -> export name, over every table's data files
    generated: set[str] = set()
    for lt in check.load.tables:
        held = data_columns(lt.schema)
        for c in held:
            data.setdefault(c.lower(), c)
        generated |= {c.name.lower() for c in lt.schema.columns} - {c.lower() for c in held}
    compared: list[tuple[str, str]] = []
    only_lake: list[str] = []
    skipped: list[tuple[str, str]] = []
    mine = [
        (n, t) for n, t in target_columns if n != COMMIT_TS and n.lower() not in ALL_MODE_COLUMNS
    ]
    for name, spark_type in mine:
        low = name.lower()
        if low in data:
            compared.append((name, spark_type))
        elif low in generated:
            skipped.append((name, "generated upstream: the export holds no values for it"))
        elif check.mode is Mode.HISTORY:
            skipped.append(
                (
                    name,
                    "not upstream at the TSO: a history target keeps a column dropped "
                    "upstream, and holds one added after the TSO",
                )
            )
        else:
            only_lake.append(name)
    have = {n.lower() for n, _ in mine}
    only_upstream = tuple(c for low, c in data.items() if low not in have)
    by_low = {n.lower(): n for n, _ in compared}
    keys = tuple(by_low[k.lower()] for k in check.keys if k.lower() in by_low)
    notes: list[str] = []
    if not check.keys or len(keys) != len(check.keys):
        keys = ()
        notes.append("no merge keys among the compared columns: differing rows are not listed")
    return Columns(
        tuple(compared), keys, only_upstream, tuple(only_lake), tuple(skipped), tuple(notes)
    )


def live_rows_sql(mode: Mode, tso: int) -> str | None:
    """SQL over a target of `mode` read at `tso`: its rows that stand for an upstream row at
    `tso` (None: every row)."""
    if mode is Mode.SOFT_DELETE:
        return f"NOT coalesce({quote(IS_DELETED)}, false)"
    if mode is Mode.HISTORY:
        frm, to = quote(VALID_FROM), quote(VALID_TO)
        return f"{frm} <= {tso} AND ({to} IS NULL OR {to} > {tso})"
    return None


# --------------------------------------------------------------------------- values


def normalised_sql(value: str, spark_type: str) -> str:
    """SQL: `value` (of `spark_type`) as it hashes and compares: one zero and one NaN for
    floats (-0.0 and 0.0 are equal values with different bits); any other type as it is
    (both sides hold the target's type: the export is typed as a load types it)."""
    if spark_type in ("float", "double"):
        return (
            f"CASE WHEN isnan({value}) THEN CAST('NaN' AS {spark_type}) "
            f"WHEN {value} = 0 THEN CAST(0 AS {spark_type}) ELSE {value} END"
        )
    return value


def _pairs(cols: Sequence[tuple[str, str]]) -> list[str]:
    out: list[str] = []
    for name, spark_type in cols:
        q = quote(name)
        out += [f"isnull({q})", normalised_sql(q, spark_type)]
    return out


def row_hash_sql(cols: Sequence[tuple[str, str]]) -> str:
    """SQL: a row's hash over the compared columns `cols` (name, Spark type)."""
    return f"xxhash64({', '.join(_pairs(cols)) or '0'})"


def column_hash_sql(name: str, spark_type: str) -> str:
    """SQL: one column's hash in a row (a side's sum of it is that column's checksum)."""
    return f"xxhash64({', '.join(_pairs([(name, spark_type)]))})"


def checksum_text(total: int | None) -> str:
    """A side's checksum (the sum of its hashes, or None for no rows) as 16 hex digits."""
    return f"{int(total or 0) % CHECKSUM_MOD:016x}"


def shown_sql(value: str, spark_type: str) -> str:
    """SQL: `value` as the text a report shows (NULL stays NULL): bytes in hex, a TIMESTAMP
    in UTC whatever the session's time zone, any other value as Spark casts it."""
    if spark_type == "binary":
        return f"concat('0x', hex({value}))"
    if spark_type == "timestamp":
        return (
            f"date_format(to_utc_timestamp({value}, current_timezone()), "
            "\"yyyy-MM-dd HH:mm:ss.SSSSSS'Z'\")"
        )
    if spark_type == "timestamp_ntz":
        return f"date_format({value}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
    return f"CAST({value} AS STRING)"
