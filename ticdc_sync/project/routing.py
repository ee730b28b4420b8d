"""Routing: which target an upstream table lands in, and with which merge keys.

The one place these are decided (DESIGN.md §1 "tables/*.yml": first matching entry wins).
The plan carries its answers (a row segment's keys, `plan.model.Rows`) and the engine acts
on them without asking again. Pure Python: never imports pyspark, reads no files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ticdc_sync.core.model import Project, TableEntry
from ticdc_sync.core.upstream import TableSchema


@dataclass(frozen=True, slots=True)
class Route:
    """Upstream table `db.table` of `source` lands in target `target` by `entry`."""

    source: str
    db: str
    table: str
    target: str
    entry: TableEntry

    @property
    def upstream(self) -> str:
        return f"{self.db}.{self.table}"


def route(project: Project, source: str, db: str, table: str) -> Route | None:
    """The route of one upstream table, or None when no entry claims it (skipped)."""
    entry = project.route(source, db, table)
    if entry is None or not table:
        return None
    return Route(source, db, table, entry.target_name(db, table), entry)


def target_of(project: Project, source: str, db: str, table: str) -> str | None:
    r = route(project, source, db, table)
    return r.target if r is not None else None


@dataclass(frozen=True, slots=True)
class TargetRoute:
    """A target and every upstream table of one source routed into it (several for a shard
    merge), with the entry that routes them."""

    target: str
    source: str
    entry: TableEntry
    upstreams: tuple[tuple[str, str], ...]


def targets(
    project: Project, source: str, tables: Iterable[tuple[str, str]]
) -> tuple[dict[str, TargetRoute], tuple[tuple[str, str], ...]]:
    """Group `tables` (upstream (db, table) pairs of `source`) by target: the targets, and
    the tables no entry routes (skipped and counted)."""
    grouped: dict[str, tuple[TableEntry, set[tuple[str, str]]]] = {}
    skipped: set[tuple[str, str]] = set()
    for db, tbl in tables:
        if not tbl:
            continue  # schema-level DDL (CREATE DATABASE ...): nothing to route
        r = route(project, source, db, tbl)
        if r is None:
            skipped.add((db, tbl))
            continue
        grouped.setdefault(r.target, (r.entry, set()))[1].add((db, tbl))
    out = {
        name: TargetRoute(name, source, entry, tuple(sorted(ups)))
        for name, (entry, ups) in sorted(grouped.items())
    }
    return out, tuple(sorted(skipped))


def merge_keys(entry: TableEntry, schema: TableSchema) -> tuple[tuple[str, ...], str]:
    """The merge keys of a target and where they come from: ("entry", "primary key",
    "unique key", or "none" with no keys: the target cannot be merged)."""
    if entry.keys:
        return entry.keys, "entry"
    if schema.primary_key:
        return schema.primary_key, "primary key"
    hk = schema.handle_key()
    return hk, ("unique key" if hk else "none")


def no_keys_message(entry: TableEntry, target: str, schema: TableSchema) -> str:
    return (
        f"{entry.origin.render()}: target {target}: upstream {schema.qualified} has no primary "
        "key or NOT NULL unique key (hint: set `keys: [...]` on this table entry)"
    )
