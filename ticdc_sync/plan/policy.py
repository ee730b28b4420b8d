"""DDL policy: how each Delta change is classified for review, and what a target does with it.

The one place that answers "apply, rebuild, skip or block?" for a change (DESIGN.md §2 "DDL to
Delta"): `plan` shows the answer and the engine carries it out without asking again (the
Spark package may not import this module). In the plan package, not `ddl/`: it decides with
the project's settings and `table_features`, which `ddl/` (upstream DDL only) never needs. A
blocked change comes with the reason and the setting that lets it through; the hint never
steers a user towards losing data silently (an unparsed DDL points at a `ddl_overrides`
entry for that one DDL, not at a policy for all of them). Pure Python; never imports pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.core.model import (
    Action,
    DdlKind,
    FeatureUse,
    Project,
    TableEntry,
    TableFeatures,
)
from ticdc_sync.ddl.changes import ChangeColumnType, DeltaChange, DropColumn, RenameColumn
from ticdc_sync.plan import table_features

ADDITIVE = "additive"
DESTRUCTIVE = "destructive"
UNSUPPORTED = "unsupported"
NO_CHANGE = "no-change"

# How each DDL kind changes a Delta target, for review (DESIGN.md §2 "DDL to Delta").
KIND_CLASS: dict[DdlKind, str] = {
    DdlKind.CREATE_TABLE: ADDITIVE,
    DdlKind.ADD_COLUMN: ADDITIVE,
    DdlKind.WIDEN_COLUMN: ADDITIVE,
    DdlKind.SET_DEFAULT: ADDITIVE,
    DdlKind.DROP_COLUMN: DESTRUCTIVE,
    DdlKind.RENAME_COLUMN: DESTRUCTIVE,
    DdlKind.NARROW_COLUMN: DESTRUCTIVE,
    DdlKind.TRUNCATE_TABLE: DESTRUCTIVE,
    DdlKind.RENAME_TABLE: DESTRUCTIVE,
    DdlKind.DROP_TABLE: DESTRUCTIVE,
    DdlKind.PRIMARY_KEY: DESTRUCTIVE,
    DdlKind.PARTITION: DESTRUCTIVE,
    DdlKind.RECOVER_TABLE: UNSUPPORTED,
    DdlKind.UNPARSED: UNSUPPORTED,
    DdlKind.OTHER: NO_CHANGE,
}

# Decisions.
APPLY = "apply"  # carry the change out in Delta
# Carry it out by rewriting the table: a narrowing type change, or a change whose table
# feature the target's `table_features` setting keeps off it.
REBUILD = "rebuild"
SKIP = "skip"  # the policy says skip: the target diverges from upstream, on purpose
NONE = "none"  # nothing to do in Delta: the Delta type stays (MODIFY to the same Spark type)
BLOCK = "block"  # the target stops just before this DDL


@dataclass(frozen=True, slots=True)
class Decision:
    """What one target does with one Delta change."""

    action: str  # APPLY | REBUILD | SKIP | NONE | BLOCK
    kind: DdlKind
    classification: str
    describe: str
    reason: str | None = None  # why blocked (or why skipped)
    setting: str | None = None  # the setting that lets a blocked change through
    feature: str | None = None  # the table feature an APPLY needs (enabled just before)

    @property
    def blocks(self) -> bool:
        return self.action == BLOCK


def classify(change: DeltaChange) -> str:
    """additive / destructive / unsupported / no-change, for review."""
    if change.effect == "unsupported":
        return UNSUPPORTED
    if isinstance(change, ChangeColumnType) and change.change == "same":
        return NO_CHANGE
    if change.effect == "none" and change.kind is DdlKind.OTHER:
        return NO_CHANGE
    return KIND_CLASS[change.kind]


def decide(
    project: Project,
    entry: TableEntry,
    change: DeltaChange,
    data_bytes: int = 0,
    resumed: bool | None = None,
) -> Decision:
    """The decision of the target routed by `entry` about `change` (policy per kind:
    project `defaults.ddl`, overridden on the entry). `data_bytes`: the target's size when
    planned (0 when it does not exist yet), which `table_features: auto` decides by;
    `resumed`: for a DDL half applied, whether the target has a feature `auto` enables
    (the DDL began the `enable` way), else None (`_auto`)."""
    kind: DdlKind = change.kind
    cls = classify(change)
    what = change.describe()
    action = project.ddl_policy(entry, kind)

    def block(reason: str, setting: str) -> Decision:
        return Decision(BLOCK, kind, cls, what, reason, setting)

    if isinstance(change, ChangeColumnType) and change.change == "same":
        return Decision(NONE, kind, cls, what + " (no Delta change)")
    if change.effect == "unsupported":
        if action is Action.SKIP:
            return Decision(SKIP, kind, cls, f"skipped (unsupported): {what}")
        if kind is DdlKind.UNPARSED:
            return block(
                f"{what}; its effect on the table's columns is unknown",
                "a `ddl_overrides` entry in ticdc_sync.yml for this DDL: `action: apply_as` "
                "with the statement as ticdc-sync should read it (or `action: skip` if it "
                "changes no column)",
            )
        return block(
            f"{what} (no row events come with it: the target cannot follow it)",
            f"`{kind.value}: skip` in defaults.ddl or on the table entry to ignore it and let "
            "the target differ from upstream, or a `ddl_overrides` entry with `action: skip` "
            "for this one DDL",
        )
    if action is Action.SKIP:
        return Decision(SKIP, kind, cls, f"skipped by policy: {what}")
    narrow = isinstance(change, ChangeColumnType) and change.change == "narrow"
    if narrow and action is not Action.REBUILD:
        return block(
            f"{what} narrows the Delta type (policy {kind.value}: {action.value}; `skip` keeps "
            "the wider type)",
            f"`{kind.value}: rebuild` in defaults.ddl or on the table entry",
        )
    if action is Action.FAIL:
        return block(
            f"{what} (policy {kind.value}: fail)",
            f"`{kind.value}: apply` in defaults.ddl or on the table entry",
        )
    if narrow:
        return Decision(REBUILD, kind, cls, what)
    feature = table_features.needed_by(change)
    if feature is None:
        return Decision(APPLY, kind, cls, what)
    key = table_features.SETTING[feature]
    settings = project.table_features(entry)
    use = table_features.use(settings, feature)
    if use is FeatureUse.AUTO:
        if not table_features.rebuild_avoids(change):
            # No rewrite avoids it: `auto` takes the feature whatever the size.
            return Decision(APPLY, kind, cls, what, feature=feature)
        use, why = _auto(settings, feature, data_bytes, resumed)
        return (
            Decision(REBUILD, kind, cls, f"{what} ({why})")
            if use is FeatureUse.REBUILD
            else Decision(APPLY, kind, cls, f"{what} ({why})", feature=feature)
        )
    if use is FeatureUse.REBUILD and not table_features.rebuild_avoids(change):
        return block(
            f"{what} needs the Delta table feature {feature} (a column name with characters "
            f"Delta allows only under column mapping), which no rewrite avoids",
            f"`table_features.{key}: enable` in defaults or on the table entry, or "
            f"`{kind.value}: skip`",
        )
    if use is FeatureUse.REBUILD:
        return Decision(
            REBUILD, kind, cls, f"{what} (rewrites the table: `table_features.{key}: rebuild`)"
        )
    if use is FeatureUse.FAIL:
        return block(
            f"{what} needs the Delta table feature {feature}, which `table_features.{key}: "
            f"fail` keeps off this target ({table_features.LOCKS_OUT[feature]} cannot read "
            "a table with it)",
            f"`table_features.{key}: rebuild` (rewrite the table in one commit) or `enable` "
            f"in defaults or on the table entry, or `{kind.value}: skip`",
        )
    return Decision(APPLY, kind, cls, what, feature=feature)


def _auto(
    settings: TableFeatures, feature: str, data_bytes: int, resumed: bool | None
) -> tuple[FeatureUse, str]:
    """`auto`: rebuild a target smaller than `rebuild_below`, enable the feature on a larger
    one, and why. A DDL half applied goes on the way it began, whatever the target's size
    now (a rewrite of its first change changes the size; its part numbers must not change):
    `enable` if the target has a feature `auto` enables (that way's first commit enables
    one), else `rebuild` (under `auto` a small target has none: they are dropped first)."""
    key = table_features.SETTING[feature]
    if resumed is not None:
        if resumed:
            return (
                FeatureUse.ENABLE,
                f"enables {feature}: `table_features.{key}: auto`, as this DDL began",
            )
        return (
            FeatureUse.REBUILD,
            f"rewrites the table: `table_features.{key}: auto`, as this DDL began",
        )
    why = table_features.size_against_threshold(settings, data_bytes)
    if table_features.keeps_off(settings, feature, data_bytes):
        return FeatureUse.REBUILD, f"rewrites the table: {why}, keeps every reader"
    return (
        FeatureUse.ENABLE,
        f"enables {feature}: {why}; {table_features.LOCKS_OUT[feature]} cannot read it",
    )


def partition_in_merge(decision: Decision, upstreams: tuple[tuple[str, str], ...]) -> Decision:
    """A TRUNCATE/DROP/EXCHANGE PARTITION on a target that merges several upstream tables
    (shards): its rows do not say which table they came from, so the partition's rows
    cannot be told from the other tables' rows that match the same predicate."""
    if decision.action != APPLY or len(upstreams) < 2:
        return decision
    names = ", ".join(f"{db}.{t}" for db, t in upstreams)
    return Decision(
        BLOCK,
        decision.kind,
        decision.classification,
        decision.describe,
        reason=f"{decision.describe}: this target merges {names} and does not tell their rows "
        "apart, so the rows of that partition cannot be told from the other tables'",
        setting="`partition: skip` on this entry to let the target differ from upstream, or "
        "routes that give each table a target of its own",
    )


