"""Compile the project and the warehouse state into the Plan: every decision of a run, made once.

Routes, merge keys, the upstream DDL timeline of each source, each target's DDL with a
decision per change and its Delta commits, what is blocked and why, where each target's
rows stop: all of it is decided here, from the same inputs for `ticdc-sync plan` and
`ticdc-sync run` (which executes the Plan). Pure Python: never imports pyspark, never writes.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ticdc_sync import datatypes, routing
from ticdc_sync import table_features as tf
from ticdc_sync.codecs.infer import schema_from_meta
from ticdc_sync.ddl import changes as ch
from ticdc_sync.ddl import policy
from ticdc_sync.ddl.delta_sql import delta_sql
from ticdc_sync.ddl.timeline import DdlGroup, Key, TableEffect, Timeline, Version, key
from ticdc_sync.ddl.timeline import build as build_timeline
from ticdc_sync.dumpling import Export, data_columns
from ticdc_sync.errors import PlanError
from ticdc_sync.locations import target_location, warehouse_path
from ticdc_sync.model import DdlKind, Project, Source, TableEntry, TransportKind
from ticdc_sync.plan.model import (
    BLOCKED,
    HELD,
    OP_BACKFILL,
    OP_COPY_FROM,
    OP_CREATE,
    OP_REBUILD,
    OP_RECORD,
    OP_SQL,
    READY,
    WAITING,
    ChangeStep,
    DeltaPart,
    Load,
    LoadTable,
    Plan,
    SourcePlan,
    TargetDdl,
    TargetPlan,
)
from ticdc_sync.secrets import IN_PLANS, redacted
from ticdc_sync.sqlgen import quote, sql_string, table_ref
from ticdc_sync.upstream import TableSchema
from ticdc_sync.warehouse_state import SourceState, WarehouseState
from ticdc_sync.window import Marker


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
    reloads = _Reloads(tuple(reload), force)
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
        output=_output(project),
        defaults=_defaults(project),
        routes=tuple(_routes(project, warnings, _export_tables(project, state))),
        overrides=tuple(_override_dict(o) for o in project.ddl_overrides),
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
    reloads: _Reloads,
) -> tuple[SourcePlan, list[TargetPlan]]:
    ss = state.source(source.name)
    tables = set(ss.tally.tables) | {
        (db, tbl) for db, tbl in project.seed_schemas if project.route(source.name, db, tbl)
    }
    if source.initial_load is not None and ss.export is not None:
        tables |= {
            (t.db, t.table)
            for t in ss.export.tables.values()
            if project.route(source.name, t.db, t.table)
        }
    grouped, skipped = routing.targets(project, source.name, sorted(tables))
    loads = _loads(project, source, ss, grouped, state, reloads)
    timeline = build_timeline(
        project, source.name, ss.ddl_events, _with_snapshots(ss.recorded, loads.values())
    )
    inferred = _inferred(source, ss, grouped, timeline)
    if inferred:
        # Replayed again over the inferred schemas: an ALTER of a table whose CREATE was
        # never seen applies to the schema its rows' metadata describes.
        timeline = build_timeline(project, source.name, ss.ddl_events, ss.recorded, inferred)
    resolved = resolved_ts(source, ss)
    notes: list[str] = []
    if not ss.tally_complete:
        notes.append("the newest staged batch is not counted yet (its watermarks and tables)")
    if resolved == -1:
        notes.append("no watermark on every partition yet; nothing is resolved")
    plans = [
        _target_plan(
            project,
            source,
            tr,
            timeline,
            state,
            resolved,
            warehouse,
            inferred,
            loads.get(tr.target),
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
    source: Source, ss: SourceState, grouped: dict[str, routing.TargetRoute], timeline: Timeline
) -> dict[Key, TableSchema]:
    """Schemas from protocol metadata (lossy), for the routed tables that nothing else
    describes: no seed, no recorded version, and no CREATE TABLE before their first DDL
    (their first DDL cannot be replayed, or there is none)."""
    out: dict[Key, TableSchema] = {}
    for tr in grouped.values():
        for db, tbl in tr.upstreams:
            k = key(db, tbl)
            meta = ss.metadata.get(k)
            if meta is None or (timeline.known(db, tbl) and not _unreplayable(timeline, k)):
                continue
            out[k] = schema_from_meta(db, tbl, meta[0], meta[1], source.protocol)
    return out


def _unreplayable(timeline: Timeline, k: Key) -> bool:
    """The first DDL of table `k` could not be replayed (no schema known before it)."""
    for g in timeline.groups:
        if any(key(e.db, e.tbl) == k for e in g.events) or any(e.touches(k) for e in g.effects):
            return g.problem is not None
    return False


# --------------------------------------------------------------------------- targets


def _target_plan(
    project: Project,
    source: Source,
    tr: routing.TargetRoute,
    timeline: Timeline,
    state: WarehouseState,
    resolved: int | None,
    warehouse: str,
    inferred: dict[Key, TableSchema],
    load: Load | None,
) -> TargetPlan:
    ts_ = state.target(tr.target)
    marker = ts_.marker
    # Rows and DDL continue from the load's snapshot when the target is loaded first.
    start = load.marker if load is not None else marker
    location = ts_.location or target_location(warehouse, tr.target)
    ref = table_ref(location)
    lo = max(start.applied_ts, 0)
    schema = next(
        (s for s in (timeline.at(db, tbl, lo) for db, tbl in tr.upstreams) if s is not None), None
    )
    notes: list[str] = []
    settings = project.table_features(tr.entry)
    il = source.initial_load
    if il is not None and tr.entry.initial_load and load is None and not ts_.exists:
        notes.append(
            f"not in the Dumpling export {il.dumpling}: starts from the changefeed (its "
            "CREATE TABLE, or a schema/*.sql seed)"
        )
    for lt in load.tables if load is not None else ():
        left_out = [c.name for c in lt.schema.columns if c.name not in data_columns(lt.schema)]
        if left_out:
            notes.append(
                f"generated column(s) {', '.join(left_out)} of {lt.db}.{lt.table} are not in "
                "a Dumpling export: loaded rows hold NULL there until their next change"
            )
    # A target created from a known schema exists before its first DDL.
    will_exist = ts_.exists or schema is not None
    ddl = _target_ddl(project, source, tr, timeline, will_exist, start, resolved, ref, notes)
    create, create_from = None, None
    if not ts_.exists and schema is not None:
        create = schema
        k = next(key(db, tbl) for db, tbl in tr.upstreams if timeline.at(db, tbl, lo) is not None)
        if load is not None:
            create_from = "export"
        elif k in timeline.versions:
            create_from = "history"
        elif k in inferred:
            create_from = "inferred"
            notes.append(
                f"no DDL or schema/*.sql for {schema.qualified}: columns inferred from "
                f"{source.protocol.value} metadata (lossy: lengths and enum members may be unknown)"
            )
        else:
            create_from = "seed"
    keyed = schema or create or _first_created(ddl)
    keys, keys_from = routing.merge_keys(tr.entry, keyed) if keyed else ((), "none")
    blocked = next((d for d in ddl if d.status == BLOCKED), None)
    stop: int | None = None
    if resolved is not None and resolved >= 0:
        stop = resolved if blocked is None else min(resolved, blocked.commit_ts - 1)
    if load is not None and load.reload and schema is not None:
        columns = tuple((c.name, datatypes.delta_type(c)) for c in schema.columns)
    elif ts_.exists:
        columns = ts_.columns
    elif create is not None:
        columns = tuple((c.name, datatypes.delta_type(c)) for c in create.columns)
    else:
        columns = ()
    feature_parts: tuple[DeltaPart, ...] = ()
    if ts_.exists:
        features = ts_.features
        if marker.ddl_part < marker.ddl_parts - 1:
            # A DDL is half applied: its remaining parts were planned with the features the
            # table has now (a column-mapped rename needs column mapping).
            if _feature_parts(features, settings, ref):
                notes.append(
                    f"table features follow `table_features` once the DDL at commit_ts "
                    f"{marker.ddl_ts} is applied"
                )
        else:
            feature_parts = _feature_parts(features, settings, ref)
        have = set(features) - {p.feature_dropped for p in feature_parts}
        have |= {f for p in feature_parts if p.feature for f in tf.enabled_by(p.feature)}
    else:
        features = tf.created_with((t for _, t in columns), settings) if create else ()
        have = set(features)
    ddl = _features_added(ddl, have, settings)
    return TargetPlan(
        name=tr.target,
        source=source.name,
        entry=tr.entry,
        upstreams=tr.upstreams,
        location=location,
        exists=ts_.exists,
        marker=marker,
        keys=tuple(keys),
        keys_from=keys_from,
        schema=schema,
        create=create,
        create_from=create_from,
        columns=columns,
        features=features,
        ddl=tuple(ddl),
        stop_ts=stop,
        blocked=(
            f"blocked at commit_ts {blocked.commit_ts} by DDL `{blocked.sql}`: {blocked.reason}"
            if blocked
            else None
        ),
        notes=tuple(notes),
        settings=settings,
        feature_parts=feature_parts,
        load=load,
    )


def _feature_parts(features: tuple[str, ...], settings, ref: str) -> tuple[DeltaPart, ...]:
    """Commits that bring an existing target's table features to its `table_features`
    setting, in both directions: a feature the setting keeps off is dropped, deletion
    vectors switched on again are enabled (column mapping and type widening come with the
    DDL that needs them)."""
    parts = [
        DeltaPart(
            f"drop table feature {f} ({tf.DROP_COST[f]}; `table_features`)",
            OP_SQL,
            tf.drop_sql(f, ref),
            tolerate=tf.DROP_DONE,
            feature_dropped=f,
        )
        for f in tf.unwanted(features, settings)
    ]
    parts += [
        DeltaPart(
            f"enable table feature {f} (`table_features`)", OP_SQL, tf.enable_sql(f, ref), feature=f
        )
        for f in tf.missing(features, settings)
    ]
    return tuple(parts)


def _features_added(ddl: list[TargetDdl], have: set[str], settings) -> list[TargetDdl]:
    """Each DDL with the table features it adds to the target (those it has not got by then:
    the enabling part is in every such DDL, so that part numbers stay stable on resume)."""
    out = []
    for d in ddl:
        added: list[str] = []
        for p in d.parts:
            if p.feature:
                new = [f for f in tf.enabled_by(p.feature) if f not in have]
                added += new
                have |= set(new)
            if p.op == OP_CREATE and p.schema is not None:
                cols = (datatypes.delta_type(c) for c in p.schema.columns)
                have |= set(tf.created_with(cols, settings))
        out.append(_with(d, features_added=tuple(sorted(set(added)))) if added else d)
    return out


# --------------------------------------------------------------------------- initial loads


@dataclass
class _Reloads:
    """`--reload` patterns, and which of them matched a target."""

    patterns: tuple[str, ...]
    force: bool
    matched: set[str] | None = None

    def wants(self, name: str) -> bool:
        hit = [p for p in self.patterns if fnmatch.fnmatchcase(name, p)]
        if hit:
            self.matched = (self.matched or set()) | set(hit)
        return bool(hit)

    def check_all_matched(self, targets: list[TargetPlan]) -> None:
        missing = [p for p in self.patterns if p not in (self.matched or set())]
        if missing:
            names = ", ".join(sorted(t.name for t in targets)) or "none"
            raise PlanError(
                f"--reload {' '.join(missing)} matches no target (targets: {names}) (hint: "
                "`ticdc-sync plan` lists them; globs like 'canal_*' work)"
            )


def _loads(
    project: Project,
    source: Source,
    ss: SourceState,
    grouped: dict[str, routing.TargetRoute],
    state: WarehouseState,
    reloads: _Reloads,
) -> dict[str, Load]:
    """The targets of `source` loaded from its Dumpling export by this run: those whose
    marker shows nothing applied yet (never loaded, or a load that did not commit) and whose
    upstream tables are in the export, and those `--reload` names."""
    il = source.initial_load
    if il is not None and ss.export is None and ss.export_error is None:
        return {}  # a plan without the warehouse's state (no export read): no loads
    if il is not None and ss.export is None:
        # Which tables the export holds is unknown: only a source whose targets are all
        # loaded already can go on without it.
        started = [
            state.target(tr.target)
            for tr in grouped.values()
            if tr.entry.initial_load and state.target(tr.target).exists
        ]
        if (
            not started
            or any(t.marker == Marker() for t in started)
            or len(started) < len([tr for tr in grouped.values() if tr.entry.initial_load])
        ):
            raise _unreadable(source, ss, "its targets are not all loaded yet")
    out: dict[str, Load] = {}
    for name, tr in sorted(grouped.items()):
        wanted = reloads.wants(name)
        if il is None or not tr.entry.initial_load:
            if wanted:
                why = (
                    f"source {source.name} has no `initial_load`"
                    if il is None
                    else f"its table entry ({tr.entry.origin.render()}) sets initial_load: false"
                )
                raise PlanError(f"--reload {name}: the target is not loaded from an export: {why}")
            continue
        ts_ = state.target(name)
        if not (wanted or not ts_.exists or ts_.marker == Marker()):
            continue  # loaded already, or following the changefeed
        export = ss.export
        if export is None:
            raise _unreadable(source, ss, f"target {name} may need loading from it")
        tables = [t for t in (export.table(db, tbl) for db, tbl in tr.upstreams) if t]
        if not tables:
            if wanted:
                raise PlanError(
                    f"--reload {name}: the export {export.shown} holds none of its upstream "
                    f"tables ({', '.join(f'{db}.{t}' for db, t in tr.upstreams)})"
                )
            continue
        applied = ts_.marker.applied_ts
        if wanted and ts_.exists and applied > export.snapshot_ts and not reloads.force:
            raise PlanError(
                f"--reload {name}: the target has applied changes up to commit_ts {applied}, "
                f"after the export's snapshot {export.snapshot_ts}; a reload puts it back to "
                "the snapshot, and only the changes still staged are applied again (hint: add "
                "--force to reload anyway, or load a newer export)"
            )
        out[name] = Load(
            export=export.shown,
            location=export.location,
            snapshot_ts=export.snapshot_ts,
            options=il.options,
            tables=tuple(
                LoadTable(t.db, t.table, t.schema, t.schema_file, t.files) for t in tables
            ),
            reload=wanted and ts_.exists,
        )
    return out


def _unreadable(source: Source, ss: SourceState, why: str) -> PlanError:
    il = source.initial_load
    assert il is not None
    return PlanError(
        f"source {source.name}: {why}, but the Dumpling export of its initial_load "
        f"({il.origin.render()}) cannot be read: {ss.export_error}"
    )


def _with_snapshots(
    recorded: dict[Key, list[Version]], loads: Iterable[Load]
) -> dict[Key, list[Version]]:
    """The recorded schema history plus, for the tables loaded by this run, their version
    at the export's snapshot (the load records it; DDL after the snapshot applies on top)."""
    out = {k: list(v) for k, v in recorded.items()}
    for load in loads:
        for t in load.tables:
            k = key(t.db, t.table)
            versions = [v for v in out.get(k, []) if v.commit_ts != load.snapshot_ts]
            versions.append(Version(load.snapshot_ts, t.schema, snapshot_ddl(load, t)))
            out[k] = sorted(versions, key=lambda v: v.commit_ts)
    return out


