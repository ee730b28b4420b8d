"""Which Delta version of each target to read as of one TSO, read from the warehouse without a
JVM: `ticdc-sync snapshot`, and the first half of a Spark read as of a TSO (`spark.as_of`).

Per selected target: its versions and markers from its Delta log, the newest one usable at
the TSO (`as_of.version_at`) that time travel can still reach and whose files are still
there, whether it holds exactly the state at the TSO (no staged row change of its tables
and no schema change in (applied ts, TSO]), and otherwise the plan that brings it there:
the project's plan made over the warehouse with the target at that version (`build_plan`,
as `run` makes it), its stop at the TSO (`as_of.read_steps`). Versions that cannot be read
any more (log entries expired, files vacuumed) are reported as unavailable, never replaced
by another. A target whose upstream tables did not exist at the TSO (`as_of.absent_at`) is
reported absent, with why, and nothing of it is read. Reads only; no pyspark.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from deltalake import DeltaTable

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.events import KIND_DDL, KIND_EMPTY, KIND_ROW, KIND_WATERMARK
from ticdc_sync.core.lake import LakeTable, spark_type
from ticdc_sync.core.model import Project
from ticdc_sync.core.sqlgen import COMMIT_TS, quote
from ticdc_sync.plan import build_plan
from ticdc_sync.plan.model import CATALOG_REGISTER, Plan, TargetPlan
from ticdc_sync.read import as_of as ao
from ticdc_sync.read import sync_points
from ticdc_sync.warehouse.locations import state_location, warehouse_path
from ticdc_sync.warehouse.read import read_state
from ticdc_sync.warehouse.state import WarehouseState

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class TargetAt:
    """One target as of the TSO: the version to read (None: none is readable, `why`, or the
    target is `absent`), how many staged row changes lie after it, and its read plan when it
    can be read."""

    name: str
    source: str
    location: str
    version: int | None
    applied_ts: int | None
    pending: int = 0
    why: str | None = None  # not readable at all, or not exactly (with `read` None)
    read: ao.ReadPlan | None = None
    absent: ao.Absent | None = None  # its upstream tables did not exist at the TSO
    catalog_name: str | None = None  # its name in the output's catalog, if registered

    @property
    def exact(self) -> bool:
        return self.version is not None and self.read is not None and self.read.exact


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: ao.AsOf
    targets: tuple[TargetAt, ...]
    plan: Plan  # the plan over the read versions (its source plans hold the timelines)
    # The staging table's version whose tallies the read rests on (None: no staging table).
    # Its staged changes are read as of it: a trim's DELETE committed later may remove
    # changes below its bound, which those tallies do not know of yet.
    staging_version: int | None = None


def catalog_name(t: TargetPlan) -> str | None:
    """The name `t` is queried by in the output's catalog (`schema.table` in the session
    catalog), None: no catalog, or its upstream table is gone."""
    c = t.catalog
    return c.short_name if c is not None and c.action == CATALOG_REGISTER else None


def selected(plan: Plan, names: Sequence[str]) -> list[TargetPlan]:
    """The plan's existing targets matching `names` (fnmatch globs, on a target's name or
    its catalog name; all when empty)."""

    def hit(t: TargetPlan, pat: str) -> bool:
        if fnmatch.fnmatchcase(t.name, pat):
            return True
        c = t.catalog
        return c is not None and (
            fnmatch.fnmatchcase(c.short_name, pat) or fnmatch.fnmatchcase(c.name, pat)
        )

    out = [t for t in plan.targets if not names or any(hit(t, pat) for pat in names)]
    if names and not out:
        known = ", ".join(t.name for t in plan.targets) or "none"
        raise UserError(f"as_of: no target matches {', '.join(names)} (targets: {known})")
    return out


def snapshot(
    project: Project,
    value: Any = ao.LATEST,
    names: Sequence[str] = (),
    *,
    strict: bool = False,
    others: bool = False,
) -> Snapshot:
    """Every selected target as of `value` (`as_of.parse_as_of`). `strict`: raise the first
    target's reason it cannot be read (a Spark read), instead of reporting it; an absent
    target is never such a reason. `others`: each version with the commits others made on
    top of it (`as_of.with_others`)."""
    state = read_state(project)
    plan = build_plan(project, state)
    chosen = selected(plan, names)
    resolved = {t.source: _resolved(plan, t.source) for t in chosen}
    at = ao.resolve(value, resolved)
    wh = warehouse_path(project)
    events = LakeTable(state_location(wh, "events"), version=state.staging_version)
    found: dict[str, tuple[TargetPlan, ao.Version | None, str | None]] = {}
    absent: dict[str, ao.Absent] = {}
    held: dict[str, int] | None = None  # per source, its newest sync point (read once)
    for t in chosen:
        sp = plan.source_plan(t.source)
        gone = ao.absent_at(t, sp.timeline, at.tso) if sp is not None else None
        if gone is not None:
            absent[t.name] = gone  # nothing of it to read: its versions are not looked at
            continue
        try:
            ao.retention_check(t, at.tso, resolved.get(t.source), None)
        except UserError as e:
            if held is None:
                held = sync_points.newest_tsos(project)
            try:
                ao.retention_check(t, at.tso, resolved.get(t.source), held.get(t.source))
            except UserError:
                found[t.name] = (t, None, str(e))
                continue
        found[t.name] = (t, *_version(t, at.tso, others))
    # The plan again, each target at its read version: the steps after it are the ones a
    # run from that version makes.
    at_versions = _state_at(state, {n: v for n, (_, v, _) in found.items() if v is not None})
    read_plan = build_plan(project, at_versions)
    out: list[TargetAt] = []
    for c in chosen:
        if c.name in absent:
            out.append(TargetAt(c.name, c.source, c.location, None, None, absent=absent[c.name]))
            continue
        t, v, why = found[c.name]
        if v is None or v.marker is None:
            if strict:
                raise UserError(why or f"as_of: target {t.name} has no readable version")
            out.append(TargetAt(t.name, t.source, t.location, None, None, why=why))
            continue
        applied = v.marker.applied_ts
        pending = _pending(events, t, applied, at.tso)
        tp = read_plan.target_plan(t.name)
        assert tp is not None
        try:
            ao.staging_floor_check(t.name, t.source, applied, _floor(state, events, t), at.tso)
            sp = read_plan.source_plan(t.source)
            assert sp is not None
            steps = ao.read_steps(tp, sp.timeline, at.tso)
        except UserError as e:
            if strict:
                raise
            out.append(TargetAt(t.name, t.source, t.location, v.version, applied, pending, str(e)))
            continue
        if pending == 0 and steps:
            # Nothing staged in between (a trimmed or an empty window): the version is exact.
            steps = ()
        rp = ao.ReadPlan(t.name, t.source, t.location, at.tso, v.version, v.marker, steps, tp)
        out.append(TargetAt(t.name, t.source, t.location, v.version, applied, pending, read=rp))
    names_ = {c.name: catalog_name(c) for c in chosen}
    out = [replace(x, catalog_name=names_.get(x.name)) for x in out]
    return Snapshot(at, tuple(out), read_plan, state.staging_version)


def _resolved(plan: Plan, source: str) -> int | None:
    sp = plan.source_plan(source)
    return None if sp is None else sp.resolved_ts


def _version(t: TargetPlan, tso: int, others: bool = False) -> tuple[ao.Version | None, str | None]:
    """The version of `t` to read at `tso` (with `others`: and the commits others made on
    top of it), or None and why."""
    table = LakeTable(t.location)
    if not t.exists or not table.exists():
        return None, (
            f"as_of: target {t.name} has no Delta table yet, though its upstream table existed "
            f"at TSO {tso} (hint: run first: the run creates it)"
        )
    vs = ao.versions(table.commits())
    reach = table.oldest_reachable()
    v = ao.version_at(vs, tso, reach)
    if v is None:
        oldest = next((x for x in vs if x.version >= reach), None)
        return None, str(ao.no_version(t.name, tso, oldest))
    if others:
        v = ao.with_others(vs, v)
    vacuumed = any(x.operation.startswith("VACUUM") for x in vs if x.version > v.version)
    if vacuumed and not table.files_present(v.version):
        return None, (
            f"as_of: version {v.version} of target {t.name} (applied ts "
            f"{v.marker.applied_ts if v.marker else '?'}), the one that holds TSO {tso}, "
            "lost files to VACUUM (hint: read at a newer TSO, or keep more with "
            "`maintenance.retain`, and VACUUM by hand no further back than it)"
        )
    return v, None


def _state_at(state: WarehouseState, at: dict[str, ao.Version]) -> WarehouseState:
    """`state` with each target of `at` as its version holds it (its marker and columns)."""
    targets = dict(state.targets)
    for name, v in at.items():
        ts = targets[name]
        assert ts.location is not None and v.marker is not None
        table = LakeTable(ts.location)
        fields = json.loads(
            DeltaTable(table.uri, storage_options=table.options, version=v.version)
            .schema()
            .to_json()
        )["fields"]
        cols = tuple((f["name"], spark_type(f["type"])) for f in fields if f["name"] != COMMIT_TS)
        targets[name] = dataclasses.replace(ts, marker=v.marker, columns=cols, version=v.version)
    return dataclasses.replace(state, targets=targets)


def _upstream_filters(t: TargetPlan) -> list[list[tuple[str, str, Any]]]:
    return [
        [("source", "=", t.source), ("db", "=", db), ("tbl", "=", tbl)] for db, tbl in t.upstreams
    ]


def _pending(events: LakeTable, t: TargetPlan, applied: int, tso: int) -> int:
    """Staged row changes and DDL of `t`'s tables in (applied, tso]."""
    if tso <= applied or not events.exists():
        return 0
    return sum(
        events.count(
            [
                *where,
                ("kind", "in", [KIND_ROW, KIND_DDL]),
                ("commit_ts", ">", applied),
                ("commit_ts", "<=", tso),
            ]
        )
        for where in _upstream_filters(t)
    )


