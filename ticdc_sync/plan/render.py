"""The Plan as people review it: text like `terraform plan`, and JSON for tools.

Shows the change, not the listing: a target that exists appears with its columns as they are
and what the next run changes (+ added, ~ changed, - dropped), its pending DDL with the
decision on every change (BLOCKED ones with the setting that lets them through); a target
to create shows its CREATE TABLE. Deterministic bytes: sorted, no timestamps, no absolute
paths (the warehouse is shown as `<warehouse>`). Pure Python; never imports pyspark.
It stays one module: the text is rendered from the same `plan_dict` as the JSON, and
keeping the two side by side keeps what they show in step.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ticdc_sync.core import datatypes
from ticdc_sync.core.durations import render_ms
from ticdc_sync.core.model import Mode
from ticdc_sync.core.spark_stack import remote_needs
from ticdc_sync.core.sqlgen import COMMIT_TS, create_table_sql, table_ref
from ticdc_sync.core.sqlgen_history import MERGE_SQL
from ticdc_sync.plan import layout, maintenance, policy
from ticdc_sync.plan import properties as entry_properties
from ticdc_sync.plan.catalog import statements as catalog_statements
from ticdc_sync.plan.model import (
    BLOCKED,
    FORMAT_VERSION,
    HELD,
    OP_CREATE,
    OP_REBUILD,
    READY,
    WAITING,
    Catalog,
    Create,
    Ddl,
    Features,
    Halt,
    Layout,
    LoadRows,
    Plan,
    Rows,
    SourcePlan,
    Step,
    Stop,
    TableProperties,
    TargetDdl,
    TargetPlan,
)

WAREHOUSE_PLACEHOLDER = "<warehouse>"
SOURCE_VIEW = "__ticdc_sync_source"


def _shown(plan: Plan, text: str) -> str:
    return text.replace(plan.warehouse, WAREHOUSE_PLACEHOLDER)


def _merge_sql(plan: Plan, t: TargetPlan) -> str | None:
    # The keys of the last row segment (a key-changing DDL gives later segments other keys;
    # each segment shows its own in `steps`).
    keys = next((s.keys for s in reversed(t.steps) if isinstance(s, Rows) and s.keys), t.keys)
    if not keys:
        return None
    names = [n for mark, n, _, _ in t.next_columns if mark != "-"]
    names = [n.split(" (was ")[0] for n in names]
    if not names:
        return None
    return _shown(plan, MERGE_SQL[t.mode](table_ref(t.location), SOURCE_VIEW, keys, names))


def _create_sql(plan: Plan, t: TargetPlan) -> str | None:
    if not t.to_create or t.create is None:
        return None
    cols = [(c.name, datatypes.delta_type(c)) for c in t.create.columns]
    step = next((s for s in t.steps if isinstance(s, Create)), None)
    props = dict(step.properties) if step is not None else {}
    sql = create_table_sql(
        table_ref(t.location),
        cols,
        t.create.comment,
        props,
        t.mode_columns,
        step.partition_by if step is not None else (),
        step.cluster_by if step is not None else (),
    )
    return _shown(plan, sql)


# --------------------------------------------------------------------------- dict / JSON


def _step_dict(step: Step) -> dict[str, Any]:
    """One step of a target's run as the engine carries it out (`plan.steps`)."""
    if isinstance(step, Create):
        out: dict[str, Any] = {"step": "create", "properties": dict(step.properties)}
        # Only where there is one (plans of targets without stay as they were).
        if step.partition_by:
            out["partition_by"] = list(step.partition_by)
        if step.cluster_by:
            out["cluster_by"] = list(step.cluster_by)
        return out
    if isinstance(step, Features):
        return {"step": "features", "parts": [p.describe for p in step.parts]}
    if isinstance(step, Layout):
        return {
            "step": "layout",
            "partition_by": list(step.partition_by),
            "cluster_by": list(step.cluster_by),
            "rebuild": step.rebuild,
            "was": step.was,
        }
    if isinstance(step, TableProperties):
        # Its statements (with the target's location) are the target's `properties_change`.
        return {k: v for k, v in entry_properties.to_dict(step).items() if k != "sql"}
    if isinstance(step, LoadRows):
        return {"step": "load", "snapshot_ts": step.load.snapshot_ts}
    if isinstance(step, Rows):
        return {
            "step": "rows",
            "lo": step.lo,
            "hi": step.hi,
            "keys": list(step.keys),
            "keys_from": step.keys_from,
            "write": step.write,
            "write_why": step.write_why,
            "error": step.error,
            "tables": [
                {
                    "upstream": t.upstream,
                    "spans": [
                        {
                            "lo": sp.lo,
                            "hi": sp.hi,
                            "columns": [c.name for c in sp.schema.columns],
                            "fill": dict(sp.fill),
                        }
                        for sp in t.spans
                    ],
                }
                for t in step.tables
            ],
        }
    if isinstance(step, Ddl):
        return {"step": "ddl", "commit_ts": step.commit_ts, "ahead": step.ahead}
    if isinstance(step, Stop):
        return {"step": "stop", "commit_ts": step.ddl.commit_ts}
    if isinstance(step, Catalog):
        return {"step": "catalog", "action": step.entry.action, "name": step.entry.name}
    assert isinstance(step, Halt)
    return {"step": "halt", "reason": step.reason}