def snapshot_ddl(load: Load, t: LoadTable) -> str:
    """The schema history's DDL text for a table's version at an export's snapshot."""
    return f"-- initial load: {load.export}/{t.schema_file}"


def _export_tables(project: Project, state: WarehouseState) -> set[tuple[str, str]]:
    """(db, table) of every table the sources' exports describe (lower-cased)."""
    out: set[tuple[str, str]] = set()
    for s in project.sources:
        export: Export | None = state.source(s.name).export
        if s.initial_load is not None and export is not None:
            out |= set(export.tables)
    return out


def _first_created(ddl: list[TargetDdl]) -> TableSchema | None:
    for d in ddl:
        for s in d.steps:
            if isinstance(s.change, ch.CreateTarget):
                return s.change.schema
    return None


def _target_ddl(
    project: Project,
    source: Source,
    tr: routing.TargetRoute,
    timeline: Timeline,
    exists: bool,
    marker,
    resolved: int | None,
    ref: str,
    notes: list[str],
) -> list[TargetDdl]:
    """The DDL groups that concern target `tr`, oldest first, each with its decisions."""
    out: list[TargetDdl] = []
    held_by: TargetDdl | None = None
    touched = {key(db, t) for db, t in tr.upstreams}
    for g in timeline.groups:
        part = _Part.of(project, source.name, tr.target, g)
        keyed_here = any(key(e.db, e.tbl) in touched for e in g.events)
        if part.empty and not (g.problem and keyed_here) and not _skipped_here(g, touched):
            continue
        if marker.ddl_done(g.commit_ts):
            continue
        d = _decide_group(project, tr, g, part, ref, exists)
        done = marker.parts_done(g.commit_ts)
        if done and d.status != BLOCKED and len(d.parts) != marker.ddl_parts:
            # Half applied under other settings (a policy or `table_features` changed in
            # between): resuming at part `done` of a different list of commits would skip
            # or repeat a change.
            d = _with(
                d,
                status=BLOCKED,
                reason=f"half applied ({done} of its {marker.ddl_parts} Delta commits) under "
                f"other settings, which now give it {len(d.parts)} commits",
                setting="the `ddl` and `table_features` settings this DDL started with (as "
                "they were at that run), until it is applied",
            )
        if held_by is not None:
            d = _with(
                d, status=HELD, reason=f"after the blocked DDL at commit_ts {held_by.commit_ts}"
            )
        elif d.status == BLOCKED:
            held_by = d
        elif resolved is None or g.commit_ts > resolved:
            d = _with(
                d, status=WAITING, reason="beyond the resolved TSO (no watermark past it yet)"
            )
        out.append(_with(d, parts_done=done) if done else d)
    return out


