"""Read the engine's state from the warehouse itself, without a JVM (`WarehouseState`).

The warehouse is the only truth (DESIGN.md §1): the staging table's tallies and DDL events,
the schema history, the quarantine, and each target's own commits. `plan` and `status`
read them here through `lake` (delta-rs), for a local path or an object store, so a plan
made on a CI machine that has only the warehouse sees what a run would see. A run reads
the same way, with the tallies it has just computed in Spark. Must not import pyspark and
never writes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ticdc_sync.codecs import dumpling_export as dumpling
from ticdc_sync.codecs.dumpling_export import Export
from ticdc_sync.core.events import KIND_BAD, KIND_DDL, KIND_ROW, KIND_WATERMARK
from ticdc_sync.core.lake import LakeTable
from ticdc_sync.core.model import Project
from ticdc_sync.core.staged import SourceTally, read_carried
from ticdc_sync.core.upstream import Key, TableSchema, Version, key
from ticdc_sync.core.window import DdlEvent, Marker, staged_order
from ticdc_sync.project import routing
from ticdc_sync.warehouse.locations import find_target, state_location
from ticdc_sync.warehouse.locations import warehouse_path as _warehouse_path
from ticdc_sync.warehouse.state import CatalogRecord, SourceState, TargetState, WarehouseState

# The schema history marks a dropped (or renamed-away) table with its last schema and this
# comment (written by older versions too).
DROPPED = "\x00ticdc_sync:dropped"


def read_state(
    project: Project,
    *,
    tallies: dict[str, SourceTally] | None = None,
    progress: dict[str, dict[tuple[str, int], int | None]] | None = None,
) -> WarehouseState:
    """The state of the project's warehouse. `tallies`/`progress`: a run's own, computed in
    Spark just after staging (a plan reads the saved ones)."""
    wh = _warehouse_path(project)
    exports = _exports(project)
    events = LakeTable(state_location(wh, "events"))
    if not events.exists():
        return WarehouseState(
            sources={
                s.name: SourceState(
                    name=s.name, export=exports[s.name][0], export_error=exports[s.name][1]
                )
                for s in project.sources
                if s.name in exports
            },
            targets=_targets(project, wh, {}, exports),
        )
    staging_version = events.version()
    complete = True
    if tallies is None:
        tallies, complete = _newest_tallies(events)
    ddl = _ddl_events(events)
    history = LakeTable(state_location(wh, "schema_history"))
    recorded = _recorded(history) if history.exists() else {}
    quarantine = LakeTable(state_location(wh, "quarantine"))
    sources: dict[str, SourceState] = {}
    for s in project.sources:
        tally = tallies.get(s.name, SourceTally())
        open_bad = _open_bad(events, quarantine, s.name) if tally.bad else {}
        prog = (progress or {}).get(s.name)
        if prog is None:
            prog = _capped(events, s.name, open_bad, s.has_commit_ts)
        sources[s.name] = SourceState(
            name=s.name,
            tally=tally,
            tally_complete=complete,
            ddl_events=tuple(ddl.get(s.name, ())),
            recorded=recorded.get(s.name, {}),
            metadata=_metadata(project, events, s.name, tally, recorded.get(s.name, {}), ddl),
            open_bad=open_bad,
            progress=prog,
            export=exports.get(s.name, (None, None))[0],
            export_error=exports.get(s.name, (None, None))[1],
        )
    return WarehouseState(
        sources=sources,
        targets=_targets(project, wh, {n: st.tally for n, st in sources.items()}, exports),
        staging_version=staging_version,
        history_version=history.version() if history.exists() else None,
    )


def _newest_tallies(events: LakeTable) -> tuple[dict[str, SourceTally], bool]:
    """The tallies the staging table's newest commit carries (`staged.Carried`), and whether
    they count that commit's own events (False for a commit of an earlier version, and for
    a catch-up batch's write until the commit of its tallies follows)."""
    carried = events.newest_user_metadata(read_carried)
    if carried is None:
        return {}, False
    return carried.sources, carried.complete


def _ddl_events(events: LakeTable) -> dict[str, list[DdlEvent]]:
    cols = [
        "source",
        "db",
        "tbl",
        "commit_ts",
        "ddl_sql",
        "ddl_hint",
        "table_changes",
        "topic",
        "partition",
        "offset",
    ]
    rows = events.read(cols, [("kind", "=", KIND_DDL)]).to_pylist()
    out: dict[str, list[DdlEvent]] = {}
    for r in sorted(rows, key=staged_order):
        out.setdefault(r["source"], []).append(DdlEvent.from_staged(r))
    return out


