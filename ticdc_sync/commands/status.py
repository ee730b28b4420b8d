"""`ticdc-sync status`: per target, where it stands, read from the warehouse without a JVM.

Applied TSO and its wall time, lag behind the source's resolved TSO (seconds and TSO),
staged changes a run would apply now (`pending`) and those after the resolved TSO that
wait for TiCDC to resolve them (`waiting`), pending DDL, quarantined records and why a
target is blocked, with the blocked DDL (from the plan: the same decision `run` makes),
the newest TSO one read as of a TSO can show every target at, what holds it there and the
targets absent then (`read.as_of`: the decisions the reader makes), and who holds the
warehouse's run lease. `--show N` prints N rows of each target;
`--quarantine N` lists quarantined records with their reason. Reads only.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from ticdc_sync.core.events import KIND_DDL, KIND_ROW
from ticdc_sync.core.lake import LakeTable
from ticdc_sync.core.model import Project
from ticdc_sync.plan import build_plan
from ticdc_sync.plan.model import BLOCKED, Plan, TargetPlan
from ticdc_sync.read import sync_points
from ticdc_sync.read.as_of import absent_at, newest_readable
from ticdc_sync.read.snapshot import catalog_name
from ticdc_sync.run.schedule import over_lag, staging_lag_ms, staleness_ms
from ticdc_sync.warehouse import lease
from ticdc_sync.warehouse.locations import state_location, warehouse_path
from ticdc_sync.warehouse.read import read_state

Out = Callable[[str], None]
FORMAT_VERSION = 1
# Characters of a quarantined record's raw value shown by `--quarantine`.
PREVIEW_CHARS = 120


def tso_wall_time(ts: int | None) -> str:
    """A TSO's physical part (ms since epoch, codec facts 1.1 `es`) as UTC text."""
    if ts is None or ts < 0:
        return "-"
    when = dt.datetime.fromtimestamp((ts >> 18) / 1000, tz=dt.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def lag_seconds(applied: int | None, resolved: int | None) -> float | None:
    """How far a target is behind its source's resolved TSO, in seconds of TiDB time."""
    if applied is None or resolved is None or applied < 0 or resolved < 0:
        return None
    return max(0, (resolved >> 18) - (applied >> 18)) / 1000


def report(
    project: Project, quarantine_limit: int = 0, now_ms: int | None = None
) -> dict[str, Any]:
    """The status as data (what `--format json` prints); with `quarantine_limit`, also
    that many quarantined records (`quarantine_records`). `now_ms`: the wall clock that
    staleness is measured against (default: now)."""
    plan = build_plan(project, read_state(project))
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    wh = warehouse_path(project)
    events = LakeTable(state_location(wh, "events"))
    quarantine = LakeTable(state_location(wh, "quarantine"))
    have_events = events.exists()
    have_quarantine = quarantine.exists()
    # One read of the staging table and of the quarantine for every target.
    applied = [t.marker.applied_ts if t.exists else -1 for t in plan.targets]
    staged = _Staged(events, min(applied, default=-1)) if have_events else None
    quarantined = _quarantined_by_table(quarantine) if have_quarantine else {}
    targets = []
    for t in plan.targets:
        sp = plan.source_plan(t.source)
        resolved = (
            sp.resolved_ts if sp and sp.resolved_ts is not None and sp.resolved_ts >= 0 else None
        )
        applied = t.marker.applied_ts if t.exists else None
        ready, waiting, first = staged.pending(t, resolved) if staged else (0, 0, None)
        blocked_ddl = next((d for d in t.ddl if d.status == BLOCKED), None)
        oldest = _oldest(t, resolved, first)
        current = None
        if t.exists and resolved is not None:
            current = max(applied or -1, resolved if oldest is None else oldest - 1)
        stale = staleness_ms(now_ms, resolved, oldest) if t.exists else None
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
                "lag_tso": (resolved - applied)
                if applied is not None and applied >= 0 and resolved is not None
                else None,
                "pending_events": ready,
                "waiting_events": waiting,
                "pending_ddl": len(t.pending),
                "quarantined": sum(
                    quarantined.get((t.source, db, tbl), 0) for db, tbl in t.upstreams
                ),
                "blocked": t.blocked,
                "blocked_ddl": _ddl(blocked_ddl) if blocked_ddl is not None else None,
                "current_ts": current,
                "current_at": tso_wall_time(current),
                "staleness_seconds": None if stale is None else stale / 1000,
                "target_lag_seconds": t.lag_ms / 1000,
                "over_lag": t.exists and over_lag(now_ms, oldest, t.lag_ms),
                "catalog_name": catalog_name(t),
                "catalog_pending": t.catalog_pending,
            }
        )
    sources = {}
    for sp in plan.sources:
        res = sp.resolved_ts if sp.resolved_ts is not None and sp.resolved_ts >= 0 else None
        lag = staging_lag_ms(now_ms, res)
        sources[sp.source.name] = {
            "resolved_ts": res,
            "resolved_at": tso_wall_time(res),
            "staging_lag_seconds": None if lag is None else lag / 1000,
        }
    # The newest TSO one read can show every target at (`as_of`, `ticdc-sync snapshot`), and
    # the targets such a read leaves out, their upstream tables not existing then.
    timelines = {sp.source.name: sp.timeline for sp in plan.sources}
    read_ts, read_why = newest_readable(
        {sp.source.name: sp.resolved_ts for sp in plan.sources}, plan.targets, timelines
    )
    absent: dict[str, str] = {}
    if read_ts is not None:
        for t in plan.targets:
            gone = absent_at(t, timelines[t.source], read_ts) if t.source in timelines else None
            if gone is not None:
                absent[t.name] = gone.why
    total_q = quarantine.read(["offset"]).num_rows if have_quarantine else 0
    rep: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "project": project.name,
        "target": project.output.name,
        "targets": targets,
        "sources": sources,
        "over_lag": sorted(t["name"] for t in targets if t["over_lag"]),
        "consistent_read": {
            "tso": read_ts,
            "at": tso_wall_time(read_ts),
            "held_by": read_why,
            "absent": absent,
        },
        "sync_point": _sync_point(project, now_ms),
        "quarantined_total": total_q,
        "run_lease": _run_lease(wh),
    }
    if quarantine_limit:
        rep["quarantine"] = (
            quarantine_records(quarantine, quarantine_limit) if have_quarantine else []
        )
    return rep