def _skipped_here(g: DdlGroup, touched: set[Key]) -> bool:
    """A group whose only event for this target was skipped by an override (no effects)."""
    return any(key(*o.upstream.split(".", 1)) in touched for o in g.overrides)


@dataclass(frozen=True)
class _Part:
    """How one DDL group concerns one target. Renames that move a table from one target to
    another are taken net over the group (a -> tmp, b -> a, tmp -> b is a swap of a and b;
    tmp is never involved), so the order of the renames inside it cannot matter."""

    own: tuple[TableEffect, ...]  # effects on this target's tables that stay in it
    incoming: tuple[tuple[str | None, TableEffect], ...]  # (from target, effect): rows move in
    outgoing: tuple[str, ...]  # where this target's table went (a target, or not routed)

    @property
    def empty(self) -> bool:
        return not (self.own or self.incoming or self.outgoing)

    @staticmethod
    def of(project: Project, source: str, target: str, g: DdlGroup) -> _Part:
        def tgt(name: tuple[str, str] | None) -> str | None:
            return routing.target_of(project, source, *name) if name else None

        def moves(e: TableEffect) -> bool:
            return (
                e.old is not None
                and e.new is not None
                and key(*e.old) != key(*e.new)
                and tgt(e.old) != tgt(e.new)
            )

        own = tuple(e for e in g.effects if not moves(e) and target in (tgt(e.old), tgt(e.new)))
        incoming: list[tuple[str | None, TableEffect]] = []
        outgoing: list[str] = []
        for old_key, new_name in sorted(g.renames().items()):
            old_name = next(e.old for e in g.effects if e.old and key(*e.old) == old_key)
            src, dst = tgt(old_name), tgt(new_name)
            if src == dst:
                continue
            if dst == target and new_name is not None:
                last = [e for e in g.effects if e.new and key(*e.new) == key(*new_name)][-1]
                incoming.append((src, last))
            if src == target:
                where = f"{new_name[0]}.{new_name[1]} (not routed)" if new_name else "gone"
                outgoing.append(dst or where)
        return _Part(own, tuple(incoming), tuple(outgoing))


