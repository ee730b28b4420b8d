"""Compile the project and the warehouse state into the Plan: every decision of a run, made once.

Routes, merge keys, the upstream DDL timeline of each source, each target's DDL with a
decision per change and its Delta commits, what is blocked and why, where each target's
rows stop: all of it is decided from the same inputs for `ticdc-sync plan` and
`ticdc-sync run` (which executes the Plan). This module puts the plan together per source
(tables, loads, timeline, inferred schemas, resolved TSO); one target's plan is `target`.
Pure Python: never imports pyspark, never writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ticdc_sync.codecs.infer import schema_from_meta
from ticdc_sync.core.model import Project, Source
from ticdc_sync.core.upstream import Key, TableSchema, Version, key
from ticdc_sync.ddl.timeline import Timeline
from ticdc_sync.ddl.timeline import build as build_timeline
from ticdc_sync.plan.loads import (
    Reloads,
    export_tables,
    gone_by,
    loaded_snapshot,
    plan_loads,
    with_snapshots,
)
from ticdc_sync.plan.model import Plan, SourcePlan, TargetPlan
from ticdc_sync.plan.project_parts import (
    defaults_dict,
    output_dict,
    override_dict,
    project_digest,
    route_dicts,
)
from ticdc_sync.plan.target import target_plan
from ticdc_sync.project import routing
from ticdc_sync.warehouse.locations import warehouse_path
from ticdc_sync.warehouse.state import SourceState, WarehouseState


def build_plan(
    project: Project,
    state: WarehouseState | None = None,
    *,
    reload: Sequence[str] = (),
    force: bool = False,
) -> Plan:
    """The plan of `project` over `state` (None: a warehouse no run has written yet).

    `reload`: target names (fnmatch globs) to load again from their source's export
    (`run --reload`); refused for a target that has applied changes after the export's
    snapshot unless `force`."""
    state = state or WarehouseState()
    warehouse = warehouse_path(project)
    warnings: list[str] = list(project.warnings)
    sources: list[SourcePlan] = []
    targets: list[TargetPlan] = []
    used_overrides: set[int] = set()
    reloads = Reloads(tuple(reload), force)
    for source in sorted(project.sources, key=lambda s: s.name):
        sp, tps = _source_plan(project, source, state, warehouse, warnings, reloads)
        sources.append(sp)
        targets.extend(tps)
        for g in sp.timeline.groups:
            used_overrides.update(id(o) for o in g.overrides)
    for o in project.ddl_overrides:
        if id(o) not in used_overrides:
            warnings.append(
                f"{o.origin.render()}: ddl_overrides: no staged DDL of {o.upstream} at "
                f"commit_ts {o.commit_ts} (yet); the override is unused"
            )
    reloads.check_all_matched(targets)
    return Plan(
        project=project.name,
        target=project.output.name,
        warehouse=warehouse,
        output=output_dict(project),
        defaults=defaults_dict(project),
        routes=tuple(route_dicts(project, warnings, export_tables(project, state))),
        overrides=tuple(override_dict(o) for o in project.ddl_overrides),
        sources=tuple(sources),
        targets=tuple(sorted(targets, key=lambda t: (t.name, t.source))),
        warnings=tuple(sorted(set(warnings))),
        project_digest=project_digest(project),
    )


# --------------------------------------------------------------------------- sources


def resolved_ts(source: Source, state: SourceState) -> int | None:
    """The resolved TSO of a source: the minimum over its partitions of the highest
    watermark (capped before an open bad record); None when nothing is staged; -1 when a
    partition has no watermark yet. Sources without commit_ts have no watermarks (codec
    facts 4.5): everything staged counts as resolved."""
    parts = state.tally.partitions
    if not parts:
        return None
    marks = [state.progress.get(k, p.progress_ts) for k, p in sorted(parts.items())]
    if source.has_commit_ts:
        return -1 if any(m is None for m in marks) else min(m for m in marks if m is not None)
    known = [m for m in marks if m is not None]
    return max(known) if known else -1


def _source_plan(
    project: Project,
    source: Source,
    state: WarehouseState,
    warehouse: str,
    warnings: list[str],
    reloads: Reloads,
) -> tuple[SourcePlan, list[TargetPlan]]:
    ss = state.source(source.name)
    tables = set(ss.tally.tables) | {
        (db, tbl) for db, tbl in project.seed_schemas if project.route(source.name, db, tbl)
    }
    if source.initial_load is not None and ss.export is not None:
        # A table whose schema file cannot be read too: its target is refused, with why.
        tables |= {
            (t.db, t.table)
            for t in (*ss.export.tables.values(), *ss.export.unreadable.values())
            if project.route(source.name, t.db, t.table)
        }
    grouped, skipped = routing.targets(project, source.name, sorted(tables))
    # The export's snapshot; once loaded, the schema history's record of it stands in for
    # an export that can no longer be read.
    snapshot = (
        None
        if source.initial_load is None
        else ss.export.snapshot_ts
        if ss.export is not None
        else loaded_snapshot(ss.recorded)
    )
    before_loads: list[Timeline] = []

    def before_load() -> Timeline:
        if not before_loads:
            before_loads.append(build_timeline(project, source.name, ss.ddl_events, ss.recorded))
        return before_loads[0]

    def absent(tr: routing.TargetRoute) -> bool:
        if snapshot is None:
            return False
        return gone_by(tr, before_load(), snapshot, ss.export)

    def not_at_snapshot(tr: routing.TargetRoute) -> bool:
        if snapshot is None or not tr.upstreams:
            return False
        return all(before_load().absent_at(db, t, snapshot) for db, t in tr.upstreams)

    loads, refused = plan_loads(
        project, source, ss, grouped, state, reloads, absent, not_at_snapshot
    )
    # A table loaded by this run is, at the export's snapshot, what the export's schema file
    # says: its DDL at or below the snapshot is in the export (and is skipped), the DDL after
    # it applies on top. Replays of the DDL before the snapshot may fail (the table's schema
    # before it is unknown): nothing of the table before the snapshot is applied or typed.
    recorded = with_snapshots(ss.recorded, loads.values())
    timeline = build_timeline(project, source.name, ss.ddl_events, recorded)
    inferred = _inferred(source, ss, grouped, timeline, recorded)
    if inferred:
        # Replayed again over the inferred schemas: an ALTER of a table whose CREATE was
        # never seen applies to the schema its rows' metadata describes.
        timeline = build_timeline(project, source.name, ss.ddl_events, recorded, inferred)
    resolved = resolved_ts(source, ss)
    notes: list[str] = []
    if not ss.tally_complete:
        notes.append("the newest staged batch is not counted yet (its watermarks and tables)")
    if resolved == -1:
        notes.append("no watermark on every partition yet; nothing is resolved")
    notes.extend(large_message_notes(source))
    # Row changes staged per upstream table, of all time: one map for all of its targets.
    staged_rows = {key(*t): rows for t, (rows, _) in ss.tally.tables.items()}
    staged_spans = {key(*t): span for t, span in ss.tally.spans.items()}
    plans = [
        target_plan(
            project,
            source,
            tr,
            timeline,
            state,
            resolved,
            warehouse,
            inferred,
            loads.get(tr.target),
            staged_rows,
            refused.get(tr.target),
            snapshot,
            staged_spans,
        )
        for tr in grouped.values()
    ]
    counts = ss.tally.tables
    sp = SourcePlan(
        source=source,
        resolved_ts=resolved,
        partitions=len(ss.tally.partitions),
        skipped=tuple((db, tbl, counts.get((db, tbl), (0, 0))[0]) for db, tbl in skipped),
        timeline=timeline,
        notes=tuple(notes),
        open_bad=bool(ss.open_bad),
    )
    for tp in plans:
        if not tp.keys and (tp.schema is not None or tp.create is not None):
            warnings.append(
                f"{tp.entry.origin.render()}: target {tp.name} has no merge keys (no primary "
                "key or NOT NULL unique key upstream); set `keys:` on the table entry"
            )
    return sp, plans


def _inferred(
    source: Source,
    ss: SourceState,
    grouped: dict[str, routing.TargetRoute],
    timeline: Timeline,
    recorded: dict[Key, list[Version]],
) -> dict[Key, TableSchema]:
    """Schemas from protocol metadata (lossy), for the routed tables that nothing else
    describes: no seed, no recorded version or export's schema (never guessed where one
    is exact), and no CREATE TABLE before their first DDL (their first DDL cannot be
    replayed, or there is none). Each table is judged on its own."""
    out: dict[Key, TableSchema] = {}
    for tr in grouped.values():
        for db, tbl in tr.upstreams:
            k = key(db, tbl)
            meta = ss.metadata.get(k)
            if meta is None or k in recorded:
                continue
            if timeline.known(db, tbl) and not _unreplayable(timeline, k):
                continue
            out[k] = schema_from_meta(db, tbl, meta[0], meta[1], source.protocol)
    return out


def _unreplayable(timeline: Timeline, k: Key) -> bool:
    """The first DDL of table `k` could not be replayed (no schema known before it)."""
    for g in timeline.groups:
        if any(key(e.db, e.tbl) == k for e in g.events) or any(e.touches(k) for e in g.effects):
            return g.problem is not None
    return False


def large_message_notes(source: Source) -> list[str]:
    """What a run does with the source's large messages (its large-message options,
    docs/kafka.md, Large messages)."""
    from ticdc_sync.core.model import Compression, LargeMessageHandle, Protocol

    o = source.options
    notes = []
    if o.large_message_handle_option is LargeMessageHandle.CLAIM_CHECK:
        notes.append(
            f"claim-check: each claim-check record is replaced by the message TiCDC wrote to "
            f"{o.claim_check_storage_uri}/<file name of its location>; one that cannot be "
            "read is a bad message"
        )
    if o.large_message_handle_option is LargeMessageHandle.HANDLE_KEY_ONLY:
        notes.append(
            "handle-key-only: such messages cannot be read (no TiDB to re-read the row at its "
            "commit_ts); each is a bad message"
        )
    if o.large_message_handle_compression is not Compression.NONE:
        what = "key and value" if source.protocol is Protocol.DEBEZIUM else "value"
        notes.append(
            f"every message's {what} is {o.large_message_handle_compression.value}-compressed "
            "and decompressed when decoded"
        )
    return notes
