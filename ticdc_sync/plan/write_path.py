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
between two segments can add a feature. Pure: made from the target's plan only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ticdc_sync.core.sizes import render_bytes
from ticdc_sync.plan import table_features as tf
from ticdc_sync.plan.model import (
    WRITE_MERGE,
    WRITE_REWRITE,
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
            step = Rows(
                step.lo, step.hi, step.keys, step.keys_from, step.tables, step.error, write, why
            )
        out.append(step)
    return tuple(out)


def _write(t: TargetPlan, features: set[str]) -> tuple[str, str]:
    below = f"rewrite_below {render_bytes(t.rewrite_below)}, {t.rewrite_from}"
    if t.rewrite_below <= 0:
        return WRITE_MERGE, f"{below}"
    kept = sorted(features - REWRITE_KEEPS)
    if kept:
        return WRITE_MERGE, f"table feature {', '.join(kept)} needs Delta's own writer"
    size = render_bytes(t.data_bytes)
    if t.data_bytes >= t.rewrite_below:
        return WRITE_MERGE, f"target {size} >= {below}"
    return WRITE_REWRITE, f"target {size} < {below}"