def _with(d: TargetDdl, **changes: Any) -> TargetDdl:
    from dataclasses import replace

    return replace(d, **changes)


def _decide_group(
    project: Project,
    tr: routing.TargetRoute,
    g: DdlGroup,
    part: _Part,
    ref: str,
    exists: bool,
) -> TargetDdl:
    entry = tr.entry
    effects = [*part.own, *(e for _, e in part.incoming)]
    mine = {key(*u) for u in tr.upstreams}
    names = {f"{n[0]}.{n[1]}" for e in effects for n in (e.old, e.new) if n is not None}
    names |= {f"{e.db}.{e.tbl}" for e in g.events if key(e.db, e.tbl) in mine}
    upstreams = tuple(sorted(names))
    if g.problem:
        problem = g.problem.split(" (hint: ")[0]
        return TargetDdl(
            g.commit_ts,
            g,
            upstreams,
            (),
            (_record_part(ref, g.commit_ts),),
            BLOCKED,
            reason=f"cannot replay the DDL: {problem}",
            setting="a schema/*.sql seed for the table, or a `ddl_overrides` entry for this DDL",
        )
    steps: list[ChangeStep] = []
    for e in part.own:
        for c in e.changes:
            decision = policy.decide(project, entry, c)
            steps.append(ChangeStep(c, decision, tuple(_parts(c, decision, ref))))
    rename_from: str | None = None
    for src, e in part.incoming:
        assert e.new is not None
        c = ch.RenameTarget(*e.new)
        decision = policy.decide(project, entry, c)
        rename_from = src or ""
        steps.append(ChangeStep(c, decision, _rename_in(decision, e, src, ref, g)))
    renamed_to = part.outgoing[0] if part.outgoing else None
    if renamed_to is not None:
        c = ch.RenameTarget("", renamed_to)
        decision = policy.decide(project, entry, c)
        # With rows moving in as well (a swap), the replace that brings them clears these.
        moved = () if part.incoming else _rename_out(decision, renamed_to, ref)
        steps.append(ChangeStep(c, decision, moved))
    blocked = next((s.decision for s in steps if s.decision.blocks), None)
    parts = tuple(p for s in steps for p in s.parts) or (_record_part(ref, g.commit_ts),)
    additive = (
        exists
        and blocked is None
        and not part.incoming
        and not part.outgoing
        and bool(steps)
        and all(_is_additive(s) for s in steps)
        and all(_same_key(e) for e in part.own)
    )
    return TargetDdl(
        commit_ts=g.commit_ts,
        group=g,
        upstreams=upstreams,
        steps=tuple(steps),
        parts=parts,
        status=BLOCKED if blocked else READY,
        reason=blocked.reason if blocked else None,
        setting=blocked.setting if blocked else None,
        rename_from=rename_from or None,
        renamed_to=renamed_to,
        additive=additive,
    )