def recorded_history(
    project: Project, tables: Collection[Key] | None = None
) -> dict[str, dict[Key, list[Version]]]:
    """The schema history's versions per source, as `read_state` reads them (for a run that
    has just recorded some); `tables`: of those upstream tables only (the targets an apply
    ran: what it reads then does not grow with the tables the history holds)."""
    history = LakeTable(state_location(_warehouse_path(project), "schema_history"))
    return _recorded(history, tables) if history.exists() else {}


def _recorded(
    history: LakeTable, tables: Collection[Key] | None = None
) -> dict[str, dict[Key, list[Version]]]:
    """Recorded versions per source (rows of older versions without a source count for
    every source); `tables`: of those upstream tables only."""
    rows = history.read(["source", "db", "tbl", "commit_ts", "ddl", "schema_json"]).to_pylist()
    per: dict[str | None, dict[Key, dict[int, Version]]] = {}
    for r in rows:
        if tables is not None and key(r["db"], r["tbl"]) not in tables:
            continue  # (its schema's JSON is most of the cost: not parsed)
        schema = TableSchema.from_json(r["schema_json"])
        gone = schema.comment == DROPPED
        v = Version(r["commit_ts"], None if gone else schema, r["ddl"] or "")
        per.setdefault(r["source"], {}).setdefault(key(r["db"], r["tbl"]), {})[r["commit_ts"]] = v
    shared = per.pop(None, {})
    out: dict[str, dict[Key, list[Version]]] = {}
    for src, tables in per.items():
        merged = {k: dict(v) for k, v in shared.items()}
        for k, vs in tables.items():
            merged.setdefault(k, {}).update(vs)
        out[str(src)] = {
            k: sorted(v.values(), key=lambda x: x.commit_ts) for k, v in merged.items()
        }
    return out


def _open_bad(events: LakeTable, quarantine: LakeTable, source: str) -> dict[tuple[str, int], int]:
    """The first bad record per partition that is not in the quarantine."""
    bad = events.read(
        ["topic", "partition", "offset", "idx"], [("source", "=", source), ("kind", "=", KIND_BAD)]
    ).to_pylist()
    done: set[tuple[str, int, int, int]] = set()
    if bad and quarantine.exists():
        done = {
            (r["topic"], r["partition"], r["offset"], r["idx"])
            for r in quarantine.read(
                ["topic", "partition", "offset", "idx"], [("source", "=", source)]
            ).to_pylist()
        }
    out: dict[tuple[str, int], int] = {}
    for r in bad:
        if (r["topic"], r["partition"], r["offset"], r["idx"]) in done:
            continue
        k = (r["topic"], r["partition"])
        out[k] = min(out.get(k, r["offset"]), r["offset"])
    return out


def _capped(
    events: LakeTable, source: str, open_bad: dict[tuple[str, int], int], exact: bool
) -> dict[tuple[str, int], int | None]:
    """Each partition with an open bad record: its progress strictly before that record."""
    out: dict[tuple[str, int], int | None] = {}
    for (topic, part), first_bad in sorted(open_bad.items()):
        where = [
            ("source", "=", source),
            ("topic", "=", topic),
            ("partition", "=", part),
            ("offset", "<", first_bad),
        ]
        if exact:
            where.append(("kind", "=", KIND_WATERMARK))
        else:
            where += [("kind", "in", [KIND_ROW, KIND_DDL]), ("exact_ts", "=", False)]
        ts = events.read(["commit_ts"], where).column("commit_ts").to_pylist()
        out[(topic, part)] = max((t for t in ts if t is not None), default=None)
    return out


def _metadata(
    project: Project,
    events: LakeTable,
    source: str,
    tally: SourceTally,
    recorded: dict[Key, list[Version]],
    ddl: dict[str, list[DdlEvent]],
) -> dict[Key, tuple[dict[str, str], tuple[str, ...]]]:
    """Protocol column metadata of the first row (in commit order) that has some, of each
    routed table without a seed or a recorded version, for inferring its schema where its
    DDL does not give one (the plan decides: `plan.build._inferred`)."""
    seeded = {key(db, t) for db, t in project.seed_schemas}
    out: dict[Key, tuple[dict[str, str], tuple[str, ...]]] = {}
    for db, tbl in sorted(tally.tables):
        k = key(db, tbl)
        if k in seeded or k in recorded or routing.route(project, source, db, tbl) is None:
            continue
        first = _first_meta(events, source, db, tbl)
        if first is None:
            continue
        meta = first["col_meta"]
        pairs = meta if isinstance(meta, list) else list(meta.items())
        out[k] = (dict(pairs), tuple(first["pk_names"] or ()))
    return out