def _sync_point(project: Project, now_ms: int) -> dict[str, Any] | None:
    """The newest sync point recorded, with its age (wall clock now less its TSO's time)."""
    found = sync_points.newest(project)
    if found is None:
        return None
    found["age_seconds"] = max(0, now_ms - (found["tso"] >> 18)) / 1000
    return found


def _run_lease(wh: str) -> dict[str, Any]:
    """Who runs on the warehouse now (`ticdc_sync.warehouse.lease`)."""
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


def _ddl(d) -> dict[str, Any]:
    return {
        "commit_ts": d.commit_ts,
        "sql": d.sql,
        "where": d.where,
        "reason": d.reason,
        "setting": d.setting,
    }


class _Staged:
    """The commit_ts of the staged row and DDL events per (source, db, tbl), read in one
    pass over the staging table (not one per upstream table: a status of 1,000 targets
    read it 1,000 times), sorted for the counts per target (`pending`)."""

    def __init__(self, events: LakeTable, since: int) -> None:
        table = events.read(
            ["source", "db", "tbl", "commit_ts"],
            [("kind", "in", [KIND_ROW, KIND_DDL]), ("commit_ts", ">", since)],
        )
        grouped = table.group_by(["source", "db", "tbl"]).aggregate([("commit_ts", "list")])
        self.ts: dict[tuple[str, str, str], list[int | None]] = {}
        for source, db, tbl, ts in zip(
            *(grouped.column(c).to_pylist() for c in ("source", "db", "tbl", "commit_ts_list")),
            strict=True,
        ):
            self.ts[(source, db, tbl)] = ts

    def pending(self, t: TargetPlan, resolved: int | None) -> tuple[int, int, int | None]:
        """Staged row and DDL events of `t`'s upstream tables after its applied TSO: those
        at or before the source's resolved TSO (a run applies them now) and those after it
        (they wait until TiCDC resolves their commit_ts), and the lowest commit_ts of the
        first kind."""
        applied = t.marker.applied_ts if t.exists else -1
        ready = waiting = 0
        first: int | None = None
        for db, tbl in t.upstreams:
            for v in self.ts.get((t.source, db, tbl), ()):
                if v is not None and v <= applied:
                    continue
                if resolved is not None and v is not None and v <= resolved:
                    ready += 1
                    first = v if first is None else min(first, v)
                else:
                    waiting += 1
        return ready, waiting, first


