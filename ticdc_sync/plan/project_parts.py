"""The plan's project-level parts: the output and defaults as a plan shows them (no secrets,
no absolute local paths), the routes with their warnings, the DDL overrides, and the
digest of the project files a saved plan was made from.

Reads project files only for the digest; never writes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from ticdc_sync.core.durations import render_ms
from ticdc_sync.core.model import DdlKind, Mode, Project, TableEntry, TransportKind
from ticdc_sync.core.secrets import IN_PLANS, redacted
from ticdc_sync.plan.workers import apply_workers


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


def output_dict(project: Project) -> dict[str, Any]:
    out = project.output
    transport: dict[str, Any] = {"type": out.transport.kind.value}
    if out.transport.kind is TransportKind.FILES:
        transport["captures"] = display_location(project, out.transport.captures or "captures")
    else:
        transport["bootstrap_servers"] = out.transport.bootstrap_servers
        transport["starting_offsets"] = out.transport.starting_offsets
        transport["options"] = redacted(out.transport.kafka_options, IN_PLANS)
    master = f"remote {out.spark_remote}" if out.spark_remote else out.spark_master
    workers, workers_from = apply_workers(out.apply_workers, master, os.cpu_count())
    remote = {"spark_remote": out.spark_remote} if out.spark_remote else {}
    cat = out.catalog
    catalog = {"catalog": {"name": cat.name, "metastore": cat.metastore}} if cat is not None else {}
    return {
        **remote,
        **catalog,
        "spark_master": out.spark_master,
        "spark_conf": redacted(out.spark_conf, IN_PLANS),
        "jars_dir": display_location(project, out.jars_dir) if out.jars_dir else None,
        "warehouse": display_location(project, out.warehouse),
        "transport": transport,
        "apply_workers": workers,
        "apply_workers_from": workers_from,
    }


def defaults_dict(project: Project) -> dict[str, Any]:
    return {
        "ddl": {
            k.value: v.value
            for k, v in sorted(project.defaults.ddl.items(), key=lambda kv: kv[0].value)
        },
        "on_bad_message": project.defaults.on_bad_message.value,
        "target_lag": render_ms(project.target_lag_default()[0]),
        "target_lag_from": project.target_lag_default()[1],
        "mode": (project.defaults.mode or Mode.MIRROR).value,
    }


def policy_diff(project: Project, entry: TableEntry) -> dict[str, str]:
    """The DDL policies of an entry that differ from the project defaults."""
    return {
        k.value: project.ddl_policy(entry, k).value
        for k in sorted(DdlKind, key=lambda k: k.value)
        if k in entry.ddl and entry.ddl[k] != project.defaults.ddl.get(k)
    }


def route_dicts(
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
            "target_lag": render_ms(e.target_lag_ms) if e.target_lag_ms is not None else None,
            "mode": e.mode.value if e.mode is not None else None,
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


def override_dict(o) -> dict[str, Any]:
    return {
        "upstream": o.upstream,
        "commit_ts": o.commit_ts,
        "action": o.action.value,
        "sql": o.sql,
        "source": o.source,
        "note": o.note,
        "origin": o.origin.render(),
    }
