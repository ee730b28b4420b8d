"""A target's columns after the next run, for review: each column as it is, added,
dropped, renamed or retyped by the run's ready DDL (`TargetPlan.next_columns`).

Made once, with the plan, from the DDL decisions (`plan.policy`); `render` only shows it.
Pure: never reads or writes anything.
"""

from __future__ import annotations

from ticdc_sync.core import datatypes
from ticdc_sync.ddl import changes as ch
from ticdc_sync.plan import policy
from ticdc_sync.plan.model import READY, NextColumn, TargetPlan


def next_columns(t: TargetPlan) -> tuple[NextColumn, ...]:
    """(mark, name, mysql type, delta type) of the target after the next run's ready DDL:
    mark "+" added, "-" dropped, "~" renamed or retyped, " " as it is."""
    if t.to_create and t.create is not None:
        cols = [("+", c.name, c.type_sql(), datatypes.delta_type(c)) for c in t.create.columns]
    else:
        mysql = {c.name.lower(): c.type_sql() for c in (t.schema.columns if t.schema else ())}
        cols = [(" ", n, mysql.get(n.lower(), "-"), typ.upper()) for n, typ in t.columns]
    for d in t.ddl:
        if d.status != READY:
            continue
        for s in d.steps:
            if s.decision.action not in (policy.APPLY, policy.REBUILD):
                continue
            cols = _apply_change(cols, s.change)
    return tuple(cols)


def _apply_change(cols: list[tuple[str, str, str, str]], c: ch.DeltaChange):
    idx = {n.lower(): i for i, (_, n, _, _) in enumerate(cols)}
    if isinstance(c, ch.CreateTarget):
        return [("+", x.name, x.type_sql(), datatypes.delta_type(x)) for x in c.schema.columns]
    if isinstance(c, ch.AddColumn):
        return [*cols, ("+", c.name, "", c.delta_type.upper())]
    if isinstance(c, ch.DropColumn) and c.name.lower() in idx:
        i = idx[c.name.lower()]
        _, n, m, t = cols[i]
        return cols[:i] + [("-", n, m, t)] + cols[i + 1 :]
    if isinstance(c, ch.RenameColumn) and c.old.lower() in idx:
        i = idx[c.old.lower()]
        mark, _, m, t = cols[i]
        return (
            cols[:i]
            + [("+" if mark == "+" else "~", f"{c.new} (was {c.old})", m, t)]
            + cols[i + 1 :]
        )
    if isinstance(c, ch.ChangeColumnType) and c.name.lower() in idx:
        i = idx[c.name.lower()]
        mark, n, m, t = cols[i]
        new = f"{c.new_type.upper()} (was {t})"
        return cols[:i] + [("+" if mark == "+" else "~", n, m, new)] + cols[i + 1 :]
    return cols
