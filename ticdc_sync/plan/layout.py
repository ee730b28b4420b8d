"""A target's layout: the columns it is partitioned by (Delta `PARTITIONED BY`) or clustered
by (liquid clustering, `CLUSTER BY`), decided once from its table entry and its table.

The entry's `partition_by` / `cluster_by` name upstream columns of the target's table; a
name that is not one is a plan error naming the entry's file:line and the column (the
target is not created: a CREATE with such a clause would fail, or lay out another table).

Why the write paths care: the rewrite and the round commit through delta-rs, which writes a
partitioned table's files without their partition values (the rewrite's files are plain
Parquet of every column) and refuses a clustered table's writer features (`clustering`,
`domainMetadata`); both kinds of target take Delta's MERGE (`plan.write_path`), whose update
of a row to another partition deletes it from the old one in the same commit.

Pure: made from the plan's inputs only.
"""

from __future__ import annotations

from typing import Any

from ticdc_sync.core.model import TableEntry
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.plan.model import Layout
from ticdc_sync.warehouse.state import TargetState

# The writer features Delta gives a clustered table (Delta 4.x: protocol 1/7).
CLUSTERING_FEATURES = ("clustering", "domainMetadata")


def where(entry: TableEntry) -> str:
    """The entry's `partition_by` / `cluster_by` key, as file:line."""
    line = entry.layout_line or entry.origin.line
    return f"{entry.origin.file}:{line}" if line else entry.origin.file


def key_name(entry: TableEntry) -> str:
    return "partition_by" if entry.partition_by else "cluster_by"


def refusal(entry: TableEntry, schema: TableSchema | None) -> str | None:
    """Why the entry's layout cannot be made for a table of `schema` (a column it names is
    not one of the table's), or None."""
    wanted = entry.partition_by or entry.cluster_by
    if not wanted or schema is None:
        return None
    have = {c.name.lower(): c.name for c in schema.columns}
    missing = [c for c in wanted if c.lower() not in have]
    if not missing:
        return None
    return (
        f"{where(entry)}: {key_name(entry)} column {missing[0]!r} is not a column of "
        f"{schema.qualified} (its columns: {', '.join(have.values())}); name upstream columns "
        "of the table"
    )


def columns(entry: TableEntry, state: TargetState) -> tuple[str, tuple[str, ...]]:
    """The key (`partition_by` / `cluster_by`, "" for neither) and columns of the layout
    the target has (as its table has it, or as the entry creates it)."""
    if state.exists:
        if state.partition_by:
            return "partition_by", state.partition_by
        return ("cluster_by", state.cluster_by) if state.cluster_by else ("", ())
    if entry.partition_by or entry.cluster_by:
        return key_name(entry), entry.partition_by or entry.cluster_by
    return "", ()


def resolved(names: tuple[str, ...], schema: TableSchema | None) -> tuple[str, ...]:
    """`names` spelled as the table's columns are (MySQL names are case-insensitive)."""
    if schema is None:
        return names
    have = {c.name.lower(): c.name for c in schema.columns}
    return tuple(have.get(n.lower(), n) for n in names)


def describe(partition_by: tuple[str, ...], cluster_by: tuple[str, ...]) -> str | None:
    """`partitioned by (a, b)` / `clustered by (a)`, or None for neither."""
    if partition_by:
        return f"partitioned by ({', '.join(partition_by)})"
    if cluster_by:
        return f"clustered by ({', '.join(cluster_by)})"
    return None


def change(entry: TableEntry, state: TargetState, schema: TableSchema | None) -> Layout | None:
    """The step that brings existing target `state` to the layout `entry` asks for (of the
    table's columns: `schema`), or None when it has it. Clustering changes in place; a
    partitioning that differs from the table's rebuilds it."""
    if not state.exists:
        return None
    partition_by = resolved(entry.partition_by, schema)
    cluster_by = resolved(entry.cluster_by, schema)

    def lower(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(n.lower() for n in names)

    rebuild = lower(partition_by) != lower(state.partition_by)
    if not rebuild and lower(cluster_by) == lower(state.cluster_by):
        return None
    was = describe(state.partition_by, state.cluster_by) or "none"
    return Layout(partition_by, cluster_by, rebuild, was)


def change_text(step: dict[str, Any]) -> str:
    """A `Layout` step as `plan` shows it (from its JSON form)."""
    shown = describe(tuple(step["partition_by"]), tuple(step["cluster_by"])) or "no layout"
    if step["rebuild"]:
        how = "rebuild: its rows rewritten in one commit"
        if step["cluster_by"]:
            how += ", then ALTER TABLE ... CLUSTER BY"
        return f"layout: {shown} ({how})"
    return f"layout: {shown} (in place: ALTER TABLE ... CLUSTER BY)"