def rename_from_unrouted(
    decision: Decision, old: str, staged_rows: int, created_in_history: bool
) -> Decision:
    """A RENAME that brings `old`, an upstream table no entry routes, into this target (the
    cut-over of an online schema change: gh-ost's `_t_gho`, pt-osc's `_t_new`). Its rows were
    never applied anywhere, so following the rename leaves the target without them: a
    silent loss unless the table was created in the captured history and never had a row
    change. Anything else blocks, with the ways to bring the rows."""
    if decision.action != APPLY or (created_in_history and staged_rows == 0):
        return decision
    if created_in_history:
        why = f"{staged_rows} row change(s) of it were staged and never applied"
        setting = (
            f"a table entry that routes {old} too (its staged changes are then applied to a "
            "target of its own and moved here by the rename, as long as `staging.retention` "
            "has kept them), or reload this table from an export (`initial_load`, `run "
            "--reload`), or `rename_table: skip` on this entry to keep the target's own rows"
        )
    else:
        why = "it existed before the captured history, so its rows are unknown here"
        setting = (
            "an `initial_load` export taken after the rename and `run --reload` for this "
            "target, or `rename_table: skip` on this entry to keep the target's own rows"
        )
    return Decision(
        BLOCK,
        decision.kind,
        decision.classification,
        decision.describe,
        reason=f"{decision.describe} brings {old}, which no table entry routes ({why}); "
        "following it would leave this target without that table's rows",
        setting=setting,
    )


