"""Load a project folder into `model.Project`: YAML -> env values -> JSON Schema -> semantics.

Every problem in every file is collected and raised together as one `ProjectError`, each
rendered `file:line: key.path: message (hint: ...)` with project-relative file names.
Warnings (valid but worth knowing) go to `Project.warnings`. This module only puts the
parts together (in which order, what is skipped after a problem); it reads files only,
never imports pyspark and never writes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ticdc_sync.core.durations import parse_ms
from ticdc_sync.core.errors import Issue, ProjectError
from ticdc_sync.core.model import Output, Project, Source, TableEntry
from ticdc_sync.project.checks import (
    capture_folder_warnings,
    check_source_refs,
    semantic_checks,
)
from ticdc_sync.project.context import PROJECT_FILE, Ctx, check_file, check_items, issue_order
from ticdc_sync.project.profiles import DEFAULT_TARGET, load_output
from ticdc_sync.project.sources import parse_source
from ticdc_sync.project.tables import (
    parse_ddl_overrides,
    parse_defaults,
    parse_table,
    seed_schemas,
)
from ticdc_sync.project.yaml_lines import line_of

T = TypeVar("T")


def load_project(
    root: Path, target: str | None = None, profiles_dir: Path | None = None
) -> Project:
    """Load and check the project at `root` for profile target `target` (default: the
    profile's); profiles.yml from `profiles_dir` if given (else `profiles_path`)."""
    root = Path(root)
    ctx = Ctx(root)
    if not (root / PROJECT_FILE).is_file():
        raise ProjectError(
            [
                Issue(
                    ctx.rel(root / PROJECT_FILE) if root.is_dir() else str(root),
                    None,
                    "",
                    "no ticdc-sync project here",
                    "pass --project DIR, or create one with `ticdc-sync init DIR`",
                )
            ]
        )

    proj_data, proj_file = ctx.read_yaml(root / PROJECT_FILE, "project_file")
    proj_ok = check_file(ctx, proj_data, "project_file", proj_file)
    # name and profile are used even if another part of the file has a problem, so the
    # profile (and everything after it) is still checked.
    raw = proj_data if isinstance(proj_data, dict) else {}
    name = raw.get("name") if isinstance(raw.get("name"), str) else root.name
    profile_name = raw.get("profile") if isinstance(raw.get("profile"), str) else name
    defaults = parse_defaults(proj_data.get("defaults") if proj_ok else None)
    overrides = parse_ddl_overrides(ctx, proj_data, proj_file) if proj_ok else []

    output = load_output(ctx, profile_name, target, proj_data, profiles_dir)

    sources: list[Source] = _entries(ctx, root, "sources", parse_source)
    tables: list[TableEntry] = _entries(ctx, root, "tables", parse_table)

    seeds = seed_schemas(ctx, root)
    # Sources with problems of their own still exist for `source:` references.
    ctx.declared_sources = {
        str(item["name"])
        for path in sorted((root / "sources").glob("*.y*ml"))
        for item in ctx.raw.get(path, {}).get("sources") or []
        if isinstance(item, dict) and "name" in item
    }
    check_source_refs(ctx, root)
    for o in overrides:
        if o.source is not None and o.source not in ctx.declared_sources:
            known = ", ".join(sorted(ctx.declared_sources)) or "none defined"
            ctx.issues.append(
                Issue(
                    o.origin.file,
                    o.origin.line,
                    "ddl_overrides",
                    f"unknown source {o.source!r}",
                    f"use one of: {known}",
                )
            )
    semantic_checks(ctx, sources, tables, seeds)
    if output is not None:
        capture_folder_warnings(ctx, output, sources)

    if ctx.issues:
        raise ProjectError(sorted(ctx.issues, key=issue_order))
    return Project(
        name=name,
        root=root,
        output=output or Output(name=target or DEFAULT_TARGET),
        defaults=defaults,
        sources=tuple(sources),
        tables=tuple(tables),
        seed_schemas=seeds,
        warnings=tuple(w.render() for w in sorted(ctx.warnings, key=issue_order)),
        ddl_overrides=tuple(overrides),
        staging_retention_ms=parse_ms(
            ((proj_data.get("staging") or {}) if proj_ok else {}).get("retention", "7d")
        ),
        sync_every_ms=_sync_every(proj_data.get("sync_points") if proj_ok else None),
    )


def _sync_every(value: str | None) -> int | None:
    """`every 10m` (the schema checked its form) in milliseconds; None when not set."""
    if not value:
        return None
    return parse_ms(value.split()[-1]) or None


def _entries(ctx: Ctx, root: Path, key: str, parse: Callable[..., T]) -> list[T]:
    """Every entry under `key` of the YAML files in `<root>/<key>/` (`sources`, `tables`),
    parsed in file order; each remembers its key path and node for later issues."""
    entries: list[T] = []
    for path in sorted((root / key).glob("*.y*ml")):
        data, file = ctx.read_yaml(path, f"{key}_file")
        for i in check_items(ctx, data, f"{key}_file", file, key):
            entry = parse(ctx, data[key][i], file, line_of(data, (key, i)), f"{key}[{i}]")
            ctx.paths[id(entry)] = f"{key}[{i}]"
            ctx.nodes[id(entry)] = (data, (key, i))
            entries.append(entry)
    return entries