# Changes that leave every existing column as it is: rows on both sides of such a DDL can
# share one MERGE (window.fuse_additive). SetDefault affects future upstream inserts only.
def _is_additive(s: ChangeStep) -> bool:
    c, d = s.change, s.decision
    if d.action == policy.NONE:
        return True
    if d.action != policy.APPLY:
        return False
    return isinstance(c, (ch.AddColumn, ch.NoOp, ch.SetDefault))


def _same_key(e: TableEffect) -> bool:
    if e.before is None or e.after is None:
        return False
    return e.before.handle_key() == e.after.handle_key()


def _record_part(ref: str, ts: int) -> DeltaPart:
    return DeltaPart(
        "record the DDL",
        OP_RECORD,
        f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.last_ddl_ts' = {sql_string(str(ts))})",
    )


def _rebuild(change: ch.DeltaChange, what: str, ref: str) -> list[DeltaPart]:
    """The table rewritten with the change, in one commit (no table feature needed)."""
    if isinstance(change, ch.ChangeColumnType):
        out = []
        if "TIMESTAMP_NTZ" in change.new_type.upper():
            # Delta wants this feature enabled by hand before such a column is written.
            out.append(
                DeltaPart(
                    "enable table feature timestampNtz",
                    OP_SQL,
                    f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')",
                )
            )
        return [*out, DeltaPart(what, OP_REBUILD, column=change.name, new_type=change.new_type)]
    if isinstance(change, ch.RenameColumn):
        return [DeltaPart(what, OP_REBUILD, column=change.old, new_name=change.new)]
    if isinstance(change, ch.DropColumn):
        return [DeltaPart(what, OP_REBUILD, column=change.name, drop_column=True)]
    raise AssertionError(f"no rebuild for {change!r}")  # policy.decide never asks for one


