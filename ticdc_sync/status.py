"""`ticdc-sync status`: per target, where it stands, read from the warehouse without a JVM.

Applied TSO and its wall time, lag behind the source's resolved TSO, events staged and not
yet applied, quarantined records and why a target is blocked (from the plan: the same
decision `run` makes), and who holds the warehouse's run lease. `--show N` prints N rows of
each target. Reads only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from ticdc_sync import lease
from ticdc_sync.events import KIND_DDL, KIND_ROW
from ticdc_sync.lake import LakeTable
from ticdc_sync.locations import state_location, warehouse_path
from ticdc_sync.model import Project
from ticdc_sync.plan import build_plan
from ticdc_sync.plan.model import Plan, TargetPlan
from ticdc_sync.warehouse import read_state

Out = Callable[[str], None]
FORMAT_VERSION = 1


def tso_wall_time(ts: int | None) -> str:
    """A TSO's physical part (ms since epoch, codec facts 1.1 `es`) as UTC text."""
    if ts is None or ts < 0:
        return "-"
    when = dt.datetime.fromtimestamp((ts >> 18) / 1000, tz=dt.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def lag_seconds(applied: int | None, resolved: int | None) -> float | None:
    """How far a target is behind its source's resolved TSO, in seconds of TiDB time."""
    if applied is None or resolved is None or applied < 0 or resolved < 0:
        return None
    return max(0, (resolved >> 18) - (applied >> 18)) / 1000


def report(project: Project) -> dict[str, Any]:
    """The status as data (what `--format json` prints)."""
    plan = build_plan(project, read_state(project))
    wh = warehouse_path(project)
    events = LakeTable(state_location(wh, "events"))
    quarantine = LakeTable(state_location(wh, "quarantine"))
    have_events = events.exists()
    have_quarantine = quarantine.exists()
    targets = []
    for t in plan.targets:
        sp = plan.source_plan(t.source)
        resolved = sp.resolved_ts if sp else None
        applied = t.marker.applied_ts if t.exists else None
        targets.append(
            {
                "name": t.name,
                "source": t.source,
                "upstream": [f"{db}.{tbl}" for db, tbl in t.upstreams],
                "exists": t.exists,
                "applied_ts": applied,
                "applied_at": tso_wall_time(applied),
                "resolved_ts": resolved,
                "lag_seconds": lag_seconds(applied, resolved),
                "lag_tso": (resolved - applied) if applied is not None and resolved else None,
                "pending_events": _pending(events, t) if have_events else 0,
                "pending_ddl": len(t.pending),
                "quarantined": _quarantined(quarantine, t) if have_quarantine else 0,
                "blocked": t.blocked,
            }
        )
    total_q = quarantine.read(["offset"]).num_rows if have_quarantine else 0
    return {
        "format_version": FORMAT_VERSION,
        "project": project.name,
        "target": project.output.name,
        "targets": targets,
        "quarantined_total": total_q,
        "run_lease": _run_lease(wh),
    }


def _run_lease(wh: str) -> dict[str, Any]:
    """Who runs on the warehouse now (`ticdc_sync.lease`)."""
    found = lease.read_lease(wh)
    if found is None:
        return {"state": "none", "summary": "no run has taken it yet"}
    now = lease.utc_now()
    return {
        "state": found.state_at(now),
        "holder": found.holder,
        "acquired_at": found.acquired_at.isoformat(),
        "renewed_at": found.renewed_at.isoformat(),
        "expires_at": found.expires_at.isoformat(),
        "summary": found.summary(now),
    }


def _upstream_filter(t: TargetPlan) -> list[tuple[str, str, Any]]:
    return [("source", "=", t.source)]


def _pending(events: LakeTable, t: TargetPlan) -> int:
    applied = t.marker.applied_ts if t.exists else -1
    n = 0
    for db, tbl in t.upstreams:
        n += events.read(
            ["commit_ts"],
            [
                *_upstream_filter(t),
                ("kind", "in", [KIND_ROW, KIND_DDL]),
                ("db", "=", db),
                ("tbl", "=", tbl),
                ("commit_ts", ">", applied),
            ],
        ).num_rows
    return n


def _quarantined(quarantine: LakeTable, t: TargetPlan) -> int:
    n = 0
    for db, tbl in t.upstreams:
        n += quarantine.read(
            ["offset"], [*_upstream_filter(t), ("db", "=", db), ("tbl", "=", tbl)]
        ).num_rows
    return n


def render(rep: dict[str, Any]) -> str:
    lines = [
        f"{'target':<28} {'applied ts':>20} {'applied at (UTC)':<24} {'lag':>9} {'pending':>8} "
        f"{'quarantined':>11}  blocked"
    ]
    for t in rep["targets"]:
        applied = t["applied_ts"] if t["applied_ts"] is not None else "-"
        lag = f"{t['lag_seconds']:.1f}s" if t["lag_seconds"] is not None else "-"
        blocked = t["blocked"] or ""
        lines.append(
            f"{t['name']:<28} {applied!s:>20} {t['applied_at']:<24} {lag:>9} "
            f"{t['pending_events']:>8} {t['quarantined']:>11}  {blocked}"
        )
    lines.append(f"quarantined records in total: {rep['quarantined_total']}")
    lines.append(f"run lease: {rep['run_lease']['summary']}")
    return "\n".join(lines)


def format_rows(columns: list[str], rows: list[list]) -> str:
    """A plain text table (`status --show`); tabs and line breaks inside values are shown
    escaped so that every row stays one line."""

    def cell(v: Any) -> str:
        text = "NULL" if v is None else str(v)
        return (
            text.replace("\\", "\\\\")
            .replace("\t", "\\t")
            .replace("\n", "\\n")
            .replace("\r", "\\r")
        )

    cells = [[cell(c) for c in columns]] + [[cell(v) for v in r] for r in rows]
    widths = [min(40, max(len(r[i]) for r in cells)) for i in range(len(columns))]
    lines = []
    for j, r in enumerate(cells):
        lines.append(" | ".join(v[:40].ljust(widths[i]) for i, v in enumerate(r)))
        if j == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def show_rows(plan: Plan, n: int, out: Out) -> None:
    """The first `n` rows of each existing target, read with delta-rs where it can."""
    for t in plan.targets:
        if not t.exists:
            continue
        table = LakeTable(t.location).read()
        if table.num_rows and table.column_names:
            table = table.sort_by(
                [(c, "ascending") for c in t.keys if c in table.column_names]
                or [(table.column_names[0], "ascending")]
            )
        out(f"\n{t.name} ({table.num_rows} rows; first {n}):")
        rows = table.slice(0, n).to_pylist()
        cols = table.column_names
        out(format_rows(cols, [[r[c] for c in cols] for r in rows]))
