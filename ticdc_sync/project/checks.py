"""Checks across entries, once each entry is parsed: unique source names, one protocol per
topic, routes that shadow or collide, keys and layout columns missing from seed schemas, `source:`
references, and files-transport topics without a capture folder (a warning).

Problems go to the load's `Ctx`; this module builds nothing and never reads the warehouse.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from ticdc_sync.core.errors import Issue
from ticdc_sync.core.model import Output, Protocol, Source, TableEntry, TransportKind
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.project.context import Ctx
from ticdc_sync.project.yaml_lines import line_of


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def target_glob(entry: TableEntry) -> str:
    """The set of target names an entry can produce, as one fnmatch pattern (lower case)."""
    return (
        entry.name.replace("{db}", entry.upstream_db)
        .replace("{table}", entry.upstream_table)
        .lower()
    )


def is_shard_merge(entry: TableEntry) -> bool:
    """A table-pattern route whose name template does not vary with the table: merge shards."""
    return _is_glob(entry.upstream_table) and "{table}" not in entry.name


def _sources_overlap(a: TableEntry, b: TableEntry) -> bool:
    return a.source is None or b.source is None or a.source == b.source


def check_source_refs(ctx: Ctx, root: Path) -> None:
    """`source:` of every table item, even items with other problems, must name a source."""
    known = ", ".join(sorted(ctx.declared_sources)) or "none defined"
    for path in sorted((root / "tables").glob("*.y*ml")):
        data = ctx.raw.get(path) or {}
        items = data.get("tables")
        for i, item in enumerate(items if isinstance(items, list) else []):
            src = item.get("source") if isinstance(item, dict) else None
            if isinstance(src, str) and src not in ctx.declared_sources:
                ctx.issues.append(
                    Issue(
                        ctx.rel(path),
                        line_of(data, ("tables", i, "source")),
                        f"tables[{i}].source",
                        f"unknown source {src!r}",
                        f"sources: {known}",
                    )
                )


def capture_folder_warnings(ctx: Ctx, output: Output, sources: list[Source]) -> None:
    """A files-transport topic without a capture folder reads nothing, ever: most likely a
    typo in `topics:` (with Kafka, a missing topic is an error when `run` reads it)."""
    t = output.transport
    if t.kind is not TransportKind.FILES:
        return
    folder = Path(t.captures or "captures")
    root = folder if folder.is_absolute() else ctx.root / folder
    for s in sources:
        for topic in s.topics:
            if not (root / topic).is_dir():
                shown = f"{t.captures or 'captures'}/{topic}"
                ctx.warnings.append(
                    Issue(
                        s.origin.file,
                        s.origin.line,
                        ctx.path(s),
                        f"topic {topic} has no capture folder {shown}: nothing will be read "
                        "from it",
                        "check the topic name, or record it with `ticdc-sync capture`",
                        severity="warning",
                    )
                )


def semantic_checks(
    ctx: Ctx,
    sources: list[Source],
    tables: list[TableEntry],
    seeds: dict[tuple[str, str], TableSchema],
) -> None:
    names: dict[str, Source] = {}
    for s in sources:
        if s.name in names:
            ctx.issues.append(
                Issue(
                    s.origin.file,
                    s.origin.line,
                    ctx.path(s),
                    f"source {s.name!r} is already defined at {names[s.name].origin.render()}",
                    "source names must be unique",
                )
            )
        names.setdefault(s.name, s)
        if s.protocol is Protocol.CANAL_JSON and not s.options.enable_tidb_extension:
            ctx.warnings.append(
                Issue(
                    s.origin.file,
                    s.origin.line,
                    ctx.path(s),
                    "canal-json without enable-tidb-extension has no commit_ts and no watermarks: "
                    "changes are ordered by partition offset and `es` only",
                    "create the changefeed with enable-tidb-extension=true",
                    severity="warning",
                )
            )
    topic_owner: dict[str, Source] = {}
    for s in sources:
        for t in s.topics:
            if t in topic_owner and topic_owner[t].protocol != s.protocol:
                ctx.issues.append(
                    Issue(
                        s.origin.file,
                        ctx.line(s, "topics"),
                        ctx.path(s, "topics"),
                        f"topic {t!r} is also read by source {topic_owner[t].name!r} with another protocol",
                        "a topic carries one protocol",
                    )
                )
            topic_owner.setdefault(t, s)

    for i, e in enumerate(tables):
        if _is_glob(e.upstream_db) and "{db}" not in e.name:
            ctx.entry_issue(
                e,
                "name",
                f"{e.upstream!r} spans databases but name {e.name!r} has no {{db}}: "
                "tables of different databases would land in one target",
                'use a name like "{db}_{table}", or one entry per database',
            )
        for prev in tables[:i]:
            _pair_checks(ctx, prev, e)
        for (db, tbl), schema in seeds.items():
            if e.keys and e.matches(db, tbl):
                missing = [k for k in e.keys if schema.column(k) is None]
                if missing:
                    ctx.entry_issue(
                        e,
                        "keys",
                        f"{schema.qualified} has no column {missing[0]!r}",
                        "columns: " + ", ".join(schema.column_names()),
                    )
            layout = e.partition_by or e.cluster_by
            if layout and e.matches(db, tbl):
                missing = [c for c in layout if schema.column(c) is None]
                if missing:
                    key = "partition_by" if e.partition_by else "cluster_by"
                    ctx.entry_issue(
                        e,
                        key,
                        f"{key} column {missing[0]!r} is not a column of {schema.qualified}",
                        "name upstream columns of the table; columns: "
                        + ", ".join(schema.column_names()),
                    )


def _pair_checks(ctx: Ctx, prev: TableEntry, e: TableEntry) -> None:
    if _sources_overlap(prev, e):
        if not _is_glob(e.upstream) and e.upstream.lower() == prev.upstream.lower():
            ctx.entry_issue(
                e,
                "upstream",
                f"{e.upstream} is already claimed by the entry at {prev.origin.render()}",
                "one entry per upstream table and source; set `source:` to route sources apart",
            )
            return
        if (
            not _is_glob(e.upstream)
            and prev.is_pattern
            and prev.matches(e.upstream_db, e.upstream_table)
        ):
            ctx.entry_issue(
                e,
                "upstream",
                f"{e.upstream} is already claimed by pattern {prev.upstream!r} at {prev.origin.render()}; "
                "entries match in order, so this one is never used",
                "move this entry before the pattern (files are read in name order)",
            )
            return
    a, b = target_glob(prev), target_glob(e)
    collide = (
        a == b
        or (not _is_glob(a) and fnmatch.fnmatchcase(a, b))
        or (not _is_glob(b) and fnmatch.fnmatchcase(b, a))
    )
    if collide:
        ctx.entry_issue(
            e,
            "name",
            f"target {e.name!r} of {e.upstream} can collide with target {prev.name!r} of {prev.upstream} at {prev.origin.render()}",
            "give the routes distinct names, e.g. a prefix per source",
        )
