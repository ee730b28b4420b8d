"""One target's plan: where it is, what it is created from (an export, the DDL history, a
seed, or inferred metadata), its merge keys, columns and table features, its DDL with
decisions, and where its rows stop.

With an initial load, everything at or below the export's snapshot is the export's: a target
loaded from it starts there, and so does one whose tables are not in the export because the
stream dropped or renamed them away at or before the snapshot (nothing to create or load). A
target whose load is refused (`plan.loads`) gets no schema from anywhere else: it is blocked
with the reason.

Called once per routed target by `build`. Decides from the inputs it is given; never
reads the warehouse or project files itself, never writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ticdc_sync.codecs.dumpling_export import data_columns
from ticdc_sync.core import datatypes
from ticdc_sync.core.model import Project, Source, TableFeatures
from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.core.upstream import Key, TableSchema, key
from ticdc_sync.ddl import changes as ch
from ticdc_sync.ddl.timeline import DdlGroup, Timeline
from ticdc_sync.plan import layout
from ticdc_sync.plan import properties as entry_properties
from ticdc_sync.plan import table_features as tf
from ticdc_sync.plan.catalog import catalog_entry
from ticdc_sync.plan.catalog import place as place_catalog
from ticdc_sync.plan.columns import next_columns
from ticdc_sync.plan.features import (
    create_properties,
    feature_setting_parts,
    features_added,
    with_create_properties,
)
from ticdc_sync.plan.loads import gone_by
from ticdc_sync.plan.maintenance import notes as upkeep_notes
from ticdc_sync.plan.model import (
    BLOCKED,
    OP_CREATE,
    DeltaPart,
    Halt,
    Load,
    Properties,
    Staged,
    TargetDdl,
    TargetPlan,
    snapshot_marker,
)
from ticdc_sync.plan.modes import extra_columns, mode_mismatch
from ticdc_sync.plan.steps import target_steps
from ticdc_sync.plan.target_ddl import target_ddl
from ticdc_sync.plan.write_path import features_then
from ticdc_sync.project import routing
from ticdc_sync.warehouse.locations import target_location
from ticdc_sync.warehouse.state import TargetState, WarehouseState


def target_plan(
    project: Project,
    source: Source,
    tr: routing.TargetRoute,
    timeline: Timeline,
    state: WarehouseState,
    resolved: int | None,
    warehouse: str,
    inferred: dict[Key, TableSchema],
    load: Load | None,
    staged_rows: Mapping[Key, int],
    refused: str | None = None,
    snapshot: int | None = None,
    staged_spans: Mapping[Key, tuple[int, int]] | None = None,
    groups: Sequence[DdlGroup] | None = None,
) -> TargetPlan:
    """`snapshot`: the source's export snapshot TSO (None: no initial load, or not known).
    `staged_rows`/`staged_spans`: per upstream table, the row changes staged of all time and
    their lowest and highest commit_ts (the tallies). `groups`: the timeline's DDL groups
    that may concern the target (`target_ddl.GroupIndex`; None: all)."""
    ts_ = state.target(tr.target)
    marker = ts_.marker
    location = ts_.location or target_location(warehouse, tr.target)
    settings = project.table_features(tr.entry)
    mode, mode_from = project.mode(tr.entry)
    if refused is None and ts_.exists:
        refused = mode_mismatch(mode, mode_from, ts_.columns)
    if refused is not None:
        return replace(
            _refused(tr, source, ts_, location, settings, refused), mode=mode, mode_from=mode_from
        )
    mode_cols = extra_columns(mode)
    own = {n.lower() for n, _ in mode_cols}
    notes: list[str] = []
    il = source.initial_load
    from_snapshot: int | None = None
    if il is not None and tr.entry.initial_load and load is None and not ts_.exists:
        export = state.source(source.name).export
        if snapshot is not None and gone_by(tr, timeline, snapshot, export):
            from_snapshot = snapshot
            names = ", ".join(f"{db}.{t}" for db, t in tr.upstreams)
            notes.append(
                f"not in the Dumpling export {il.dumpling}: {names} did not exist at its "
                f"snapshot {from_snapshot} (dropped or renamed away at or before it): starts "
                "from the snapshot, so nothing of it before the snapshot is applied"
            )
        else:
            notes.append(
                f"not in the Dumpling export {il.dumpling}: starts from the changefeed (its "
                "CREATE TABLE, or a schema/*.sql seed)"
            )
    # Rows and DDL continue from the load's snapshot when the target is loaded first (or
    # from the snapshot its tables were gone by).
    if load is not None:
        start = load.marker
    elif from_snapshot is not None:
        start = snapshot_marker(from_snapshot)
    else:
        start = marker
    ref = table_ref(location)
    lo = max(start.applied_ts, 0)
    schema = next(
        (s for s in (timeline.at(db, tbl, lo) for db, tbl in tr.upstreams) if s is not None), None
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
    # What `table_features: auto` decides by: the target's bytes when planned (a load's
    # export's, when the target is loaded first).
    data_bytes = ts_.data_bytes if ts_.exists and not (load is not None and load.reload) else 0
    if load is not None:
        data_bytes = max(data_bytes, load.bytes)
    ddl = target_ddl(
        project,
        source,
        tr,
        timeline,
        will_exist,
        start,
        resolved,
        ref,
        notes,
        staged_rows,
        data_bytes=data_bytes,
        features=ts_.features,
        groups=groups,
        layout=layout.columns(tr.entry, ts_),
    )
    create, create_from = None, None
    if not ts_.exists and schema is not None:
        # The entry's `comment` replaces the upstream table's, as the table's description.
        create = schema if tr.entry.comment is None else replace(schema, comment=tr.entry.comment)
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
    entry = tr.entry
    partition_by, cluster_by = ts_.partition_by, ts_.cluster_by
    if not ts_.exists:
        partition_by = layout.resolved(entry.partition_by, keyed)
        cluster_by = layout.resolved(entry.cluster_by, keyed)
    # A layout names columns of the table: of each schema it is created with.
    created = [keyed, *(p.schema for d in ddl for p in d.parts if p.op == OP_CREATE)]
    bad = next((why for s in created if (why := layout.refusal(entry, s)) is not None), None)
    relayout = layout.change(entry, ts_, schema)
    if relayout is not None:
        # The target takes the entry's layout first: the layout its rows land in.
        partition_by, cluster_by = relayout.partition_by, relayout.cluster_by
    creates = any(p.op == OP_CREATE for d in ddl for p in d.parts)
    if bad is not None and (not ts_.exists or creates or relayout is not None):
        return replace(
            _refused(tr, source, ts_, location, settings, bad), mode=mode, mode_from=mode_from
        )
    keys, keys_from = routing.merge_keys(tr.entry, keyed) if keyed else ((), "none")
    blocked = next((d for d in ddl if d.status == BLOCKED), None)
    stop: int | None = None
    if resolved is not None and resolved >= 0:
        stop = resolved if blocked is None else min(resolved, blocked.commit_ts - 1)
    if load is not None and load.reload and schema is not None:
        columns = tuple((c.name, datatypes.delta_type(c)) for c in schema.columns)
    elif ts_.exists:
        # The mode's columns are shown apart (`mode_columns`).
        columns = tuple(c for c in ts_.columns if c[0].lower() not in own)
    elif create is not None:
        columns = tuple((c.name, datatypes.delta_type(c)) for c in create.columns)
    else:
        columns = ()
    feature_parts: tuple[DeltaPart, ...] = ()
    names = tuple(n for n, _ in ts_.columns)
    if ts_.exists:
        features = ts_.features
        if marker.ddl_part < marker.ddl_parts - 1:
            # A DDL is half applied: its remaining parts were planned with the features the
            # table has now (a column-mapped rename needs column mapping).
            if feature_setting_parts(features, settings, ref, names, data_bytes):
                notes.append(
                    f"table features follow `table_features` once the DDL at commit_ts "
                    f"{marker.ddl_ts} is applied"
                )
        else:
            feature_parts = feature_setting_parts(features, settings, ref, names, data_bytes)
        have = set(features_then(features, feature_parts))
    else:
        features = tf.created_with(columns, settings) if create else ()
        if cluster_by and create:
            features = tuple(sorted({*features, *layout.CLUSTERING_FEATURES}))
        have = set(features)
        if cluster_by:
            have |= set(layout.CLUSTERING_FEATURES)
    ddl = with_create_properties(
        features_added(ddl, have, settings),
        settings,
        entry.properties,
        entry.comment,
        layout.resolved(entry.partition_by, keyed),
        layout.resolved(entry.cluster_by, keyed),
    )
    lag_ms, lag_from = project.target_lag(tr.entry)
    rewrite_below, rewrite_from = project.rewrite_below(tr.entry)
    maintenance = project.maintenance(tr.entry)
    notes += upkeep_notes(maintenance)
    if (why := entry_properties.spark_writers_why(entry)) is not None:
        notes.append(
            f"{why}: its rows land by the MERGE only; a reader without the table feature it "
            "adds cannot read the target"
        )
    plan = TargetPlan(
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
        lag_ms=lag_ms,
        lag_from=lag_from,
        from_snapshot=from_snapshot,
        on_bad_message=project.bad_message_policy(tr.entry),
        mode=mode,
        mode_from=mode_from,
        mode_columns=mode_cols,
        data_bytes=data_bytes,
        features_then=tuple(sorted(have)),
        rewrite_below=rewrite_below,
        rewrite_from=rewrite_from,
        staged=_staged(tr.upstreams, staged_rows, staged_spans or {}),
        maintenance=maintenance,
        partition_by=partition_by,
        cluster_by=cluster_by,
        relayout=relayout,
        reprops=entry_properties.change(entry, ts_, ref),
    )
    plan = replace(plan, catalog=catalog_entry(project, plan, ts_))
    props = create_properties(create, settings, entry.properties) if create is not None else ()
    return with_steps(plan, timeline, props)


def with_steps(t: TargetPlan, timeline: Timeline, properties: Properties = ()) -> TargetPlan:
    """`t` with what follows from its DDL and where its rows stop: its steps (`properties`:
    the TBLPROPERTIES it is created with) and its columns after the run."""
    t = replace(t, steps=target_steps(t, timeline, properties), next_columns=next_columns(t))
    return place_catalog(t)


def _refused(
    tr: routing.TargetRoute,
    source: Source,
    ts_: TargetState,
    location: str,
    settings: TableFeatures,
    reason: str,
) -> TargetPlan:
    """A target whose load is impossible: nothing created, loaded or applied."""
    t = TargetPlan(
        name=tr.target,
        source=source.name,
        entry=tr.entry,
        upstreams=tr.upstreams,
        location=location,
        exists=ts_.exists,
        marker=ts_.marker,
        keys=(),
        keys_from="none",
        schema=None,
        create=None,
        create_from=None,
        columns=ts_.columns,
        features=ts_.features,
        ddl=(),
        stop_ts=None,
        blocked=reason,
        settings=settings,
        refused=reason,
        steps=(Halt(reason),),
    )
    return replace(t, next_columns=next_columns(t))


def _staged(
    upstreams: tuple[tuple[str, str], ...],
    rows: Mapping[Key, int],
    spans: Mapping[Key, tuple[int, int]],
) -> tuple[Staged, ...]:
    out = []
    for db, tbl in upstreams:
        lo, hi = spans.get(key(db, tbl), (None, None))
        out.append(Staged(db, tbl, rows.get(key(db, tbl), 0), lo, hi))
    return tuple(out)


def _first_created(ddl: list[TargetDdl]) -> TableSchema | None:
    for d in ddl:
        for s in d.steps:
            if isinstance(s.change, ch.CreateTarget):
                return s.change.schema
    return None