def _ddl_dict(plan: Plan, d: TargetDdl) -> dict[str, Any]:
    return {
        "commit_ts": d.commit_ts,
        "upstream": list(d.upstreams),
        "sql": d.sql,
        "where": d.where,
        "status": d.status,
        "reason": d.reason,
        "setting": d.setting,
        "rename_from": d.rename_from,
        "renamed_to": d.renamed_to,
        "parts_done": d.parts_done,
        "overrides": [
            {"action": o.action.value, "sql": o.sql, "origin": o.origin.render(), "note": o.note}
            for o in d.group.overrides
        ],
        "changes": [
            {
                "kind": s.decision.kind.value,
                "classification": s.decision.classification,
                "describe": s.decision.describe,
                "decision": s.decision.action,
                "reason": s.decision.reason,
            }
            for s in d.steps
        ],
        "delta": [
            {
                "describe": p.describe,
                "op": p.op,
                "sql": _shown(plan, p.sql) if p.sql else None,
                "feature": p.feature,
            }
            for p in d.parts
        ],
        "features_added": list(d.features_added),
    }


def target_status(t: TargetPlan) -> str:
    """create / change / blocked / unchanged, for the summary."""
    if t.refused is not None or any(d.status == BLOCKED for d in t.ddl):
        return "blocked"
    if t.absent:
        return "unchanged"
    if t.to_create:
        return "create"
    if (
        t.feature_parts
        or t.relayout is not None
        or t.reprops is not None
        or t.load is not None
        or any(d.status in (READY, WAITING) for d in t.pending)
        or t.catalog_pending
    ):
        return "change"
    return "unchanged"


def _target_dict(plan: Plan, t: TargetPlan) -> dict[str, Any]:
    out = _target_body(plan, t)
    # Only where there is one: plans of targets without keep their shape.
    if t.partition_by:
        out["partition_by"] = list(t.partition_by)
    if t.cluster_by:
        out["cluster_by"] = list(t.cluster_by)
    if t.reprops is not None:
        step = entry_properties.to_dict(t.reprops)
        out["properties_change"] = {**step, "sql": [_shown(plan, x) for x in step["sql"]]}
    return out


