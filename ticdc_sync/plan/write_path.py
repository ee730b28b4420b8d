"""How each row segment of a target lands: rewritten (`WRITE_REWRITE`) or merged (`WRITE_MERGE`),
and why, for `plan` to show and the engine to follow.

A MERGE costs about five Spark jobs and a fixed second whatever its size; for a small
target it rewrites the few files it touches, which is most of the table anyway. So a target
below `rewrite_below` bytes lands each segment as the table's rows merged with the
segment's changes in one Spark write of new files, then one commit that swaps them for the
old ones (`spark.apply.rewrite`): two jobs. That commit is written by delta-rs, which
writes only some table features: a target with any other (deletion vectors, type widening,
change data feed, ...) keeps the MERGE, as does a target at or above `rewrite_below`,
whose rewrite would copy more than a MERGE touches. Decided per segment, since a DDL
between two segments can add a feature.

A rewritten segment of a `mirror` target whose columns all have a type the round writer
carries (`ROUND_TYPES`: every type but BINARY; keys not FLOAT/DOUBLE, whose -0.0 and NaN
compare equal in Spark and not as text) takes the round (`WRITE_ROUND`,
`spark.apply.rounds`): the segments of all the targets due together get their files from one
Spark job, so a target's fixed cost is its commit. The run loop hands every target whose
next steps are round segments to one writer; a round of one is still a round.

A round merges each target's changes in one Arrow task, so a segment of many changes (a
first catch-up, a target far behind) would be one core's work where the rewrite spreads it
over every core: a segment estimated at more than `ROUND_MAX_CHANGES` row changes takes the
rewrite. The estimate is the tallies' (`segment_changes`): no rows are counted for it.
A partitioned or clustered target (`plan.layout`) keeps the MERGE: the rewrite's and the
round's delta-rs commits do not keep its layout; so does a target whose entry accepts a
property that takes readers away (`plan.properties`): delta-rs does not commit to what it
adds (`spark_writers_only`).
Pure: made from the target's plan only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ticdc_sync.core import datatypes
from ticdc_sync.core.model import Mode
from ticdc_sync.core.sizes import render_bytes
from ticdc_sync.plan import layout, properties
from ticdc_sync.plan import table_features as tf
from ticdc_sync.plan.model import (
    WRITE_MERGE,
    WRITE_REWRITE,
    WRITE_ROUND,
    Ddl,
    DeltaPart,
    Rows,
    Step,
    TargetPlan,
)

# Table features a rewrite's commit keeps as they are: the legacy ones every Delta table
# lists, timestamps without a time zone (a column type), and column mapping by name (the
# rewrite writes each column under its physical name). delta-rs refuses to commit to a
# table with typeWidening ("Unsupported table features required"), and a commit it makes
# to a table with deletion vectors or a change data feed would not keep them.
REWRITE_KEEPS = frozenset({*tf.LEGACY, tf.TIMESTAMP_NTZ, tf.COLUMN_MAPPING})

# Delta types whose values the round writer carries from Spark to Arrow as text without
# loss (`spark.apply.round_query.canonical`). BINARY is not among them: Arrow has no
# decoding of a text form, so a target with a BINARY column takes the rewrite.
ROUND_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INT", "BIGINT", "BOOLEAN", "FLOAT", "DOUBLE", "STRING", "DATE"}
    | {"TIMESTAMP", "TIMESTAMP_NTZ"}
)
# Key types the round does not collapse by: FLOAT/DOUBLE, as their text is not their equality.
ROUND_NOT_KEYS = frozenset({"FLOAT", "DOUBLE"})
# The most row changes a segment may have to take the round. Above it the round's one task
# per target costs more than the rewrite's fixed cost it saves (benchmarks/README.md, the
# round's bound).
ROUND_MAX_CHANGES = 10_000


def features_then(features: Iterable[str], parts: Sequence[DeltaPart]) -> tuple[str, ...]:
    """A target's table features once `parts` (its `feature_parts`) have run."""
    have = set(features) - {p.feature_dropped for p in parts}
    have |= {f for p in parts if p.feature for f in tf.enabled_by(p.feature)}
    return tuple(sorted(have))


