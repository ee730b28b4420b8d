"""Compile the project and the warehouse state into the Plan: every decision of a run, made once.

Routes, merge keys, the upstream DDL timeline of each source, each target's DDL with a
decision per change and its Delta commits, what is blocked and why, where each target's
rows stop: all of it is decided from the same inputs for `ticdc-sync plan` and
`ticdc-sync run` (which executes the Plan). This module puts the plan together per source
(tables, loads, timeline, inferred schemas, resolved TSO); one target's plan is `target`.

A run plans again after each stage and apply it folds (`Planner`): a source whose state
changed by no more than an apply does (its targets' states, and schema versions recorded
that its timeline holds already) keeps its parts, and only the targets whose state changed
are planned again, each by the same `target_plan` a whole plan calls: the work after an
apply does not grow with the number of tables. Pure Python: never imports pyspark, never
writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from ticdc_sync.codecs.infer import schema_from_meta
from ticdc_sync.core.model import Project, Source
from ticdc_sync.core.staged import SourceTally
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
from ticdc_sync.plan.target_ddl import GroupIndex
from ticdc_sync.project import routing
from ticdc_sync.warehouse.locations import warehouse_path
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState


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
    return Planner(project).plan(state, reload=reload, force=force)


@dataclass
class _SourceParts:
    """What one source's plan was made of, and its targets' plans (`Planner`)."""

    ss: SourceState | None  # the state it was planned from (None: the source had none)
    sp: SourcePlan
    timeline: Timeline
    inferred: dict[Key, TableSchema]
    args: tuple  # the rest of `target_plan`'s arguments, the same for every target
    routes: dict[str, routing.TargetRoute]
    loads: dict
    refused: dict[str, str]
    plans: dict[str, TargetPlan] = field(default_factory=dict)
    # target -> the state it was planned from (None: it had none)
    made_from: dict[str, TargetState | None] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)  # target -> its warning
    overrides: set[int] = field(default_factory=set)  # the DDL overrides its timeline used
    index: GroupIndex | None = None  # which of its timeline's groups concern which target
    _by_table: dict[Key, list[str]] | None = None

    def by_table(self) -> dict[Key, list[str]]:
        """The targets of each upstream table."""
        if self._by_table is None:
            self._by_table = {}
            for name, tr in self.routes.items():
                for db, tbl in tr.upstreams:
                    self._by_table.setdefault(key(db, tbl), []).append(name)
        return self._by_table


class Planner:
    """`build_plan` made again and again over one project as the state changes (a run's
    loop), each time the same plan a whole `build_plan` makes, re-deciding only what the
    change touches.

    States are compared by identity (the loop replaces what a stage or an apply changed):
    a source whose state is the one last planned keeps its parts; one whose state differs
    in its recorded schema versions only, each of them a version its timeline holds already
    (an apply records what its plan replayed; such a timeline replays to itself), keeps
    them too; any other change plans the source again. Within a kept source, only the
    targets whose state changed are planned again. A source with an `initial_load` decides
    its loads again (they read every target's state): kept where they are the same. A plan
    with `--reload` is planned whole."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.warehouse = warehouse_path(project)
        self._parts: dict[str, _SourceParts] = {}
        self._routes: tuple[tuple, tuple[dict, ...], list[str]] | None = None
        self._fixed: dict | None = None
        # (source, target) in the plan's order, for the sources planned in it
        self._order: tuple[tuple[str, tuple[str, ...]], list[tuple[str, str]]] | None = None
        self.target_plans = 0  # `target_plan` calls made (what a re-plan cost)

    def plan(
        self,
        state: WarehouseState | None = None,
        *,
        reload: Sequence[str] = (),
        force: bool = False,
    ) -> Plan:
        project = self.project
        state = state or WarehouseState()
        reloads = Reloads(tuple(reload), force)
        whole = bool(reload) or force
        if whole:
            self._parts.clear()  # planned whole from here until a plan without them
        warnings: list[str] = list(project.warnings)
        sources: list[SourcePlan] = []
        parts_of: dict[str, _SourceParts] = {}
        used_overrides: set[int] = set()
        for source in sorted(project.sources, key=lambda s: s.name):
            old = None if whole else self._parts.pop(source.name, None)
            # (Taken out while it changes: a plan that fails leaves nothing half made.)
            parts = self._kept(old, source, state)
            if parts is None:
                parts = self._source_parts(source, state, reloads)
            if not whole:
                self._parts[source.name] = parts
            sources.append(parts.sp)
            parts_of[source.name] = parts
            warnings.extend(parts.warnings.values())
            used_overrides |= parts.overrides
        for o in project.ddl_overrides:
            if id(o) not in used_overrides:
                warnings.append(
                    f"{o.origin.render()}: ddl_overrides: no staged DDL of {o.upstream} at "
                    f"commit_ts {o.commit_ts} (yet); the override is unused"
                )
        targets = self._in_order(parts_of)
        reloads.check_all_matched(targets)
        if self._fixed is None:
            self._fixed = {
                "project": project.name,
                "target": project.output.name,
                "warehouse": self.warehouse,
                "output": output_dict(project),
                "defaults": defaults_dict(project),
                "overrides": tuple(override_dict(o) for o in project.ddl_overrides),
                "project_digest": project_digest(project),
            }
        return Plan(
            **self._fixed,
            routes=self._route_dicts(state, warnings),
            sources=tuple(sources),
            targets=tuple(targets),
            warnings=tuple(sorted(set(warnings))),
        )

    def _in_order(self, parts_of: dict[str, _SourceParts]) -> list[TargetPlan]:
        """Every target's plan, by name then source; the order is sorted again only when
        the targets are not the last plan's."""
        names = tuple((src, tuple(p.plans)) for src, p in parts_of.items())
        if self._order is None or self._order[0] != names:
            pairs = sorted((name, src) for src, p in parts_of.items() for name in p.plans)
            self._order = (names, [(src, name) for name, src in pairs])
        return [parts_of[src].plans[name] for src, name in self._order[1]]

    def _route_dicts(self, state: WarehouseState, warnings: list[str]) -> tuple[dict, ...]:
        """The routes as the plan shows them; made again only when an export changed."""
        exports = tuple(state.source(s.name).export for s in self.project.sources)
        if self._routes is None or any(
            a is not b for a, b in zip(self._routes[0], exports, strict=True)
        ):
            said: list[str] = []
            routes = tuple(route_dicts(self.project, said, export_tables(self.project, state)))
            self._routes = (exports, routes, said)
        warnings.extend(self._routes[2])
        return self._routes[1]

    def _kept(
        self, old: _SourceParts | None, source: Source, state: WarehouseState
    ) -> _SourceParts | None:
        """`old` brought to `state` where what changed is only what an apply changes (the
        targets planned again), else None (the source is planned again)."""
        if old is None:
            return None
        ss = state.sources.get(source.name)
        grown: set[Key] | None = set()
        if ss is not old.ss:
            if ss is None:
                return None
            grown = _recorded_grown(old, ss)
            if grown is None:
                return None
        targets = state.targets
        changed = [name for name, was in old.made_from.items() if targets.get(name) is not was]
        if grown:
            by_table = old.by_table()
            again = {n for k in grown for n in by_table.get(k, ())} - set(changed)
            changed += sorted(again)
        if source.initial_load is not None and (changed or ss is not old.ss):
            # Its loads read its targets' states (and its snapshot, once loaded, the
            # recorded versions): decided again, the source is kept where they are the same.
            now = state.source(source.name)
            snapshot = _snapshot(source, now)
            if snapshot != old.args[1]:
                return None
            loads = self._loads(source, now, old.routes, state, Reloads((), False), snapshot)
            if loads != (old.loads, old.refused):
                return None
        old.ss = ss
        for name in changed:
            self._target(old, source, name, state)
        return old

    def _source_parts(
        self,
        source: Source,
        state: WarehouseState,
        reloads: Reloads,
    ) -> _SourceParts:
        project = self.project
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
        snapshot = _snapshot(source, ss)
        loads, refused = self._loads(source, ss, grouped, state, reloads, snapshot)
        # A table loaded by this run is, at the export's snapshot, what the export's schema
        # file says: its DDL at or below the snapshot is in the export (and is skipped), the
        # DDL after it applies on top. Replays of the DDL before the snapshot may fail (the
        # table's schema before it is unknown): nothing of the table before the snapshot is
        # applied or typed.
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
        parts = _SourceParts(
            ss=state.sources.get(source.name),
            sp=sp,
            timeline=timeline,
            inferred=inferred,
            args=(resolved, snapshot, *_staged_maps(ss.tally)),
            routes=grouped,
            loads=loads,
            refused=refused,
            overrides={id(o) for g in timeline.groups for o in g.overrides},
            index=GroupIndex(self.project, source.name, timeline),
        )
        for name in grouped:
            self._target(parts, source, name, state)
        return parts

    def _loads(
        self,
        source: Source,
        ss: SourceState,
        grouped: dict[str, routing.TargetRoute],
        state: WarehouseState,
        reloads: Reloads,
        snapshot: int | None,
    ) -> tuple[dict, dict[str, str]]:
        """The source's loads and the loads refused (`plan_loads`)."""
        project = self.project
        before_loads: list[Timeline] = []

        def before_load() -> Timeline:
            if not before_loads:
                before_loads.append(
                    build_timeline(project, source.name, ss.ddl_events, ss.recorded)
                )
            return before_loads[0]

        def absent(tr: routing.TargetRoute) -> bool:
            if snapshot is None:
                return False
            return gone_by(tr, before_load(), snapshot, ss.export)

        def not_at_snapshot(tr: routing.TargetRoute) -> bool:
            if snapshot is None or not tr.upstreams:
                return False
            return all(before_load().absent_at(db, t, snapshot) for db, t in tr.upstreams)

        return plan_loads(project, source, ss, grouped, state, reloads, absent, not_at_snapshot)

    def _target(
        self, parts: _SourceParts, source: Source, name: str, state: WarehouseState
    ) -> None:
        """Plan target `name` of `parts`' source over `state`, with its warning."""
        resolved, snapshot, staged_rows, staged_spans = parts.args
        self.target_plans += 1
        tp = target_plan(
            self.project,
            source,
            parts.routes[name],
            parts.timeline,
            state,
            resolved,
            self.warehouse,
            parts.inferred,
            parts.loads.get(name),
            staged_rows,
            parts.refused.get(name),
            snapshot,
            staged_spans,
            parts.index.of(parts.routes[name]) if parts.index is not None else None,
        )
        parts.plans[name] = tp
        parts.made_from[name] = state.targets.get(name)
        parts.warnings.pop(name, None)
        if not tp.keys and (tp.schema is not None or tp.create is not None):
            parts.warnings[name] = (
                f"{tp.entry.origin.render()}: target {tp.name} has no merge keys (no primary "
                "key or NOT NULL unique key upstream); set `keys:` on the table entry"
            )


def _snapshot(source: Source, ss: SourceState) -> int | None:
    """The export's snapshot; once loaded, the schema history's record of it stands in for
    an export that can no longer be read."""
    if source.initial_load is None:
        return None
    return ss.export.snapshot_ts if ss.export is not None else loaded_snapshot(ss.recorded)


def _staged_maps(
    tally: SourceTally,
) -> tuple[dict[Key, int], dict[Key, tuple[int, int]]]:
    """Row changes staged per upstream table, of all time, and their lowest and highest
    commit_ts: one map each for all of the source's targets."""
    rows = {key(*t): n for t, (n, _) in tally.tables.items()}
    spans = {key(*t): span for t, span in tally.spans.items()}
    return rows, spans


def _recorded_grown(old: _SourceParts, ss: SourceState) -> set[Key] | None:
    """The tables whose recorded schema versions `ss` adds to `old`'s, where that is all
    that differs and each added version is one `old`'s timeline holds already (and no
    table's inferred schema gives way to it); else None."""
    was = old.ss
    if was is None:
        return None
    for f in fields(SourceState):
        if f.name != "recorded" and getattr(ss, f.name) is not getattr(was, f.name):
            return None
    grown: set[Key] = set()
    for k, versions in ss.recorded.items():
        before = was.recorded.get(k, [])
        if versions == before:
            continue
        held = old.timeline.versions.get(k, [])
        if k in old.inferred or any(v not in versions for v in before):
            return None
        if any(v not in held for v in versions):
            return None
        grown.add(k)
    if any(k not in ss.recorded for k in was.recorded):
        return None
    return grown


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
