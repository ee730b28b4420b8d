"""Table features in a target's plan: the commits that bring an existing target to its
`table_features` setting, which features each DDL adds, and the TBLPROPERTIES a target is
created with (`table_features` decides which features exist and their SQL; this module only
places them in the plan).

Pure: never reads or writes anything.
"""

from __future__ import annotations

from dataclasses import replace

from ticdc_sync.core import datatypes
from ticdc_sync.core.model import FeatureUse, TableFeatures
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.plan import layout
from ticdc_sync.plan import table_features as tf
from ticdc_sync.plan.model import OP_CREATE, OP_SQL, DeltaPart, TargetDdl
from ticdc_sync.plan.properties import record


def feature_setting_parts(
    features: tuple[str, ...],
    settings,
    ref: str,
    names: tuple[str, ...] = (),
    data_bytes: int = 0,
) -> tuple[DeltaPart, ...]:
    """Commits that bring an existing target's table features to its `table_features`
    setting, in both directions: a feature the setting keeps off is dropped (column mapping
    not while one of the target's column `names` needs it), deletion vectors switched on
    again are enabled (column mapping and type widening come with the DDL that needs
    them)."""
    parts = [
        DeltaPart(
            f"drop table feature {f} ({tf.DROP_COST[f]}; {_why_off(f, settings, data_bytes)})",
            OP_SQL,
            tf.drop_sql(f, ref),
            tolerate=tf.DROP_DONE,
            feature_dropped=f,
        )
        for f in tf.unwanted(features, settings, names, data_bytes)
    ]
    parts += [
        DeltaPart(
            f"enable table feature {f} (`table_features`)", OP_SQL, tf.enable_sql(f, ref), feature=f
        )
        for f in tf.missing(features, settings)
    ]
    return tuple(parts)


def _why_off(feature: str, settings: TableFeatures, data_bytes: int) -> str:
    key = tf.SETTING.get(feature)
    if key is None or tf.use(settings, feature) is not FeatureUse.AUTO:
        return "`table_features`"
    why = tf.size_against_threshold(settings, data_bytes)
    return f"`table_features.{key}: auto`: {why}, keeps every reader"


def features_added(ddl: list[TargetDdl], have: set[str], settings) -> list[TargetDdl]:
    """Each DDL with the table features it adds to the target (those it has not got by then:
    the enabling part is in every such DDL, so that part numbers stay stable on resume)."""
    out = []
    for d in ddl:
        added: list[str] = []
        for p in d.parts:
            if p.feature:
                new = [f for f in tf.enabled_by(p.feature) if f not in have]
                added += new
                have |= set(new)
            if p.op == OP_CREATE and p.schema is not None:
                cols = ((c.name, datatypes.delta_type(c)) for c in p.schema.columns)
                have |= set(tf.created_with(cols, settings))
        out.append(replace(d, features_added=tuple(sorted(set(added)))) if added else d)
    return out


def create_properties(
    schema: TableSchema, settings: TableFeatures, extra: tuple[tuple[str, str], ...] = ()
) -> tuple[tuple[str, str], ...]:
    """The TBLPROPERTIES a target created from `schema` gets, in a stable order: its table
    features' and `extra` (a table entry's `properties`, with the record of their keys:
    `plan.properties`)."""
    props = tf.create_properties(settings, (c.name for c in schema.columns))
    return tuple(sorted({**dict(record(extra)), **props}.items()))


def with_create_properties(
    ddl: list[TargetDdl],
    settings: TableFeatures,
    extra: tuple[tuple[str, str], ...] = (),
    comment: str | None = None,
    partition_by: tuple[str, ...] = (),
    cluster_by: tuple[str, ...] = (),
) -> list[TargetDdl]:
    """Each DDL whose part creates the target (again), with the TBLPROPERTIES it creates it
    with (`extra`: the table entry's) and its comment (None: the upstream table's), so
    that the engine runs them as planned, and its layout (`plan.layout`: the columns it is
    partitioned or clustered by)."""

    def part(p: DeltaPart) -> DeltaPart:
        if p.op != OP_CREATE or p.schema is None:
            return p
        schema = p.schema if comment is None else replace(p.schema, comment=comment)
        return replace(
            p,
            schema=schema,
            properties=create_properties(schema, settings, extra),
            partition_by=layout.resolved(partition_by, schema),
            cluster_by=layout.resolved(cluster_by, schema),
        )

    out = []
    for d in ddl:
        if not any(p.op == OP_CREATE for p in d.parts):
            out.append(d)
            continue
        steps = tuple(replace(s, parts=tuple(part(p) for p in s.parts)) for s in d.steps)
        out.append(replace(d, steps=steps, parts=tuple(part(p) for p in d.parts)))
    return out
