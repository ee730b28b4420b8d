"""Compile a project (plus the engine's state, if any) into a reviewable, deterministic Plan.

A plan is data (`Plan`) rendered as text or JSON for pull-request review: the same project
and state give byte-identical output, lists and keys are sorted, and nothing machine-specific
(absolute paths, timestamps) appears in it. The SQL shown is built by `sqlgen`, the same
functions the runner executes, with the literal placeholder `<warehouse>` for the location.
Pure Python: never imports pyspark, never writes files.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from ticdc_sync import datatypes, sqlgen
from ticdc_sync.errors import PlanError
from ticdc_sync.locations import target_location
from ticdc_sync.model import Action, DdlKind, Project, Source, TableEntry, TransportKind
from ticdc_sync.upstream import TableSchema

WAREHOUSE_PLACEHOLDER = "<warehouse>"
SOURCE_VIEW = "__ticdc_sync_source"
STATE_FILE = "target/state.json"  # written by the engine after each run (project-relative)

# How each DDL kind changes a Delta target (DESIGN.md §2 "DDL to Delta").
ADDITIVE = "additive"
DESTRUCTIVE = "destructive"
UNSUPPORTED = "unsupported"
NO_CHANGE = "no-change"
DDL_CLASS: dict[DdlKind, str] = {
    DdlKind.CREATE_TABLE: ADDITIVE,
    DdlKind.ADD_COLUMN: ADDITIVE,
    DdlKind.WIDEN_COLUMN: ADDITIVE,
    DdlKind.SET_DEFAULT: ADDITIVE,
    DdlKind.DROP_COLUMN: DESTRUCTIVE,
    DdlKind.RENAME_COLUMN: DESTRUCTIVE,
    DdlKind.NARROW_COLUMN: DESTRUCTIVE,
    DdlKind.TRUNCATE_TABLE: DESTRUCTIVE,
    DdlKind.RENAME_TABLE: DESTRUCTIVE,
    DdlKind.DROP_TABLE: DESTRUCTIVE,
    DdlKind.PRIMARY_KEY: DESTRUCTIVE,
    DdlKind.PARTITION: UNSUPPORTED,
    DdlKind.RECOVER_TABLE: UNSUPPORTED,
    DdlKind.OTHER: NO_CHANGE,
}

_SECRET_WORDS = ("password", "secret", "token", "jaas", "credential", "key")


@dataclass(frozen=True, slots=True)
class PlanState:
    """What the engine knows after its last run; read from `target/state.json`.

    `pending_ddl`: DDL seen upstream and not yet applied, oldest first; each a dict with
    `upstream` ("db.table"), `kind` (a `DdlKind` value), `sql`, `commit_ts` and optionally
    `target`, `classification` (overrides the default for the kind), `delta` (the Delta
    change in words) and `reason` (why it is blocked). `applied`: target name -> the
    commit_ts applied to it (0 once created and still empty).
    """

    pending_ddl: list[dict[str, Any]] = field(default_factory=list)
    applied: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def from_json(text: str) -> PlanState:
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError("expected a JSON object")
        return PlanState(
            pending_ddl=list(d.get("pending_ddl") or []),
            applied={str(k): int(v) for k, v in (d.get("applied") or {}).items()},
        )


def read_state(project: Project) -> PlanState | None:
    """The engine's `target/state.json` in the project, or None if it has not run yet."""
    path = Path(project.root) / STATE_FILE
    if not path.is_file():
        return None
    try:
        return PlanState.from_json(path.read_text("utf-8"))
    except (ValueError, TypeError, AttributeError) as exc:
        raise PlanError(
            f"{STATE_FILE}: unreadable engine state: {exc} (hint: delete it; the next run rewrites it)"
        ) from exc


@dataclass(frozen=True, slots=True)
class PlanColumn:
    name: str
    mysql_type: str
    delta_type: str
    nullable: bool
    lossy: str | None = None


