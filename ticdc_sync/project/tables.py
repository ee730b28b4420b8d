"""Table entries of tables/*.yml -> `TableEntry`; ticdc_sync.yml's `defaults` and
`ddl_overrides`; the seed schemas of schema/*.sql.

Checks what one entry can say about itself; checks across entries are `checks`. This
module never reads the warehouse or a topic.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ticdc_sync.core import table_properties
from ticdc_sync.core.durations import parse_ms
from ticdc_sync.core.errors import DdlError, Issue
from ticdc_sync.core.model import (
    DEFAULT_DDL_POLICY,
    Action,
    BadMessagePolicy,
    DdlKind,
    DdlOverride,
    Defaults,
    FeatureUse,
    MaintenanceOptions,
    Mode,
    Origin,
    OverrideAction,
    TableEntry,
    TableFeatures,
)
from ticdc_sync.core.sizes import parse_bytes
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.project.context import Ctx
from ticdc_sync.project.yaml_lines import line_of

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def parse_defaults(d: Any) -> Defaults:
    if not d:
        return Defaults()
    policy = dict(DEFAULT_DDL_POLICY)
    policy.update({DdlKind(k): Action(v) for k, v in (d.get("ddl") or {}).items()})
    return Defaults(
        ddl=policy,
        on_bad_message=BadMessagePolicy(d.get("on_bad_message", BadMessagePolicy.FAIL.value)),
        table_features=TableFeatures().with_overrides(_table_features(d)),
        target_lag_ms=parse_ms(d["target_lag"]) if "target_lag" in d else None,
        mode=Mode(d["mode"]) if "mode" in d else None,
        rewrite_below=parse_bytes(d["rewrite_below"]) if "rewrite_below" in d else None,
        maintenance=parse_maintenance(d.get("maintenance")) or MaintenanceOptions(),
    )


def parse_maintenance(d: Any) -> MaintenanceOptions | None:
    """`maintenance:` of a defaults block or a table entry (None: not there)."""
    if d is None:
        return None
    return MaintenanceOptions(
        enabled=bool(d["enabled"]) if "enabled" in d else None,
        compact_small_files=int(d["compact_small_files"]) if "compact_small_files" in d else None,
        retain_ms=parse_ms(d["retain"]) if "retain" in d else None,
        vacuum_every_ms=parse_ms(d["vacuum_every"]) if "vacuum_every" in d else None,
    )


def _table_features(d: Any) -> dict[str, object]:
    """`table_features` of a defaults block or a table entry, as TableFeatures fields."""
    out: dict[str, object] = {}
    for k, v in (d.get("table_features") or {}).items():
        if k == "deletion_vectors":
            out[k] = v
        elif k == "rebuild_below":
            out[k] = parse_bytes(v)
        else:
            out[k] = FeatureUse(v)
    return out


def parse_table(ctx: Ctx, item: Any, file: str, line: int | None, kp: str) -> TableEntry:
    name = item.get("name", "{table}")
    accepts = bool(item.get("accept_reader_loss", False))
    for k in ("name", "schema", "table"):
        text = str(item.get(k, ""))
        bad = sorted({p for p in _PLACEHOLDER.findall(text) if p not in ("db", "table")})
        if bad:
            ctx.issues.append(
                Issue(
                    file,
                    item.key_lines.get(k, line),
                    f"{kp}.{k}",
                    f"unknown placeholder {{{bad[0]}}} in {text!r}",
                    "only {db} and {table} are available",
                )
            )
    return TableEntry(
        upstream=item["upstream"],
        name=name,
        source=item.get("source"),
        keys=tuple(item.get("keys") or ()),
        ddl={DdlKind(k): Action(v) for k, v in (item.get("ddl") or {}).items()},
        on_bad_message=BadMessagePolicy(item["on_bad_message"])
        if "on_bad_message" in item
        else None,
        ignore_columns=tuple(str(c).lower() for c in item.get("ignore_columns") or ()),
        table_features=_table_features(item),
        origin=Origin(file, line),
        initial_load=bool(item.get("initial_load", True)),
        target_lag_ms=parse_ms(item["target_lag"]) if "target_lag" in item else None,
        mode=Mode(item["mode"]) if "mode" in item else None,
        rewrite_below=parse_bytes(item["rewrite_below"]) if "rewrite_below" in item else None,
        maintenance=parse_maintenance(item.get("maintenance")),
        catalog_schema=str(item.get("schema", "{db}")),
        catalog_table=str(item["table"]) if "table" in item else None,
        catalog_on_drop=str(item.get("catalog_on_drop", "drop")),
        properties=_properties(ctx, item, file, line, kp, accepts),
        comment=str(item["comment"]) if "comment" in item else None,
        accept_reader_loss=accepts,
        partition_by=tuple(str(c) for c in item.get("partition_by") or ()),
        cluster_by=tuple(str(c) for c in item.get("cluster_by") or ()),
        layout_line=_layout_line(ctx, item, file, line, kp),
    )


def _layout_line(ctx: Ctx, item: Any, file: str, line: int | None, kp: str) -> int | None:
    """The line of the entry's `partition_by` or `cluster_by`; both: an issue (a Delta
    table is partitioned or clustered, not both)."""
    keys = [k for k in ("partition_by", "cluster_by") if item.get(k)]
    if len(keys) == 2:
        ctx.issues.append(
            Issue(
                file,
                item.key_lines.get("cluster_by", line),
                f"{kp}.cluster_by",
                "partition_by and cluster_by together: Delta refuses a table both "
                "partitioned and clustered",
                "keep one (cluster_by: liquid clustering, which OPTIMIZE keeps up)",
            )
        )
    return item.key_lines.get(keys[0], line) if keys else None


def _properties(ctx: Ctx, item: Any, file: str, line: int | None, kp: str, accepts: bool) -> tuple:
    """The entry's `properties`; one `table_properties` refuses (`accepts`: the entry's
    `accept_reader_loss`) is an issue naming its line."""
    props = item.get("properties") or {}
    lines = getattr(props, "key_lines", {})
    for k in sorted(props, key=str):
        refused = table_properties.refusal(str(k), accepts)
        if refused is not None:
            at = lines.get(k, item.key_lines.get("properties", line))
            ctx.issues.append(Issue(file, at, f"{kp}.properties.{k}", *refused))
    return tuple(sorted((str(k), _text(v)) for k, v in props.items()))


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def parse_ddl_overrides(ctx: Ctx, data: Any, file: str) -> list[DdlOverride]:
    """`ddl_overrides` of ticdc_sync.yml; the SQL of apply_as/applied must be readable."""
    from ticdc_sync.ddl import parse_ddl
    from ticdc_sync.ddl.statements import Unknown

    out: list[DdlOverride] = []
    seen: dict[tuple[str | None, str, int], int] = {}
    for i, item in enumerate(data.get("ddl_overrides") or []):
        kp = f"ddl_overrides[{i}]"
        line = line_of(data, ("ddl_overrides", i))
        action = OverrideAction(item["action"])
        sql = item.get("sql")
        upstream = str(item["upstream"])
        if action is not OverrideAction.SKIP and not sql:
            ctx.issues.append(
                Issue(
                    file,
                    line,
                    kp,
                    f"action {action.value} needs `sql`",
                    "give the DDL as "
                    "ticdc-sync should read it, e.g. the statement without the option it cannot read",
                )
            )
            continue
        if sql:
            db = upstream.split(".", 1)[0]
            unknown = [s for s in parse_ddl(sql, db) if isinstance(s, Unknown)]
            if unknown:
                ctx.issues.append(
                    Issue(
                        file,
                        item.key_lines.get("sql", line),
                        f"{kp}.sql",
                        f"not understood by ticdc-sync either: {unknown[0].reason}",
                        "write plain MySQL DDL (ALTER TABLE ... ADD COLUMN ...)",
                    )
                )
                continue
        key = (item.get("source"), upstream.lower(), int(item["commit_ts"]))
        if key in seen:
            ctx.issues.append(
                Issue(
                    file,
                    line,
                    kp,
                    f"a second override of {upstream} at commit_ts "
                    f"{key[2]} (first at line {seen[key]})",
                    "keep one",
                )
            )
            continue
        seen[key] = line or 0
        out.append(
            DdlOverride(
                upstream=upstream,
                commit_ts=int(item["commit_ts"]),
                action=action,
                sql=sql,
                source=item.get("source"),
                note=item.get("note"),
                origin=Origin(file, line),
            )
        )
    return out


def seed_schemas(ctx: Ctx, root: Path) -> dict[tuple[str, str], TableSchema]:
    files = sorted((root / "schema").glob("*.sql"))
    if not files:
        return {}
    # Imported here so a project without schema/ needs nothing from the DDL module.
    from ticdc_sync.ddl import parse_schema_sql

    out: dict[tuple[str, str], TableSchema] = {}
    seen: dict[tuple[str, str], str] = {}
    for path in files:
        file = ctx.rel(path)
        try:
            schemas = parse_schema_sql(path.read_text("utf-8"), path.stem, file)
        except DdlError as exc:
            ctx.issues.append(
                Issue(file, _line_from(str(exc)), "", str(exc), "fix the SQL or remove the file")
            )
            continue
        for s in schemas:
            k = (s.db.lower(), s.table.lower())
            if k in out:
                ctx.issues.append(
                    Issue(
                        file,
                        None,
                        "",
                        f"table {s.qualified} is already defined in {seen[k]}",
                        "define it once",
                    )
                )
                continue
            out[k] = s
            seen[k] = file
    return dict(sorted(out.items()))


def _line_from(message: str) -> int | None:
    m = re.search(r"\bline (\d+)", message)
    return int(m.group(1)) if m else None