def _oldest(t: TargetPlan, resolved: int | None, first_row: int | None) -> int | None:
    """The commit_ts of `t`'s oldest change it can apply now and has not (a staged row,
    or a resolved DDL it has not applied, blocked ones included): what its staleness and
    its lag budget count from (`schedule`)."""
    found = [first_row] if first_row is not None else []
    if resolved is not None:
        found += [d.commit_ts for d in t.pending if d.commit_ts <= resolved]
    return min(found) if found else None


def _quarantined_by_table(quarantine: LakeTable) -> dict[tuple[str, str, str], int]:
    """Quarantined records per (source, db, tbl), in one read of the quarantine."""
    table = quarantine.read(["source", "db", "tbl"])
    counted = table.group_by(["source", "db", "tbl"]).aggregate([([], "count_all")])
    return {
        (source, db, tbl): n
        for source, db, tbl, n in zip(
            *(counted.column(c).to_pylist() for c in ("source", "db", "tbl", "count_all")),
            strict=True,
        )
    }


def quarantine_records(quarantine: LakeTable, limit: int) -> list[dict[str, Any]]:
    """The first `limit` quarantined records (by source, topic, partition, offset): where
    they were, their table and commit_ts, why, and the start of their raw value."""
    cols = ["source", "topic", "partition", "offset", "db", "tbl", "commit_ts", "reason"]
    table = quarantine.read([*cols, "raw_value"])
    if table.num_rows:
        table = table.sort_by(
            [(c, "ascending") for c in ("source", "topic", "partition", "offset")]
        )
    out = []
    for r in table.slice(0, limit).to_pylist():
        raw = r.pop("raw_value")
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        r["table"] = f"{r.pop('db') or ''}.{r.pop('tbl') or ''}".strip(".") or None
        r["value_preview"] = text[:PREVIEW_CHARS] if text is not None else None
        r["value_bytes"] = len(raw) if raw is not None else 0
        out.append(r)
    return out