def _parts(change: ch.DeltaChange, decision: policy.Decision, ref: str) -> list[DeltaPart]:
    """The Delta commits that carry out one decided change on the target `ref`."""
    what = decision.describe
    if decision.action in (policy.SKIP, policy.NONE, policy.BLOCK):
        return []
    if decision.action == policy.REBUILD:
        return _rebuild(change, what, ref)
    if isinstance(change, ch.CreateTarget):
        return [DeltaPart(what, OP_CREATE, schema=change.schema)]
    if isinstance(change, ch.DropTarget):
        # Rows go; the Delta table and its history stay (time travel; crash-safe).
        return [
            DeltaPart(what, OP_SQL, f"DELETE FROM {ref}"),
            DeltaPart(
                "mark dropped",
                OP_SQL,
                f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.dropped' = 'true')",
            ),
        ]
    statements = delta_sql(change, ref)
    out: list[DeltaPart] = []
    if decision.feature is not None:
        # Always planned, enabled or not, so that part numbers stay stable on resume; it is
        # idempotent. Its own commit, like every part, so a crash after it resumes with
        # the change.
        out.append(
            DeltaPart(
                f"enable table feature {decision.feature}",
                OP_SQL,
                tf.enable_sql(decision.feature, ref),
                feature=decision.feature,
            )
        )
    tolerate: tuple[str, ...] = ()
    if isinstance(change, ch.AddColumn):
        tolerate = ("already exists", "FIELDS_ALREADY_EXISTS")
    elif isinstance(change, ch.DropColumn):
        tolerate = ("does not exist", "cannot be resolved", "FIELD_NOT_FOUND", "Cannot drop")
    for i, sql in enumerate(statements):
        backfill = (
            isinstance(change, ch.AddColumn)
            and change.backfill_sql is not None
            and i == len(statements) - 1
        )
        if backfill:
            out.append(DeltaPart(what, OP_BACKFILL, sql))
        elif "timestampNtz" in sql:
            out.append(DeltaPart("enable table feature timestampNtz", OP_SQL, sql))
        else:
            out.append(DeltaPart(what, OP_SQL, sql, tolerate=tolerate))
    return out