def _floor(state: WarehouseState, events: LakeTable, t: TargetPlan) -> int:
    """The highest commit_ts up to which the source's staged changes may be trimmed."""
    trimmed = state.source(t.source).tally.trimmed
    if trimmed is not None:
        return trimmed
    if not events.exists():
        return -1
    if not any(c.get("operation") == "DELETE" for c in events.commits()):
        return -1  # never trimmed
    # Trimmed by a version that did not record how far: below its oldest kept event.
    kept = events.read(
        ["commit_ts"],
        [("source", "=", t.source), ("kind", "in", [KIND_ROW, KIND_WATERMARK, KIND_EMPTY])],
        order_by=["commit_ts"],
        limit=1,
    ).to_pylist()
    return kept[0]["commit_ts"] - 1 if kept else -1


# --------------------------------------------------------------------------- output


def spark_sql(location: str, version: int, name: str | None = None) -> str:
    """The query of one version: by the target's catalog name when it has one."""
    table = name if name is not None else f"delta.{quote(location)}"
    return f"SELECT * FROM {table} VERSION AS OF {version}"


def to_json(s: Snapshot) -> dict[str, Any]:
    targets = []
    for t in s.targets:
        row: dict[str, Any] = {
            "name": t.name,
            "source": t.source,
            "location": t.location,
            "version": t.version,
            "applied_ts": t.applied_ts,
            "exact": t.exact,
            "pending": t.pending,
            "available": t.version is not None,
            "absent": t.absent is not None,
        }
        if t.catalog_name is not None:
            row["catalog_name"] = t.catalog_name
        if t.version is not None:
            row["sql"] = spark_sql(t.location, t.version, t.catalog_name)
        if t.why:
            row["reason"] = t.why
        if t.absent is not None:
            row["reason"] = t.absent.why
            row["absent_since"] = t.absent.gone_ts
            row["absent_until"] = t.absent.created_ts
        targets.append(row)
    return {
        "format_version": FORMAT_VERSION,
        "as_of": {
            "tso": s.at.tso,
            "wall_time": s.at.wall_time,
            "asked": s.at.asked,
            "held_by": s.at.held_by,
        },
        # An absent target has nothing to read: it takes nothing from the read's exactness.
        "exact": bool(s.targets) and all(t.exact or t.absent is not None for t in s.targets),
        "targets": targets,
    }


