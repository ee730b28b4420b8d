"""Delta table features of a target: what it is created with, what a DDL enables, what a
compatibility setting (`table_features`) removes, and the Spark SQL of each.

A target carries only the features its history needs (DESIGN.md §1 "What lands"), because
each one locks out some readers (docs/table-features.md). Pure Python: text
and decisions only, never imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable

from ticdc_sync.core.model import FeatureUse, TableFeatures
from ticdc_sync.core.sizes import render_bytes
from ticdc_sync.ddl.changes import (
    AddColumn,
    ChangeColumnType,
    DeltaChange,
    DropColumn,
    RenameColumn,
)

COLUMN_MAPPING = "columnMapping"
TYPE_WIDENING = "typeWidening"
DELETION_VECTORS = "deletionVectors"
TIMESTAMP_NTZ = "timestampNtz"

# What `CREATE TABLE` gives every Delta table (protocol 1,2); Spark lists them as features.
LEGACY = ("appendOnly", "invariants")

# The `table_features` key that governs each feature a DDL may need.
SETTING = {COLUMN_MAPPING: "column_mapping", TYPE_WIDENING: "type_widening"}

# Readers (as measured, docs/table-features.md) that cannot read a table with
# the feature, for plan notes and block reasons.
LOCKS_OUT = {
    COLUMN_MAPPING: "polars and delta-rs to_pyarrow_table",
    TYPE_WIDENING: "polars and delta-rs",
    DELETION_VECTORS: "delta-rs to_pyarrow_table",
}

_ENABLE = {
    # timestampNtz (a reader feature every reader tested reads) keeps the protocol at reader
    # version 3, with columnMapping among its reader features: alone, column mapping on a
    # reader-1 table gives the legacy reader version 2, which DuckDB's Delta extension
    # refuses ("Writer features must be Writer-only or also listed in reader features").
    COLUMN_MAPPING: "'delta.feature.timestampNtz' = 'supported', 'delta.columnMapping.mode' = 'name'",
    TYPE_WIDENING: "'delta.enableTypeWidening' = 'true'",
    DELETION_VECTORS: "'delta.enableDeletionVectors' = 'true'",
}

# What dropping each feature rewrites (Delta 4's checkpoint-protected DROP FEATURE), for
# the plan to say.
DROP_COST = {
    COLUMN_MAPPING: "rewrites every data file with plain column names",
    TYPE_WIDENING: "rewrites the files written before a widening",
    DELETION_VECTORS: "rewrites the files that have deletion vectors",
}


# Characters Delta accepts in a column name only under column mapping (its error
# DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES); MySQL allows them in quoted identifiers.
_MAPPED_ONLY = frozenset(" ,;{}()\n\t=")


def name_needs_mapping(name: str) -> bool:
    """Whether Delta can hold a column of this name only with column mapping."""
    return any(ch in _MAPPED_ONLY for ch in name)


def create_properties(settings: TableFeatures, names: Iterable[str] = ()) -> dict[str, str]:
    """TBLPROPERTIES of a new target: deletion vectors where the setting asks for them (by
    default none). Nothing else: column mapping and type widening come
    with the first DDL that needs them (column mapping at CREATE only when a column name
    needs it); timestampNtz comes with a TIMESTAMP_NTZ column (at CREATE by itself; an ADD
    COLUMN enables it, `ddl.delta_sql`). No column defaults: an ADD COLUMN backfills with
    an UPDATE and every row the sink writes names every column."""
    props: dict[str, str] = {}
    if settings.deletion_vectors:
        # Only where asked: a MERGE then marks the rows it replaces instead of rewriting
        # their files (its cost follows the batch, not the table: benchmarks/README.md),
        # but delta-rs's to_pyarrow_table/to_pandas refuse the table.
        props["delta.enableDeletionVectors"] = "true"
    if any(name_needs_mapping(n) for n in names):
        # With timestampNtz, as `_ENABLE` explains: the reader protocol stays at 3.
        props["delta.feature.timestampNtz"] = "supported"
        props["delta.columnMapping.mode"] = "name"
    return props


def created_with(columns: Iterable[tuple[str, str]], settings: TableFeatures) -> tuple[str, ...]:
    """The features Spark lists for a target created with these (name, Delta type) columns."""
    columns = list(columns)
    found = set(LEGACY)
    if settings.deletion_vectors:
        found.add(DELETION_VECTORS)
    if any("TIMESTAMP_NTZ" in t.upper() for _, t in columns):
        found.add(TIMESTAMP_NTZ)
    if any(name_needs_mapping(n) for n, _ in columns):
        found |= {COLUMN_MAPPING, TIMESTAMP_NTZ}
    return tuple(sorted(found))


def needed_by(change: DeltaChange) -> str | None:
    """The feature a change needs to be a metadata-only commit (else a rewrite)."""
    if isinstance(change, (DropColumn, RenameColumn)):
        return COLUMN_MAPPING
    if isinstance(change, AddColumn) and name_needs_mapping(change.name):
        return COLUMN_MAPPING
    if isinstance(change, ChangeColumnType) and change.change == "widen":
        return TYPE_WIDENING
    return None


def rebuild_avoids(change: DeltaChange) -> bool:
    """Whether rewriting the table (`rebuild`) makes the change without its feature: not
    for a column whose name needs column mapping."""
    return not isinstance(change, AddColumn)


def use(settings: TableFeatures, feature: str) -> FeatureUse:
    """What the setting says a DDL that needs `feature` does."""
    return FeatureUse(getattr(settings, SETTING[feature]))


def keeps_off(settings: TableFeatures, feature: str, data_bytes: int) -> bool:
    """Whether the setting keeps `feature` off a target of `data_bytes` bytes."""
    how = use(settings, feature)
    if how is FeatureUse.AUTO:
        return data_bytes < settings.rebuild_below
    return how is not FeatureUse.ENABLE


def size_against_threshold(settings: TableFeatures, data_bytes: int) -> str:
    """Why `auto` rebuilds or enables on a target of `data_bytes` bytes, for `plan`:
    `target 934 B < table_features.rebuild_below 1 GiB` (or `>=`)."""
    op = "<" if data_bytes < settings.rebuild_below else ">="
    return (
        f"target {render_bytes(data_bytes)} {op} "
        f"table_features.rebuild_below {render_bytes(settings.rebuild_below)}"
    )


def enable_sql(feature: str, ref: str) -> str:
    """Enable `feature` on the target `ref` (idempotent: a resumed run repeats it)."""
    return f"ALTER TABLE {ref} SET TBLPROPERTIES ({_ENABLE[feature]})"


def enabled_by(feature: str) -> tuple[str, ...]:
    """The features one `enable_sql(feature)` adds."""
    return (TIMESTAMP_NTZ, COLUMN_MAPPING) if feature == COLUMN_MAPPING else (feature,)


def drop_sql(feature: str, ref: str) -> str:
    """Remove `feature` from the target `ref`. Without TRUNCATE HISTORY, Delta 4 drops it at
    once and leaves the writer-only feature checkpointProtection, which every reader reads;
    with it, a feature that was used could only be dropped after 24 hours."""
    return f"ALTER TABLE {ref} DROP FEATURE {feature}"


# Delta's error for a feature the table does not have: a resumed drop that had finished.
DROP_DONE = ("DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT",)


def unwanted(
    features: Iterable[str],
    settings: TableFeatures,
    names: Iterable[str] = (),
    data_bytes: int = 0,
) -> tuple[str, ...]:
    """The features an existing target has that the setting keeps off it: under `auto`, on
    a target of fewer than `rebuild_below` bytes (`data_bytes`), as a DDL would rebuild it.
    Column mapping stays while a column's name needs it (`name_needs_mapping`): Delta
    cannot drop it then."""
    have = set(features)
    out = []
    if not settings.deletion_vectors and DELETION_VECTORS in have:
        out.append(DELETION_VECTORS)
    kept = any(name_needs_mapping(n) for n in names)
    for feature in (COLUMN_MAPPING, TYPE_WIDENING):
        if feature == COLUMN_MAPPING and kept:
            continue
        if feature in have and keeps_off(settings, feature, data_bytes):
            out.append(feature)
    return tuple(out)


def missing(features: Iterable[str], settings: TableFeatures) -> tuple[str, ...]:
    """The features the setting wants on every target that an existing one lacks."""
    if settings.deletion_vectors and DELETION_VECTORS not in set(features):
        return (DELETION_VECTORS,)
    return ()