def _rename_in(
    decision: policy.Decision, e: TableEffect, old_target: str | None, ref: str, g: DdlGroup
) -> tuple[DeltaPart, ...]:
    """RENAME onto this target's upstream table from another target's: created from the
    renamed schema, then that target's rows as of just before the rename are copied in."""
    if decision.action != policy.APPLY or e.after is None:
        return ()
    assert e.old is not None
    parts = [
        DeltaPart(f"create target for renamed {e.old[0]}.{e.old[1]}", OP_CREATE, schema=e.after)
    ]
    if old_target:
        parts.append(
            DeltaPart(
                f"copy the rows of target {old_target} as of commit_ts {g.commit_ts - 1}",
                OP_COPY_FROM,
                source_target=old_target,
            )
        )
    parts.append(
        DeltaPart(
            "mark renamed",
            OP_SQL,
            f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.renamed_from' = "
            f"{sql_string(old_target or f'{e.old[0]}.{e.old[1]}')})",
        )
    )
    return tuple(parts)


def _rename_out(decision: policy.Decision, renamed_to: str, ref: str) -> tuple[DeltaPart, ...]:
    """This target's upstream table was renamed to another target's (or to a table no entry
    routes): its rows leave with it."""
    if decision.action != policy.APPLY:
        return ()
    return (
        DeltaPart(f"rows moved to {renamed_to}", OP_SQL, f"DELETE FROM {ref}"),
        DeltaPart(
            "mark renamed",
            OP_SQL,
            f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.renamed_to' = "
            f"{sql_string(renamed_to)})",
        ),
    )