_POSITION = ("commit_ts", "partition", "offset", "idx")


def _first_meta(events: LakeTable, source: str, db: str, tbl: str) -> dict | None:
    """The first row event of a table (by commit_ts, then position) among those that carry
    column metadata: {col_meta, pk_names}, or None.

    Found by its position first (delta-rs orders the narrow position columns and returns one
    row), then only that row's metadata is read: bringing every row of the table into
    Python made the plan of a large catch-up slow (benchmarks/README.md). Should that row
    carry no metadata, every row is read and the first that does is taken."""
    where = [("source", "=", source), ("kind", "=", KIND_ROW), ("db", "=", db), ("tbl", "=", tbl)]
    found = events.read(list(_POSITION), where, order_by=_POSITION, limit=1).to_pylist()
    if not found:
        return None
    if all(found[0][c] is not None for c in _POSITION):
        at = [(c, "=", found[0][c]) for c in _POSITION]
        rows = events.read(["col_meta", "pk_names"], where + at, limit=1).to_pylist()
        if rows and rows[0]["col_meta"]:
            return rows[0]
    rows = events.read(["col_meta", "pk_names", *_POSITION], where).to_pylist()
    rows = [r for r in rows if r["col_meta"]]
    return min(rows, key=lambda r: tuple(r[c] for c in _POSITION)) if rows else None


def _exports(project: Project) -> dict[str, tuple[Export | None, str | None]]:
    """Each `initial_load` source's export (`dumpling.discover`), or why it cannot be read."""
    out: dict[str, tuple[Export | None, str | None]] = {}
    for s in project.sources:
        if s.initial_load is None:
            continue
        try:
            out[s.name] = (dumpling.discover_for(project, s.initial_load), None)
        except dumpling.ExportError as e:
            out[s.name] = (None, str(e))
    return out


def _targets(
    project: Project,
    wh: str,
    tallies: dict[str, SourceTally],
    exports: dict[str, tuple[Export | None, str | None]],
) -> dict[str, TargetState]:
    names: set[str] = set()
    for s in project.sources:
        tables = set(tallies.get(s.name, SourceTally()).tables) | set(project.seed_schemas)
        export = exports.get(s.name, (None, None))[0]
        if export is not None:
            tables |= {(t.db, t.table) for t in export.tables.values()}
        grouped, _ = routing.targets(project, s.name, sorted(tables))
        names |= set(grouped)
    records = catalog_records(wh) if project.output.catalog is not None else {}
    return {
        n: replace(target_state(n, _find(wh, n)), catalog=records.get(n)) for n in sorted(names)
    }


# The state table of catalog steps (`spark.apply.catalog_sync` appends to it).
CATALOG_TABLE = "catalog"


def catalog_records(wh: str) -> dict[str, CatalogRecord]:
    """Each target's newest catalog record (the row with the highest `seq`)."""
    t = LakeTable(state_location(wh, CATALOG_TABLE))
    if not t.exists():
        return {}
    rows = t.read(["target", "name", "location", "state", "seq"]).to_pylist()
    out: dict[str, tuple[int, CatalogRecord]] = {}
    for r in rows:
        have = out.get(r["target"])
        if have is None or r["seq"] > have[0]:
            out[r["target"]] = (r["seq"], CatalogRecord(r["name"], r["location"], r["state"]))
    return {k: v for k, (_, v) in out.items()}


def _find(wh: str, name: str) -> str:
    return find_target(wh, name, lambda loc: LakeTable(loc).exists())


def target_state(name: str, location: str) -> TargetState:
    """One target's Delta table: whether it exists, its marker, columns and features."""
    t = LakeTable(location)
    if not t.exists():
        return TargetState(name, exists=False, location=location)
    proto = t.protocol()
    partition_by, cluster_by = t.layout()
    return TargetState(
        name=name,
        exists=True,
        location=location,
        marker=t.newest_user_metadata(Marker.from_user_metadata) or Marker(),
        columns=tuple((n, typ) for n, typ in t.schema() if n != "_commit_ts"),
        reader_features=tuple(sorted(proto.reader_features)),
        writer_features=tuple(sorted(proto.table_features())),
        properties=tuple(sorted(proto.configuration.items())),
        description=proto.description,
        version=t.version(),
        data_bytes=t.data_bytes(),
        partition_by=partition_by,
        cluster_by=cluster_by,
    )