def layout_column(
    decision: Decision, change: DeltaChange, layout: tuple[str, ...], key: str, where: str
) -> Decision:
    """A DROP or RENAME COLUMN of a column the target is partitioned or clustered by
    (`layout`, its `key` at `where`): Delta neither drops nor renames a partition column
    in place, and a clustering column must stay a column of the table; the target stops
    before it, with the ways on. Skipped by policy, it is left as it is."""
    if decision.action not in (APPLY, REBUILD) or not layout:
        return decision
    name = change.name if isinstance(change, DropColumn) else None
    if isinstance(change, RenameColumn):
        name = change.old
    if name is None or name.lower() not in {c.lower() for c in layout}:
        return decision
    kind = decision.kind.value
    what = "partitioned" if key == "partition_by" else "clustered"
    return Decision(
        BLOCK,
        decision.kind,
        decision.classification,
        decision.describe,
        reason=f"{decision.describe}: the target is {what} by {name} ({key} at {where}), "
        f"which Delta cannot {'drop' if isinstance(change, DropColumn) else 'rename'} in place",
        setting=f"`{kind}: skip` on the table entry to keep the column and let the target "
        f"differ from upstream, or a new target without {name} in its `{key}` (another `name`, "
        "loaded from an export: `initial_load`)",
    )