def render(rep: dict[str, Any]) -> str:
    lines = [
        f"{'target':<28} {'applied ts':>20} {'current as of (UTC)':<24} {'staleness':>10} "
        f"{'lag':>6} {'pending':>8} {'waiting':>8} {'quarantined':>11}  blocked"
    ]
    for t in rep["targets"]:
        applied = t["applied_ts"] if t["applied_ts"] is not None else "-"
        stale = _seconds(t["staleness_seconds"]) + ("!" if t["over_lag"] else "")
        blocked = t["blocked"] or ""
        lines.append(
            f"{t['name']:<28} {applied!s:>20} {t['current_at']:<24} {stale:>10} "
            f"{_seconds(t['target_lag_seconds']):>6} {t['pending_events']:>8} "
            f"{t['waiting_events']:>8} {t['quarantined']:>11}  {blocked}"
        )
    for t in rep["targets"]:
        if t.get("catalog_name"):
            more = " (registration pending: the next run registers it)" * t["catalog_pending"]
            lines.append(f"catalog: {t['name']} is {t['catalog_name']}{more}")
    for name, src in sorted(rep["sources"].items()):
        lines.append(
            f"source {name}: resolved ts {src['resolved_ts'] if src['resolved_ts'] is not None else '-'}"
            f" ({src['resolved_at']}), staging lag {_seconds(src['staging_lag_seconds'])}"
        )
    cr = rep["consistent_read"]
    lines.append(
        f"consistent read: up to TSO {cr['tso'] if cr['tso'] is not None else '-'} "
        f"({cr['at']}), held by {cr['held_by']} (`ticdc-sync snapshot`, the as_of reader)"
    )
    for name, why in sorted((cr.get("absent") or {}).items()):
        lines.append(f"  absent then (no upstream table; a read leaves it out): {name}: {why}")
    sync = rep.get("sync_point")
    if sync:
        lines.append(
            f"sync point: source {sync['source']} at TSO {sync['tso']} ({sync['at']}), "
            f"{_seconds(sync['age_seconds'])} ago, {len(sync['targets'])} target(s)"
        )
    if rep["over_lag"]:
        lines.append(
            f"over their target_lag (!): {', '.join(rep['over_lag'])}: their oldest unapplied "
            "change is older than their lag (a `run --follow` applies them; `status "
            "--fail-over-lag` exits 2 on this)"
        )
    for t in rep["targets"]:
        d = t.get("blocked_ddl")
        if d:
            hint = f" (hint: {d['setting']})" if d.get("setting") else ""
            lines.append(
                f"blocked: {t['name']} at commit_ts {d['commit_ts']} ({d['where']}): "
                f"{_escape(d['sql'])}: {d['reason']}{hint}"
            )
    lines.append(f"quarantined records in total: {rep['quarantined_total']}")
    if any(t["pending_events"] or t["waiting_events"] for t in rep["targets"]):
        lines.append(
            "pending: staged changes the next run applies; waiting: staged changes after the "
            "source's resolved ts, applied once TiCDC resolves them (a later watermark)"
        )
    if rep["quarantined_total"] and "quarantine" not in rep:
        lines.append("list them with `ticdc-sync status --quarantine N`")
    lines.append(f"run lease: {rep['run_lease']['summary']}")
    if "quarantine" in rep:
        lines.append("")
        lines.append(render_quarantine(rep["quarantine"], rep["quarantined_total"]))
    return "\n".join(lines)


def render_quarantine(records: list[dict[str, Any]], total: int) -> str:
    """The quarantined records as a table, one record a line."""
    head = f"quarantined records ({len(records)} of {total}):"
    if not records:
        return head
    rows = [
        [
            f"{r['topic']}/{r['partition']}/{r['offset']}",
            r["table"] or "",
            r["commit_ts"],
            r["reason"],
            r["value_preview"],
        ]
        for r in records
    ]
    return (
        head
        + "\n"
        + format_rows(
            ["topic/partition/offset", "table", "commit_ts", "reason", "value"], rows, width=60
        )
    )


def _seconds(v: float | None) -> str:
    """Seconds for a table cell: `-`, `12.3s`, `5m`, `2.5h`."""
    if v is None:
        return "-"
    if v < 120:
        return f"{v:.1f}s"
    if v < 7200:
        return f"{v / 60:.0f}m"
    if v < 172_800:
        return f"{v / 3600:.1f}h"
    return f"{v / 86400:.0f}d"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def format_rows(columns: list[str], rows: list[list], width: int = 40) -> str:
    """A plain text table (`status --show`); tabs and line breaks inside values are shown
    escaped so that every row stays one line; cells are cut at `width` characters."""

    def cell(v: Any) -> str:
        return "NULL" if v is None else _escape(str(v))

    cells = [[cell(c) for c in columns]] + [[cell(v) for v in r] for r in rows]
    widths = [min(width, max(len(r[i]) for r in cells)) for i in range(len(columns))]
    lines = []
    for j, r in enumerate(cells):
        lines.append(" | ".join(v[:width].ljust(widths[i]) for i, v in enumerate(r)).rstrip())
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