def render(s: Snapshot) -> list[str]:
    held = f" (latest: held back by source {s.at.held_by})" if s.at.held_by else ""
    lines = [f"as of TSO {s.at.tso} ({s.at.wall_time}){held}"]
    for t in s.targets:
        if t.absent is not None:
            lines.append(
                f"  {t.name}: absent at TSO, nothing to read: its upstream table did not exist "
                f"then: {t.absent.why}"
            )
        elif t.version is None:
            lines.append(f"  {t.name}: unavailable: {t.why}")
        elif t.exact:
            lines.append(
                f"  {t.name}: version {t.version} (applied ts {t.applied_ts}), exact at TSO\n"
                f"    {spark_sql(t.location, t.version, t.catalog_name)}"
            )
        else:
            why = f"{t.pending} pending change(s)" if t.why is None else t.why
            lines.append(
                f"  {t.name}: not exact at TSO: version {t.version} (applied ts "
                f"{t.applied_ts}) and {why} (hint: read with the as_of reader, or wait for "
                "a run to apply them)"
            )
    present = [t for t in s.targets if t.absent is None]
    n = sum(t.exact for t in present)
    tail = f"{n} of {len(present)} target(s) exact at TSO {s.at.tso}"
    gone = len(s.targets) - len(present)
    if gone:
        tail += f"; {gone} absent (their upstream tables did not exist then)"
    lines.append(tail)
    return lines