def with_writes(t: TargetPlan, steps: Sequence[Step]) -> tuple[Step, ...]:
    """`steps` with each row segment's `write` and `write_why` decided."""
    have = set(t.features_then)
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Ddl):
            have |= {f for added in step.ddl.features_added for f in tf.enabled_by(added)}
        if isinstance(step, Rows):
            write, why = _write(t, have)
            if write == WRITE_REWRITE:
                write, why = _round(t, step, why)
            step = Rows(
                step.lo, step.hi, step.keys, step.keys_from, step.tables, step.error, write, why
            )
        out.append(step)
    return tuple(out)


def _write(t: TargetPlan, features: set[str]) -> tuple[str, str]:
    below = f"rewrite_below {render_bytes(t.rewrite_below)}, {t.rewrite_from}"
    if t.rewrite_below <= 0:
        return WRITE_MERGE, f"{below}"
    spark_only = spark_writers_only(t)
    if spark_only is not None:
        return WRITE_MERGE, spark_only
    kept = sorted(features - REWRITE_KEEPS)
    if kept:
        return WRITE_MERGE, f"table feature {', '.join(kept)} needs Delta's own writer"
    size = render_bytes(t.data_bytes)
    if t.data_bytes >= t.rewrite_below:
        return WRITE_MERGE, f"target {size} >= {below}"
    return WRITE_REWRITE, f"target {size} < {below}"


def spark_writers_only(t: TargetPlan) -> str | None:
    """Why target `t` takes Spark's writers only (never delta-rs's commits), or None: its
    layout (delta-rs's commit would lose a partitioned table's partition values and refuses a
    clustered table's writer features: `plan.layout`), or a property its entry accepts
    readers lost for (`plan.properties`)."""
    shown = layout.describe(t.partition_by, t.cluster_by)
    if shown is not None:
        return f"{shown}: Delta's own writer keeps the layout"
    return properties.spark_writers_why(t.entry)


def segment_changes(t: TargetPlan, step: Rows) -> int:
    """About how many row changes segment `step` of `t` holds, from the tallies alone: each
    of its tables' staged changes of all time, in the share of their commit_ts range that
    lies inside the segment (as if they came at a steady rate). Exact for a segment that
    covers a table's whole history (a first catch-up); a table whose range is not recorded
    counts all of its changes."""
    staged = {(s.db, s.table): s for s in t.staged}
    total = 0
    for table in step.tables:
        s = staged.get((table.db, table.table))
        if s is None or s.rows <= 0:
            continue
        if s.lo is None or s.hi is None:
            total += s.rows
            continue
        a, b = max(step.lo + 1, s.lo), min(step.hi, s.hi)
        if a > b:
            continue
        # Ceiling division: a sliver of a table's range still holds a change.
        total += -(-s.rows * (b - a + 1) // (s.hi - s.lo + 1))
    return total


def _round(t: TargetPlan, step: Rows, why: str) -> tuple[str, str]:
    """A rewritten segment's path: the round, unless its mode, a column's type or its size
    keeps it out (then the rewrite, saying which)."""
    if t.mode is not Mode.MIRROR:
        return WRITE_REWRITE, f"{why}; mode {t.mode.value} keeps the rewrite's own rules"
    keys = {k.lower() for k in step.keys}
    for table in step.tables:
        for span in table.spans:
            for col in span.schema.columns:
                typ = datatypes.delta_type(col)
                base = typ.split("(", 1)[0]
                if base != "DECIMAL" and base not in ROUND_TYPES:
                    return WRITE_REWRITE, f"{why}; column {col.name} is {typ}"
                if col.name.lower() in keys and base in ROUND_NOT_KEYS:
                    return WRITE_REWRITE, f"{why}; key {col.name} is {typ}"
    changes = segment_changes(t, step)
    if changes > ROUND_MAX_CHANGES:
        return WRITE_REWRITE, (
            f"{why}; about {changes} row changes staged in it > {ROUND_MAX_CHANGES} a round "
            "merges in one task"
        )
    return WRITE_ROUND, f"{why}; with the other targets due in its round"