def _target_body(plan: Plan, t: TargetPlan) -> dict[str, Any]:
    return {
        "name": t.name,
        "source": t.source,
        "upstream": [f"{db}.{tbl}" for db, tbl in t.upstreams],
        "route": t.entry.origin.render(),
        "location": _shown(plan, t.location),
        "status": target_status(t),
        "exists": t.exists,
        "applied_ts": t.marker.applied_ts if t.exists else None,
        "keys": list(t.keys),
        "keys_from": t.keys_from,
        "target_lag": render_ms(t.lag_ms),
        "target_lag_ms": t.lag_ms,
        "target_lag_from": t.lag_from,
        "maintenance": maintenance.describe(t.maintenance),
        "mode": t.mode.value,
        "mode_from": t.mode_from,
        "mode_columns": [{"name": n, "delta_type": typ.upper()} for n, typ in t.mode_columns],
        "on_bad_message": t.entry.on_bad_message.value if t.entry.on_bad_message else None,
        "bad_message_policy": t.on_bad_message.value,
        "ignore_columns": list(t.entry.ignore_columns),
        "create_from": t.create_from,
        "columns": [
            {
                "mark": m.strip(),
                "name": n,
                "mysql_type": my,
                "delta_type": dt,
                "lossy": _lossy(t, n),
            }
            for m, n, my, dt in t.next_columns
        ],
        "features": list(t.features),
        "features_added": sorted({f for d in t.pending for f in d.features_added}),
        "features_dropped": [p.feature_dropped for p in t.feature_parts if p.feature_dropped],
        "feature_changes": [
            {"describe": p.describe, "sql": _shown(plan, p.sql or ""), "feature": p.feature}
            for p in t.feature_parts
        ],
        "table_features": {
            "deletion_vectors": t.settings.deletion_vectors,
            "column_mapping": t.settings.column_mapping.value,
            "type_widening": t.settings.type_widening.value,
            "rebuild_below": t.settings.rebuild_below,
        },
        "create_sql": _create_sql(plan, t),
        "merge_sql": _merge_sql(plan, t),
        "ddl": [_ddl_dict(plan, d) for d in t.pending],
        "steps": [_step_dict(s) for s in t.steps],
        "rows_up_to": t.stop_ts,
        "blocked": t.blocked,
        "notes": list(t.notes),
        "load": _load_dict(t),
        "catalog": _catalog_dict(plan, t),
    }


def _catalog_dict(plan: Plan, t: TargetPlan) -> dict[str, Any] | None:
    c = t.catalog
    if c is None:
        return None
    return {
        "name": c.name,
        "action": c.action,
        "pending": t.catalog_pending,
        "recorded": c.recorded.state if c.recorded is not None else None,
        "statements": [_shown(plan, x) for x in catalog_statements(c)],
    }


def _load_dict(t: TargetPlan) -> dict[str, Any] | None:
    load = t.load
    if load is None:
        return None
    o = load.options
    return {
        "from": "dumpling",
        "export": load.export,
        "snapshot_ts": load.snapshot_ts,
        "filetype": o.filetype.value,
        "reload": load.reload,
        "files": len(load.files),
        "bytes": load.bytes,
        "tables": [
            {
                "upstream": f"{lt.db}.{lt.table}",
                "schema_file": lt.schema_file,
                "files": [{"name": f.name, "bytes": f.size} for f in lt.files],
            }
            for lt in load.tables
        ],
        "commit_ts": load.snapshot_ts,
        "then": f"changes with commit_ts > {load.snapshot_ts}",
    }


def _lossy(t: TargetPlan, name: str) -> str | None:
    schema = t.create or t.schema
    col = schema.column(name) if schema else None
    return datatypes.lossy_reason(col) if col is not None else None


def _source_dict(s: SourcePlan) -> dict[str, Any]:
    src = s.source
    return {
        "name": src.name,
        "protocol": src.protocol.value,
        "topics": sorted(src.topics),
        "topic_pattern": src.topic_pattern,
        "options": _options(src),
        "order": _order_note(src),
        "resolved_ts": s.resolved_ts,
        "partitions": s.partitions,
        "skipped_tables": [{"upstream": f"{db}.{t}", "rows": n} for db, t, n in s.skipped],
        "notes": list(s.notes),
    }


def _options(source) -> dict[str, Any]:
    from ticdc_sync.project import OPTION_PROTOCOLS  # the same table validate uses

    o = source.options
    values: dict[str, Any] = {
        "enable-tidb-extension": o.enable_tidb_extension,
        "content-compatible": o.content_compatible,
        "only-output-updated-columns": o.only_output_updated_columns,
        "debezium-disable-schema": o.debezium_disable_schema,
        "time-zone": o.time_zone,
    }
    # The large-message options show only when set: a plan of a source without them stays
    # what it was before they existed (same bytes, same fingerprint).
    large: dict[str, Any] = {
        "large-message-handle-option": o.large_message_handle_option.value,
        "large-message-handle-compression": o.large_message_handle_compression.value,
        "claim-check-storage-uri": o.claim_check_storage_uri,
        "claim-check-raw-value": o.claim_check_raw_value,
    }
    values |= {k: v for k, v in large.items() if v not in (None, False, "none")}
    return {k: v for k, v in sorted(values.items()) if source.protocol in OPTION_PROTOCOLS[k]}