@dataclass(frozen=True, slots=True)
class PlanTable:
    target: str
    upstream: str
    source: str
    route: str  # origin of the table entry, file:line
    action: str  # "create" (target not applied yet) or "update"
    keys: tuple[str, ...]
    keys_from: str  # "entry", "primary key", "unique key", "none"
    columns: tuple[PlanColumn, ...]
    create_sql: str
    merge_sql: str | None
    ddl_policy: dict[str, str]  # only the kinds that differ from the defaults
    applied_ts: int | None = None


@dataclass(frozen=True, slots=True)
class PlanRoute:
    upstream: str
    target: str
    source: str
    keys: tuple[str, ...]
    shard_merge: bool
    origin: str
    ddl: dict[str, str]
    on_bad_message: str | None


@dataclass(frozen=True, slots=True)
class PlanSource:
    name: str
    protocol: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    options: dict[str, Any]
    order: str


@dataclass(frozen=True, slots=True)
class PlanPending:
    upstream: str
    target: str | None
    commit_ts: int
    kind: str
    sql: str
    classification: str
    action: str
    delta: str | None
    blocked: str | None


@dataclass(frozen=True, slots=True)
class Plan:
    project: str
    target: str
    output: dict[str, Any]
    defaults: dict[str, Any]
    sources: tuple[PlanSource, ...]
    routes: tuple[PlanRoute, ...]
    tables: tuple[PlanTable, ...]
    pending: tuple[PlanPending, ...]
    warnings: tuple[str, ...]

    @property
    def has_pending(self) -> bool:
        """Changes a run would make: pending upstream DDL or targets still to create."""
        return bool(self.pending) or any(t.action == "create" for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["has_pending"] = self.has_pending
        return d


# --------------------------------------------------------------------------- building


def display_location(project: Project, location: str) -> str:
    """A warehouse/captures location as a plan shows it: never an absolute local path."""
    if "://" in location:
        return location
    p = Path(location)
    if not p.is_absolute():
        return PurePosixPath(*p.parts).as_posix() if p.parts else "."
    try:
        return p.resolve().relative_to(Path(project.root).resolve()).as_posix() or "."
    except ValueError:
        return "<absolute path outside the project>"


def _redact(key: str, value: str) -> str:
    return "<redacted>" if any(w in key.lower() for w in _SECRET_WORDS) else value


def _order_note(source: Source) -> str:
    if source.has_commit_ts:
        return "commit order from TiDB commit_ts; applied up to the resolved ts (watermarks)"
    return (
        "no commit_ts (canal-json without enable-tidb-extension): ordered by partition offset "
        "and `es`; applied as soon as read"
    )


def _options(source: Source) -> dict[str, Any]:
    o = source.options
    from ticdc_sync.project import OPTION_PROTOCOLS  # same table validate uses

    values: dict[str, Any] = {
        "enable-tidb-extension": o.enable_tidb_extension,
        "content-compatible": o.content_compatible,
        "only-output-updated-columns": o.only_output_updated_columns,
        "debezium-disable-schema": o.debezium_disable_schema,
        "time-zone": o.time_zone,
    }
    return {k: v for k, v in sorted(values.items()) if source.protocol in OPTION_PROTOCOLS[k]}


def _policy_diff(project: Project, entry: TableEntry) -> dict[str, str]:
    return {
        k.value: project.ddl_policy(entry, k).value
        for k in sorted(DdlKind, key=lambda k: k.value)
        if k in entry.ddl and entry.ddl[k] != project.defaults.ddl.get(k)
    }


def _keys(entry: TableEntry, schema: TableSchema) -> tuple[tuple[str, ...], str]:
    if entry.keys:
        return entry.keys, "entry"
    if schema.primary_key:
        return schema.primary_key, "primary key"
    hk = schema.handle_key()
    return hk, ("unique key" if hk else "none")


def _plan_table(
    project: Project, entry: TableEntry, source: str, schema: TableSchema, state: PlanState | None
) -> PlanTable:
    target = entry.target_name(schema.db, schema.table)
    cols = tuple(
        PlanColumn(
            name=c.name,
            mysql_type=c.type_sql(),
            delta_type=datatypes.delta_type(c),
            nullable=c.nullable,
            lossy=datatypes.lossy_reason(c),
        )
        for c in schema.columns
    )
    keys, keys_from = _keys(entry, schema)
    ref = sqlgen.table_ref(target_location(WAREHOUSE_PLACEHOLDER, target))
    create = sqlgen.create_table_sql(ref, [(c.name, c.delta_type) for c in cols], schema.comment)
    merge = sqlgen.merge_sql(ref, SOURCE_VIEW, keys, [c.name for c in cols]) if keys else None
    applied = state.applied.get(target) if state is not None else None
    return PlanTable(
        target=target,
        upstream=schema.qualified,
        source=source,
        route=entry.origin.render(),
        action="update" if applied is not None else "create",
        keys=keys,
        keys_from=keys_from,
        columns=cols,
        create_sql=create,
        merge_sql=merge,
        ddl_policy=_policy_diff(project, entry),
        applied_ts=applied,
    )


def _entry_sources(project: Project, entry: TableEntry) -> list[str]:
    names = sorted(s.name for s in project.sources)
    return names if entry.source is None else [entry.source]


def _pending(project: Project, state: PlanState | None) -> tuple[PlanPending, ...]:
    if state is None:
        return ()
    out = []
    for i, d in enumerate(state.pending_ddl):
        try:
            kind = DdlKind(str(d["kind"]))
            upstream = str(d["upstream"])
            db, _, tbl = upstream.partition(".")
            entry = next((t for t in project.tables if t.matches(db, tbl)), None)
            action = project.ddl_policy(entry, kind) if entry else project.defaults.ddl[kind]
            cls = str(d.get("classification") or DDL_CLASS[kind])
            blocked = d.get("reason")
            if blocked is None and (action is Action.FAIL or cls == UNSUPPORTED):
                blocked = f"policy ddl.{kind.value}: {action.value}"
            out.append(
                PlanPending(
                    upstream=upstream,
                    target=d.get("target") or (entry.target_name(db, tbl) if entry else None),
                    commit_ts=int(d["commit_ts"]),
                    kind=kind.value,
                    sql=str(d.get("sql", "")),
                    classification=cls,
                    action=action.value,
                    delta=d.get("delta"),
                    blocked=blocked,
                )
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise PlanError(
                f"{STATE_FILE}: pending_ddl[{i}] is malformed ({exc!r}) (hint: delete the file; the next run rewrites it)"
            ) from exc
    return tuple(sorted(out, key=lambda p: (p.commit_ts, p.upstream, p.sql)))


def build_plan(project: Project, state: PlanState | None = None) -> Plan:
    """Compile `project` (and the engine's `state`, if it has run) into a Plan."""
    from ticdc_sync.project import is_shard_merge

    warnings: list[str] = list(project.warnings)
    out = project.output
    transport: dict[str, Any] = {"type": out.transport.kind.value}
    if out.transport.kind is TransportKind.FILES:
        transport["captures"] = display_location(project, out.transport.captures or "captures")
    else:
        transport["bootstrap_servers"] = out.transport.bootstrap_servers
        transport["starting_offsets"] = out.transport.starting_offsets
        transport["options"] = {
            k: _redact(k, v) for k, v in sorted(out.transport.kafka_options.items())
        }
    output = {
        "spark_master": out.spark_master,
        "spark_conf": {k: _redact(k, v) for k, v in sorted(out.spark_conf.items())},
        "jars_dir": display_location(project, out.jars_dir) if out.jars_dir else None,
        "warehouse": display_location(project, out.warehouse),
        "transport": transport,
    }
    defaults = {
        "ddl": {
            k.value: v.value
            for k, v in sorted(project.defaults.ddl.items(), key=lambda kv: kv[0].value)
        },
        "on_bad_message": project.defaults.on_bad_message.value,
    }
    sources = tuple(
        PlanSource(
            s.name,
            s.protocol.value,
            tuple(sorted(s.topics)),
            s.topic_pattern,
            _options(s),
            _order_note(s),
        )
        for s in sorted(project.sources, key=lambda s: s.name)
    )
    routes = []
    for e in project.tables:  # declaration order: routes match first-wins
        shard = is_shard_merge(e)
        routes.append(
            PlanRoute(
                upstream=e.upstream,
                target=e.name,
                source=e.source or "*",
                keys=e.keys,
                shard_merge=shard,
                origin=e.origin.render(),
                ddl=_policy_diff(project, e),
                on_bad_message=e.on_bad_message.value if e.on_bad_message else None,
            )
        )
        if shard:
            warnings.append(
                f"{e.origin.render()}: route {e.upstream} -> {e.name} merges shards: keys of a "
                "shard-merged route must be unique across shards"
            )
    tables: dict[tuple[str, str], PlanTable] = {}
    matched: set[tuple[str, str]] = set()
    for e in project.tables:
        for src in _entry_sources(project, e):
            for (db, tbl), schema in project.seed_schemas.items():
                if project.route(src, db, tbl) is not e:
                    continue
                matched.add((db, tbl))
                t = _plan_table(project, e, src, schema, state)
                prev = tables.get((t.target, src))
                if prev is not None:  # a shard merge: one target, several upstream shards
                    t = replace(prev, upstream=f"{prev.upstream}, {t.upstream}")
                tables[(t.target, src)] = t
                if not t.keys:
                    warnings.append(
                        f"{schema.qualified}: no primary key or NOT NULL unique key and no `keys` in "
                        f"{e.origin.render()}: target {t.target} cannot be merged; set keys"
                    )
        if (
            not e.is_pattern
            and (e.upstream_db.lower(), e.upstream_table.lower()) not in project.seed_schemas
        ):
            warnings.append(
                f"no schema known for {e.upstream}; it will be created from the first CREATE TABLE "
                "or from protocol metadata (lossy)"
            )
        elif e.is_pattern and not any(e.matches(db, tbl) for db, tbl in project.seed_schemas):
            warnings.append(
                f"no schema known for tables matching {e.upstream}; they will be created from the "
                "first CREATE TABLE or from protocol metadata (lossy)"
            )
    for db, tbl in sorted(set(project.seed_schemas) - matched):
        warnings.append(
            f"schema/ defines {db}.{tbl} but no table entry routes it; it is not synced"
        )
    return Plan(
        project=project.name,
        target=out.name,
        output=output,
        defaults=defaults,
        sources=sources,
        routes=tuple(routes),
        tables=tuple(sorted(tables.values(), key=lambda t: (t.target, t.source))),
        pending=_pending(project, state),
        warnings=tuple(sorted(set(warnings))),
    )


# --------------------------------------------------------------------------- rendering


def render_json(plan: Plan) -> str:
    return json.dumps(plan.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line for line in text.splitlines())


def _kv(d: dict[str, Any]) -> str:
    return (
        ", ".join(
            f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in sorted(d.items())
        )
        or "-"
    )


def render_text(plan: Plan) -> str:
    lines: list[str] = [f"Plan for project {plan.project} (target {plan.target})", ""]
    o = plan.output
    lines += ["Output", f"  spark master: {o['spark_master']}"]
    if o["spark_conf"]:
        lines.append(f"  spark conf: {_kv(o['spark_conf'])}")
    if o["jars_dir"]:
        lines.append(f"  jars dir: {o['jars_dir']}")
    lines.append(f"  warehouse: {o['warehouse']}  (shown below as {WAREHOUSE_PLACEHOLDER})")
    tr = o["transport"]
    if tr["type"] == "files":
        lines.append(f"  transport: files from {tr['captures']}")
    else:
        lines.append(
            f"  transport: kafka {tr['bootstrap_servers']} (starting offsets {tr['starting_offsets']})"
        )
        if tr["options"]:
            lines.append(f"    options: {_kv(tr['options'])}")
    lines += ["", "Defaults", f"  on_bad_message: {plan.defaults['on_bad_message']}"]
    lines.append(f"  ddl: {_kv(plan.defaults['ddl'])}")

    lines += ["", f"Sources ({len(plan.sources)})"]
    for s in plan.sources:
        topics = ", ".join(s.topics) if s.topics else f"pattern {s.topic_pattern}"
        lines.append(f"  {s.name}: {s.protocol}, topics {topics}")
        lines.append(f"    options: {_kv(s.options)}")
        lines.append(f"    order: {s.order}")

    lines += ["", f"Routes ({len(plan.routes)}, first match wins)"]
    for r in plan.routes:
        keys = ", ".join(r.keys) if r.keys else "upstream primary key"
        extra = "  [shard merge]" if r.shard_merge else ""
        lines.append(
            f"  {r.upstream} -> {r.target}  source {r.source}, keys {keys}{extra}  ({r.origin})"
        )
        if r.ddl:
            lines.append(f"    ddl: {_kv(r.ddl)}")
        if r.on_bad_message:
            lines.append(f"    on_bad_message: {r.on_bad_message}")

    lines += ["", f"Tables ({len(plan.tables)})"]
    if not plan.tables:
        lines.append(
            "  (none known yet: add CREATE TABLE statements under schema/ to see them here)"
        )
    for t in plan.tables:
        state = f"applied up to {t.applied_ts}" if t.applied_ts is not None else "to create"
        lines += ["", f"  {t.target} <- {t.upstream} via {t.source}  [{state}]"]
        lines.append(f"    keys: {', '.join(t.keys) or '(none)'}  ({t.keys_from})")
        if t.ddl_policy:
            lines.append(f"    ddl: {_kv(t.ddl_policy)}")
        lines.append("    columns:")
        w = max(len(c.name) for c in t.columns)
        mw = max(len(c.mysql_type) for c in t.columns)
        for c in t.columns:
            null = "" if c.nullable else " NOT NULL"
            lines.append(f"      {c.name:<{w}}  {c.mysql_type:<{mw}} -> {c.delta_type}{null}")
        lossy = [c for c in t.columns if c.lossy]
        if lossy:
            lines.append("    lossy:")
            lines += [f"      {c.name}: {c.lossy}" for c in lossy]
        lines += ["    create:", _indent(t.create_sql, 6)]
        if t.merge_sql:
            lines += ["    merge (per window segment):", _indent(t.merge_sql, 6)]

    lines += ["", f"Pending DDL ({len(plan.pending)})"]
    if not plan.pending:
        lines.append("  (none)")
    for p in plan.pending:
        target = p.target or "(no target)"
        lines.append(
            f"  {p.commit_ts} {p.upstream} -> {target}: {p.kind} [{p.classification}], policy {p.action}"
        )
        lines.append(f"    {p.sql}")
        if p.delta:
            lines.append(f"    delta: {p.delta}")
        if p.blocked:
            lines.append(f"    BLOCKED: {p.blocked}")

    lines += ["", f"Warnings ({len(plan.warnings)})"]
    lines += [f"  - {w}" for w in plan.warnings] or ["  (none)"]
    creates = sum(1 for t in plan.tables if t.action == "create")
    lines += [
        "",
        f"Summary: {creates} to create, {len(plan.pending)} pending DDL, {len(plan.warnings)} warnings",
    ]
    return "\n".join(lines) + "\n"