# --------------------------------------------------------------------------- project parts


def project_digest(project: Project) -> str:
    """SHA-256 over the project's own files (names and bytes), as committed to git: what a
    saved plan was made from. Environment values are not in it (a CI plan and a production
    run interpolate different ones)."""
    root = Path(project.root)
    h = hashlib.sha256()
    files: list[Path] = [root / "ticdc_sync.yml", root / "profiles.yml"]
    for folder, pattern in (("sources", "*.y*ml"), ("tables", "*.y*ml"), ("schema", "*.sql")):
        files.extend(sorted((root / folder).glob(pattern)))
    for f in files:
        if f.is_file():
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


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


def _output(project: Project) -> dict[str, Any]:
    out = project.output
    transport: dict[str, Any] = {"type": out.transport.kind.value}
    if out.transport.kind is TransportKind.FILES:
        transport["captures"] = display_location(project, out.transport.captures or "captures")
    else:
        transport["bootstrap_servers"] = out.transport.bootstrap_servers
        transport["starting_offsets"] = out.transport.starting_offsets
        transport["options"] = redacted(out.transport.kafka_options, IN_PLANS)
    return {
        "spark_master": out.spark_master,
        "spark_conf": redacted(out.spark_conf, IN_PLANS),
        "jars_dir": display_location(project, out.jars_dir) if out.jars_dir else None,
        "warehouse": display_location(project, out.warehouse),
        "transport": transport,
    }


def _defaults(project: Project) -> dict[str, Any]:
    return {
        "ddl": {
            k.value: v.value
            for k, v in sorted(project.defaults.ddl.items(), key=lambda kv: kv[0].value)
        },
        "on_bad_message": project.defaults.on_bad_message.value,
    }


def policy_diff(project: Project, entry: TableEntry) -> dict[str, str]:
    """The DDL policies of an entry that differ from the project defaults."""
    return {
        k.value: project.ddl_policy(entry, k).value
        for k in sorted(DdlKind, key=lambda k: k.value)
        if k in entry.ddl and entry.ddl[k] != project.defaults.ddl.get(k)
    }


def _routes(
    project: Project, warnings: list[str], exported: set[tuple[str, str]]
) -> Iterable[dict[str, Any]]:
    from ticdc_sync.project import is_shard_merge

    for e in project.tables:  # declaration order: routes match first-wins
        shard = is_shard_merge(e)
        yield {
            "upstream": e.upstream,
            "target": e.name,
            "source": e.source or "*",
            "keys": list(e.keys),
            "shard_merge": shard,
            "origin": e.origin.render(),
            "ddl": policy_diff(project, e),
            "on_bad_message": e.on_bad_message.value if e.on_bad_message else None,
            "ignore_columns": list(e.ignore_columns),
        }
        if shard:
            warnings.append(
                f"{e.origin.render()}: route {e.upstream} -> {e.name} merges shards: keys of a "
                "shard-merged route must be unique across shards"
            )
        seeded = [k for k in (*project.seed_schemas, *exported) if e.matches(*k)]
        if not e.is_pattern and not seeded:
            warnings.append(
                f"no schema known for {e.upstream}; it will be created from the first CREATE TABLE "
                "or from protocol metadata (lossy)"
            )
        elif e.is_pattern and not seeded:
            warnings.append(
                f"no schema known for tables matching {e.upstream}; they will be created from the "
                "first CREATE TABLE or from protocol metadata (lossy)"
            )
    for db, tbl in sorted(project.seed_schemas):
        if not any(project.route(s.name, db, tbl) for s in project.sources):
            warnings.append(
                f"schema/ defines {db}.{tbl} but no table entry routes it; it is not synced"
            )


def _override_dict(o) -> dict[str, Any]:
    return {
        "upstream": o.upstream,
        "commit_ts": o.commit_ts,
        "action": o.action.value,
        "sql": o.sql,
        "source": o.source,
        "note": o.note,
        "origin": o.origin.render(),
    }


def quote_ident(name: str) -> str:
    return quote(name)