def _order_note(source) -> str:
    if source.has_commit_ts:
        return "commit order from TiDB commit_ts; applied up to the resolved ts (watermarks)"
    return (
        "no commit_ts (canal-json without enable-tidb-extension): ordered by partition offset "
        "and `es`; applied as soon as read"
    )


def summary(plan: Plan) -> dict[str, int]:
    counts = {"create": 0, "change": 0, "blocked": 0, "unchanged": 0}
    for t in plan.targets:
        counts[target_status(t)] += 1
    counts["pending_ddl"] = sum(len(t.pending) for t in plan.targets)
    return counts


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data, with its fingerprint (SHA-256 of everything else)."""
    body: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "project": plan.project,
        "target": plan.target,
        "project_digest": plan.project_digest,
        "output": plan.output,
        "defaults": plan.defaults,
        "routes": list(plan.routes),
        "ddl_overrides": list(plan.overrides),
        "sources": [_source_dict(s) for s in plan.sources],
        "targets": [_target_dict(plan, t) for t in plan.targets],
        "warnings": list(plan.warnings),
        "summary": summary(plan),
        "has_pending": plan.has_pending,
    }
    body["fingerprint"] = fingerprint(body)
    return body


def fingerprint(body: dict[str, Any]) -> str:
    rest = {k: v for k, v in body.items() if k != "fingerprint"}
    text = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render_json(plan: Plan, extra: dict[str, Any] | None = None) -> str:
    body = plan_dict(plan)
    if extra:
        body.update(extra)
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- text


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line for line in text.splitlines())


def _kv(d: dict[str, Any]) -> str:
    return (
        ", ".join(
            f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in sorted(d.items())
        )
        or "-"
    )


_MARK = {"create": "+", "change": "~", "blocked": "!", "unchanged": " "}


def render_text(plan: Plan) -> str:
    d = plan_dict(plan)
    lines: list[str] = [f"Plan for project {plan.project} (target {plan.target})", ""]
    o = plan.output
    if o.get("spark_remote"):
        kafka = o["transport"]["type"] == "kafka"
        lines += [
            "Output",
            f"  spark remote: {o['spark_remote']}  (Spark Connect: {remote_needs(kafka)})",
        ]
    else:
        lines += ["Output", f"  spark master: {o['spark_master']}"]
    if o["spark_conf"]:
        lines.append(f"  spark conf: {_kv(o['spark_conf'])}")
    if o["jars_dir"]:
        lines.append(f"  jars dir: {o['jars_dir']}")
    lines.append(f"  warehouse: {o['warehouse']}  (shown below as {WAREHOUSE_PLACEHOLDER})")
    lines.append(f"  apply workers: {o['apply_workers']}  ({o['apply_workers_from']})")
    if (c := o.get("catalog")) is not None:
        if o.get("spark_remote"):  # `catalog.metastore` is refused there (project.profiles)
            store = "as the Spark Connect server is configured"
        else:
            store = f"Hive metastore {c['metastore']}" if c["metastore"] else "as spark.conf says"
        lines.append(f"  catalog: {c['name']}  ({store}; each target's entry below)")
    tr = o["transport"]
    if tr["type"] == "files":
        lines.append(f"  transport: files from {tr['captures']}")
    else:
        lines.append(
            f"  transport: kafka {tr['bootstrap_servers']} (starting offsets {tr['starting_offsets']})"
        )
        if tr["options"]:
            lines.append(f"    options: {_kv(tr['options'])}")
    df = plan.defaults
    lines += ["", "Defaults", f"  on_bad_message: {df['on_bad_message']}"]
    lines.append(f"  target_lag: {df['target_lag']}  ({df['target_lag_from']})")
    if df["mode"] != Mode.MIRROR.value:
        lines.append(f"  mode: {df['mode']}")
    lines.append(f"  ddl: {_kv(plan.defaults['ddl'])}")

    lines += ["", f"Sources ({len(d['sources'])})"]
    for s in d["sources"]:
        topics = ", ".join(s["topics"]) if s["topics"] else f"pattern {s['topic_pattern']}"
        lines.append(f"  {s['name']}: {s['protocol']}, topics {topics}")
        lines.append(f"    options: {_kv(s['options'])}")
        lines.append(f"    order: {s['order']}")
        if s["resolved_ts"] is None:
            lines.append("    staged: nothing yet")
        else:
            lines.append(
                f"    staged: {s['partitions']} partition(s), resolved ts {s['resolved_ts']}"
            )
        for sk in s["skipped_tables"]:
            lines.append(f"    skipped (no route): {sk['upstream']} ({sk['rows']} row changes)")
        lines += [f"    note: {n}" for n in s["notes"]]

    lines += ["", f"Routes ({len(plan.routes)}, first match wins)"]
    for r in plan.routes:
        keys = ", ".join(r["keys"]) if r["keys"] else "upstream primary key"
        extra = "  [shard merge]" if r["shard_merge"] else ""
        lines.append(
            f"  {r['upstream']} -> {r['target']}  source {r['source']}, keys {keys}{extra}  "
            f"({r['origin']})"
        )
        if r["ddl"]:
            lines.append(f"    ddl: {_kv(r['ddl'])}")
        if r["on_bad_message"]:
            lines.append(f"    on_bad_message: {r['on_bad_message']}")
        if r["ignore_columns"]:
            lines.append(f"    ignore_columns: {', '.join(r['ignore_columns'])}")
        if r["target_lag"] is not None:
            lines.append(f"    target_lag: {r['target_lag']}")
        if r["mode"] is not None:
            lines.append(f"    mode: {r['mode']}")

    if plan.overrides:
        lines += ["", f"DDL overrides ({len(plan.overrides)})"]
        for ov in plan.overrides:
            src = f" source {ov['source']}" if ov["source"] else ""
            lines.append(
                f"  {ov['upstream']} at {ov['commit_ts']}{src}: {ov['action']}  ({ov['origin']})"
            )
            if ov["sql"]:
                lines.append(f"    as: {ov['sql']}")
            if ov["note"]:
                lines.append(f"    note: {ov['note']}")

    lines += ["", f"Targets ({len(plan.targets)})"]
    if not plan.targets:
        lines.append(
            "  (none known yet: add CREATE TABLE statements under schema/ to see them here)"
        )
    for t, td in zip(plan.targets, d["targets"], strict=True):
        lines.append("")
        lines += _target_text(t, td)

    lines += ["", f"Warnings ({len(plan.warnings)})"]
    lines += [f"  - {w}" for w in plan.warnings] or ["  (none)"]
    sm = d["summary"]
    lines += [
        "",
        f"Summary: {sm['create']} to create, {sm['change']} to change, {sm['blocked']} blocked, "
        f"{sm['unchanged']} unchanged; {sm['pending_ddl']} pending DDL; {len(plan.warnings)} "
        "warnings",
    ]
    return "\n".join(lines) + "\n"


def _target_text(t: TargetPlan, td: dict[str, Any]) -> list[str]:
    status = td["status"]
    ups = ", ".join(td["upstream"]) or "-"
    if t.to_create:
        what = (
            f"to create from {t.create_from}" if t.create_from else "to create by its CREATE TABLE"
        )
        if t.load is not None:
            what = f"to create and load from the export at {t.load.snapshot_ts}"
        if t.create is None and not any(
            s.decision.action != policy.BLOCK for d in t.ddl for s in d.steps
        ):
            what = "to create: no schema known yet"
        if t.refused is not None:
            what = "cannot be created or loaded"
        if t.absent:
            what = f"not created: gone by the export's snapshot {t.from_snapshot}"
    else:
        what = f"applied up to {t.marker.applied_ts}"
        if t.load is not None:
            what += f"; to {'reload' if t.load.reload else 'load'} at {t.load.snapshot_ts}"
    if td["ddl"]:
        what += f", {len(td['ddl'])} DDL pending"
    out = [f"{_MARK[status]} {t.name} <- {ups} via {t.source}  [{what}]"]
    out.append(f"    keys: {', '.join(t.keys) or '(none)'}  ({t.keys_from})")
    out.append(f"    target lag: {td['target_lag']}  ({td['target_lag_from']})")
    out.append(f"    maintenance: {maintenance.text(td['maintenance'])}")
    out.append(f"    bad messages: {td['bad_message_policy']}")
    if t.mode is not Mode.MIRROR:
        extra = ", ".join(f"{c['name']} {c['delta_type']}" for c in td["mode_columns"])
        out.append(f"    mode: {t.mode.value}  ({t.mode_from}); adds {extra}")
    shown = layout.describe(t.partition_by, t.cluster_by)
    if t.relayout is not None:
        change = layout.change_text(_step_dict(t.relayout))
        out.append(f"    layout: {shown or 'none'}  (was {t.relayout.was}; {change})")
    elif shown is not None:
        out.append(f"    layout: {shown}")
    if (pc := td.get("properties_change")) is not None:
        out.append(f"    {entry_properties.change_text(pc)}")
        out += [f"      {x}" for x in pc["sql"]]
    if t.features or td["features_added"]:
        feats = ", ".join(t.features) or "-"
        changes = [f"+ {f}" for f in td["features_added"]]
        changes += [f"- {f}" for f in td["features_dropped"]]
        changes += [f"+ {c['feature']}" for c in td["feature_changes"] if c["feature"]]
        more = f"  ({', '.join(changes)})" if changes else ""
        out.append(f"    table features: {feats}{more}")
    for c in td["feature_changes"]:
        out += [f"    {c['describe']}:", f"      {c['sql']}"]
    cols = td["columns"]
    if cols:
        out.append("    columns:")
        w = max(len(c["name"]) for c in cols)
        mw = max(len(c["mysql_type"]) for c in cols)
        for c in cols:
            mark = c["mark"] or " "
            out.append(f"    {mark} {c['name']:<{w}}  {c['mysql_type']:<{mw}} -> {c['delta_type']}")
        lossy = [c for c in cols if c["lossy"]]
        if lossy:
            out.append("    lossy:")
            out += [f"      {c['name']}: {c['lossy']}" for c in lossy]
    for n in td["notes"]:
        out.append(f"    note: {n}")
    if t.refused is not None:
        out.append(f"    blocked: {t.refused}")
    if td["load"]:
        out += _load_text(td["load"])
    if td["create_sql"]:
        out += ["    create:", _indent(td["create_sql"], 6)]
    if (c := td["catalog"]) is not None:
        done = "pending" if c["pending"] else (c["recorded"] or "-")
        out.append(f"    catalog: {c['name']}  ({c['action']}; {done})")
        out += [f"      {x}" for x in c["statements"] if c["pending"]]
    for dd in td["ddl"]:
        out += _ddl_text(dd)
    if td["merge_sql"] and status != "unchanged":
        out += ["    merge (per row segment, on its keys in steps):", _indent(td["merge_sql"], 6)]
    if td["steps"]:
        out.append("    steps:")
        for i, st in enumerate(td["steps"], 1):
            out += _step_text(i, st)
    return out


def _step_text(i: int, st: dict[str, Any]) -> list[str]:
    kind = st["step"]
    head = f"      {i}. "
    if kind == "create":
        props = ", ".join(f"{k}={v}" for k, v in sorted(st["properties"].items()))
        shown = layout.describe(tuple(st.get("partition_by", ())), tuple(st.get("cluster_by", ())))
        return [head + "create" + (f" {shown}" if shown else "") + (f" ({props})" if props else "")]
    if kind == "features":
        return [head + f"table features: {'; '.join(st['parts'])}"]
    if kind == "layout":
        return [head + layout.change_text(st)]
    if kind == "properties":
        return [head + entry_properties.change_text(st)]
    if kind == "load":
        return [head + f"load at {st['snapshot_ts']}"]
    if kind == "ddl":
        return [
            head + f"DDL at {st['commit_ts']}" + (" (ahead of its rows)" if st["ahead"] else "")
        ]
    if kind == "stop":
        return [head + f"stop: blocked at the DDL at {st['commit_ts']}"]
    if kind == "halt":
        return [head + f"stop: {st['reason']}"]
    if kind == "catalog":
        return [head + f"catalog: {st['action']} {st['name']}"]
    span = f"rows {st['lo']} < commit_ts <= {st['hi']}"
    if not st["tables"]:
        return [head + f"{span}: no upstream schema known, nothing to merge"]
    keys = ", ".join(st["keys"]) or "(none)"
    out = [head + f"{span}: {st['write']} on {keys} ({st['keys_from']}; {st['write_why']})"]
    if st["error"]:
        out.append(f"         fails: {st['error']}")
    for t in st["tables"]:
        for sp in t["spans"]:
            fill = ", ".join(f"{k} = {v}" for k, v in sorted(sp["fill"].items()))
            out.append(
                f"         {t['upstream']} ({sp['lo']}, {sp['hi']}]: {', '.join(sp['columns'])}"
                + (f" (filled: {fill})" if fill else "")
            )
    return out


# Files listed per table in the text plan; the JSON plan lists them all.
MAX_FILES_SHOWN = 10


def _load_text(ld: dict[str, Any]) -> list[str]:
    what = "reload (replaces its rows and columns)" if ld["reload"] else "load"
    out = [
        f"    {what}: Dumpling export {ld['export']} at snapshot TSO {ld['snapshot_ts']}: "
        f"{ld['files']} {ld['filetype']} file(s), {ld['bytes']} bytes, one commit "
        f"(_commit_ts = {ld['snapshot_ts']}); then {ld['then']}"
    ]
    for t in ld["tables"]:
        out.append(f"      {t['upstream']}: schema {t['schema_file']}, {len(t['files'])} file(s)")
        for f in t["files"][:MAX_FILES_SHOWN]:
            out.append(f"        {f['name']} ({f['bytes']} bytes)")
        if len(t["files"]) > MAX_FILES_SHOWN:
            out.append(
                f"        ... and {len(t['files']) - MAX_FILES_SHOWN} more (plan --format json "
                "lists every file)"
            )
    return out


def _ddl_text(dd: dict[str, Any]) -> list[str]:
    status = {
        READY: "ready",
        BLOCKED: "BLOCKED",
        WAITING: "waiting",
        HELD: "held",
    }.get(dd["status"], dd["status"])
    head = f"    DDL at {dd['commit_ts']} on {', '.join(dd['upstream'])} ({dd['where']}): {status}"
    if dd["parts_done"]:
        head += f" (resumes at part {dd['parts_done'] + 1} of {len(dd['delta'])})"
    out = [head, f"      {dd['sql']}"]
    for ov in dd["overrides"]:
        out.append(
            f"      override ({ov['origin']}): {ov['action']}"
            + (f" as {ov['sql']}" if ov["sql"] else "")
        )
    for c in dd["changes"]:
        mark = {"apply": "~", "rebuild": "~", "skip": "=", "none": "=", "block": "!"}[c["decision"]]
        if c["classification"] == "additive" and c["decision"] == "apply":
            mark = "+"
        if (
            c["kind"] in ("drop_column", "drop_table", "truncate_table")
            and c["decision"] == "apply"
        ):
            mark = "-"
        out.append(f"      {mark} {c['describe']}  [{c['classification']}; {c['decision']}]")
    if dd["features_added"]:
        out.append(f"      adds table feature: {', '.join(dd['features_added'])}")
    if dd["status"] in (READY, WAITING):
        for p in dd["delta"]:
            if p["op"] in (OP_CREATE, OP_REBUILD) or not p["sql"]:
                out.append(f"        delta: {p['describe']}")
            else:
                out.append(f"        delta: {p['sql']}")
    if dd["reason"]:
        out.append(f"      {'BLOCKED' if dd['status'] == BLOCKED else 'why'}: {dd['reason']}")
    if dd["setting"]:
        out.append(f"      hint: set {dd['setting']}, then run again")
    return out


__all__ = ["COMMIT_TS", "plan_dict", "render_json", "render_text", "summary"]
