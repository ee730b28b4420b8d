"""Sync points as rows of the warehouse's `_ticdc_sync/sync_points` table, and the newest one.

A sync point (`engine.SyncPoint`, decided by the run loop) says that every target of one
source held its upstream tables at one TSO in a committed Delta version. Its rows, one per
target, name that version (the newest one usable at the TSO, `as_of.version_at`, read from
the target's log) so that plain Delta readers read it with time travel; a target behind
(blocked, failed) is recorded with its own applied ts and no version. The rows of one sync
point are appended in one commit, after the targets' commits (`spark.engine`). Reads the
targets' logs and the table through delta-rs; writes nothing itself; no pyspark.
"""

from __future__ import annotations

import time
from typing import Any

from ticdc_sync.core.lake import LakeTable
from ticdc_sync.core.model import Project
from ticdc_sync.read import as_of as ao
from ticdc_sync.run.engine import SyncPoint
from ticdc_sync.warehouse.locations import find_target, state_location, warehouse_path

TABLE = "sync_points"
# Spark DDL of the table's columns, in order.
SCHEMA = (
    "source STRING, tso BIGINT, wall_time STRING, recorded_at STRING, target STRING, "
    "version BIGINT, applied_ts BIGINT, at_tso BOOLEAN"
)


def location(project: Project) -> str:
    return state_location(warehouse_path(project), TABLE)


def rows(project: Project, point: SyncPoint, now_ms: int | None = None) -> list[dict[str, Any]]:
    """The rows that record `point`: per target its Delta version at the TSO."""
    wh = warehouse_path(project)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    recorded = ao.wall_text(now_ms << ao.PHYSICAL_SHIFT)
    base = {"source": point.source, "tso": point.tso, "wall_time": ao.wall_text(point.tso)}
    out: list[dict[str, Any]] = []
    for name in point.targets:
        table = LakeTable(find_target(wh, name, lambda loc: LakeTable(loc).exists()))
        vs = ao.versions(table.commits())
        v = ao.version_at(vs, point.tso, table.oldest_reachable())
        if v is None or v.marker is None:
            raise ValueError(
                f"target {name} has no version that holds TSO {point.tso} (its log was "
                "cleaned up since its commit?)"
            )
        out.append(
            {
                **base,
                "recorded_at": recorded,
                "target": name,
                "version": v.version,
                "applied_ts": v.marker.applied_ts,
                "at_tso": True,
            }
        )
    for name, applied in point.behind:
        out.append(
            {
                **base,
                "recorded_at": recorded,
                "target": name,
                "version": None,
                "applied_ts": applied,
                "at_tso": False,
            }
        )
    return out


def newest_tsos(project: Project) -> dict[str, int]:
    """Per source, the TSO of its newest sync point recorded."""
    table = LakeTable(location(project))
    if not table.exists():
        return {}
    out: dict[str, int] = {}
    for r in table.read(columns=["source", "tso"]).to_pylist():
        out[r["source"]] = max(out.get(r["source"], r["tso"]), r["tso"])
    return out


def newest(project: Project) -> dict[str, Any] | None:
    """The newest sync point recorded (of any source): its source, TSO, wall time and
    rows per target, or None."""
    table = LakeTable(location(project))
    if not table.exists():
        return None
    found = table.read().to_pylist()
    if not found:
        return None
    top = max(found, key=lambda r: (r["tso"], r["source"]))
    mine = [r for r in found if (r["source"], r["tso"]) == (top["source"], top["tso"])]
    return {
        "source": top["source"],
        "tso": top["tso"],
        "at": top["wall_time"],
        "targets": {
            r["target"]: {"version": r["version"], "applied_ts": r["applied_ts"]}
            for r in sorted(mine, key=lambda r: r["target"])
        },
    }
