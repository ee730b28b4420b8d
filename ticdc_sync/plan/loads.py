"""Initial loads in the plan: which targets this run loads from their source's Dumpling
export (first loads and `--reload`), and the schema versions those loads record at the
export's snapshot.

Refuses (`PlanError`) what cannot be loaded exactly: an unreadable export a target still
needs, a `--reload` that matches nothing or would lose applied changes. A target one of
whose tables has a schema file that cannot be read is refused on its own, with the reason
(the plan shows it blocked; the run fails it and goes on with the others). Never reads the
export itself (`dumpling` did) and never writes.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ticdc_sync.codecs.dumpling_export import Export
from ticdc_sync.core.errors import PlanError
from ticdc_sync.core.model import Project, Source
from ticdc_sync.core.upstream import Key, Version, key
from ticdc_sync.core.window import Marker
from ticdc_sync.ddl.timeline import Timeline
from ticdc_sync.plan.model import Load, LoadTable, TargetPlan
from ticdc_sync.project import routing
from ticdc_sync.warehouse.state import SourceState, WarehouseState


@dataclass
class Reloads:
    """`--reload` patterns, and which of them matched a target."""

    patterns: tuple[str, ...]
    force: bool
    matched: set[str] | None = None

    def wants(self, name: str) -> bool:
        hit = [p for p in self.patterns if fnmatch.fnmatchcase(name, p)]
        if hit:
            self.matched = (self.matched or set()) | set(hit)
        return bool(hit)

    def only_globs(self, name: str) -> bool:
        """Whether every pattern naming target `name` is a glob (none names it exactly)."""
        return all(
            any(ch in p for ch in "*?[") for p in self.patterns if fnmatch.fnmatchcase(name, p)
        )

    def check_all_matched(self, targets: list[TargetPlan]) -> None:
        missing = [p for p in self.patterns if p not in (self.matched or set())]
        if missing:
            names = ", ".join(sorted(t.name for t in targets)) or "none"
            raise PlanError(
                f"--reload {' '.join(missing)} matches no target (targets: {names}) (hint: "
                "`ticdc-sync plan` lists them; globs like 'canal_*' work)"
            )


def plan_loads(
    project: Project,
    source: Source,
    ss: SourceState,
    grouped: dict[str, routing.TargetRoute],
    state: WarehouseState,
    reloads: Reloads,
    absent: Callable[[routing.TargetRoute], bool] = lambda _: False,
    not_at_snapshot: Callable[[routing.TargetRoute], bool] = lambda _: False,
) -> tuple[dict[str, Load], dict[str, str]]:
    """The targets of `source` loaded from its Dumpling export by this run: those whose
    marker shows nothing applied yet (never loaded, or a load that did not commit) and whose
    upstream tables are in the export, and those `--reload` names. Second: the targets that
    would load but cannot, each with why (a table's schema file cannot be read).

    `absent(route)`: whether a target's tables were gone by the snapshot (`gone_by`); asked
    only when the export cannot be read, as such a target needs nothing from it.
    `not_at_snapshot(route)`: whether none of a target's tables existed at the snapshot
    (`Timeline.absent_at`: gone, or created or renamed in after it); asked of a target
    `--reload` matches whose tables the export holds none of: a glob passes over it (it
    has nothing to reload), its own name is refused saying so."""
    il = source.initial_load
    refused: dict[str, str] = {}
    if il is not None and ss.export is None and ss.export_error is None:
        return {}, refused  # a plan without the warehouse's state (no export read): no loads
    if il is not None and ss.export is None:
        # Which tables the export holds is unknown: only a source whose targets are all
        # loaded already can go on without it.
        needed = [tr for tr in grouped.values() if tr.entry.initial_load and not absent(tr)]
        started = [state.target(tr.target) for tr in needed if state.target(tr.target).exists]
        if not started or any(t.marker == Marker() for t in started) or len(started) < len(needed):
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
        if export is None and not wanted and not ts_.exists and absent(tr):
            continue  # its tables were gone by the snapshot: nothing to load
        if export is None:
            raise _unreadable(source, ss, f"target {name} may need loading from it")
        broken = [
            export.unreadable[k] for k in (key(*u) for u in tr.upstreams) if k in export.unreadable
        ]
        if broken:
            # Never from another schema (the stream's metadata guessed, a replay of its DDL):
            # the export's is the only exact one at the snapshot.
            names = ", ".join(f"{u.db}.{u.table}" for u in broken)
            why = "; ".join(u.why.split(" (hint: ")[0] for u in broken)
            reason = (
                f"cannot load {names} from the Dumpling export {export.shown}: {why} (hint: "
                "export the table again, or correct its schema file to the table's SHOW CREATE "
                "TABLE at the snapshot; nothing of this target is created, loaded or applied "
                "until then)"
            )
            if wanted:
                raise PlanError(f"--reload {name}: {reason}")
            refused[name] = reason
            continue
        tables = [t for t in (export.table(db, tbl) for db, tbl in tr.upstreams) if t]
        if not tables:
            if wanted and not_at_snapshot(tr):
                if reloads.only_globs(name):
                    continue  # a glob over targets: this one holds nothing at the snapshot
                raise PlanError(
                    f"--reload {name}: none of its upstream tables "
                    f"({', '.join(f'{db}.{t}' for db, t in tr.upstreams)}) existed at the "
                    f"export's snapshot TSO {export.snapshot_ts} (the staged DDL creates, "
                    "renames or drops them): the export holds nothing to reload it from "
                    "(hint: leave it out of --reload)"
                )
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
    return out, refused


def _unreadable(source: Source, ss: SourceState, why: str) -> PlanError:
    il = source.initial_load
    assert il is not None
    return PlanError(
        f"source {source.name}: {why}, but the Dumpling export of its initial_load "
        f"({il.origin.render()}) cannot be read: {ss.export_error}"
    )


def with_snapshots(
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


# How the schema history marks a table's version at an export's snapshot.
SNAPSHOT_DDL = "-- initial load: "


def snapshot_ddl(load: Load, t: LoadTable) -> str:
    """The schema history's DDL text for a table's version at an export's snapshot."""
    return f"{SNAPSHOT_DDL}{load.export}/{t.schema_file}"


def loaded_snapshot(recorded: dict[Key, list[Version]]) -> int | None:
    """The snapshot TSO a source's targets were loaded at, as its schema history records it
    (the newest, after a reload), or None: where the source starts when its export can no
    longer be read."""
    return max(
        (v.commit_ts for vs in recorded.values() for v in vs if v.ddl.startswith(SNAPSHOT_DDL)),
        default=None,
    )


def gone_by(
    tr: routing.TargetRoute, timeline: Timeline, snapshot: int, export: Export | None
) -> bool:
    """Whether none of the target's upstream tables existed at the export's snapshot: none
    is in the export (when it can be read), and the stream's DDL dropped or renamed each
    away at or before the snapshot. Such a target starts at the snapshot with nothing to
    load. (A table not in the export that the stream does not show gone may be one the export
    left out: it starts from the changefeed.)"""
    return all(
        (export is None or export.table(db, t) is None)
        and timeline.exists_at(db, t, snapshot) is False
        for db, t in tr.upstreams
    )


def export_tables(project: Project, state: WarehouseState) -> set[tuple[str, str]]:
    """(db, table) of every table the sources' exports describe (lower-cased)."""
    out: set[tuple[str, str]] = set()
    for s in project.sources:
        export: Export | None = state.source(s.name).export
        if s.initial_load is not None and export is not None:
            out |= set(export.tables) | set(export.unreadable)
    return out
