"""A table entry's `properties` and `comment` on its targets: what a target is created with,
and the step (`TableProperties`) that brings an existing target to a changed entry.

The entry's properties are merged with the ones ticdc-sync manages (`core.table_properties`
says which keys an entry may set at all). The keys it sets are recorded on the table
(`ENTRY_PROPERTIES`), so that a key the entry names no more is unset, and a property set by
hand (never recorded) is never touched. A key the entry names whose value the table does not
have (changed by hand, or new) is set again. The entry's `comment` is the table's Delta
description; an entry without one leaves the description as it is.

Pure: made from the entry and the target's state as `plan` read it.
"""

from __future__ import annotations

import json
from typing import Any

from ticdc_sync.core.model import TableEntry
from ticdc_sync.core.sqlgen import sql_string
from ticdc_sync.core.table_properties import ENTRY_PROPERTIES, spark_only
from ticdc_sync.plan.model import Properties, TableProperties
from ticdc_sync.warehouse.state import TargetState


def record(properties: Properties) -> Properties:
    """`properties` with the record of their keys (none: nothing to record)."""
    if not properties:
        return ()
    keys = json.dumps(sorted(k for k, _ in properties))
    return tuple(sorted({**dict(properties), ENTRY_PROPERTIES: keys}.items()))


def recorded(state: TargetState) -> tuple[str, ...]:
    """The keys the entry set on the target, as its record says (none: [])."""
    text = state.property(ENTRY_PROPERTIES)
    if not text:
        return ()
    try:
        keys = json.loads(text)
    except ValueError:
        return ()
    return tuple(str(k) for k in keys) if isinstance(keys, list) else ()


def change(entry: TableEntry, state: TargetState, ref: str) -> TableProperties | None:
    """The step that brings existing target `state` (at `ref`) to `entry`'s properties and
    comment, or None when it has them."""
    if not state.exists:
        return None
    want = dict(record(entry.properties))
    # Delta compares its own keys without case (and may store them in its own spelling).
    have = {_fold(k): v for k, v in state.properties}
    wanted = {_fold(k) for k in want}
    unset = tuple(
        sorted(
            k
            for k in {*recorded(state), *([ENTRY_PROPERTIES] if not want else [])}
            if _fold(k) not in wanted and _fold(k) in have
        )
    )
    to_set = tuple((k, v) for k, v in sorted(want.items()) if have.get(_fold(k)) != v)
    comment = entry.comment
    if comment is not None and comment == (state.description or ""):
        comment = None
    if not unset and not to_set and comment is None:
        return None
    sql: list[str] = []
    if unset:
        keys = ", ".join(sql_string(k) for k in unset)
        sql.append(f"ALTER TABLE {ref} UNSET TBLPROPERTIES IF EXISTS ({keys})")
    if to_set:
        pairs = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in to_set)
        sql.append(f"ALTER TABLE {ref} SET TBLPROPERTIES ({pairs})")
    if comment is not None:
        sql.append(f"COMMENT ON TABLE {ref} IS {sql_string(comment)}")
    return TableProperties(to_set, unset, comment, tuple(sql))


def _fold(key: str) -> str:
    return key.lower() if key.lower().startswith("delta.") else key


def spark_writers_why(entry: TableEntry) -> str | None:
    """Why the entry's properties keep its targets to Spark's writers (None: they do not)."""
    keys = spark_only(entry.properties)
    if not keys:
        return None
    return f"property {', '.join(keys)} (accept_reader_loss): only Delta's own writer keeps it"


def to_dict(step: TableProperties) -> dict[str, Any]:
    """The step as the JSON plan shows it."""
    return {
        "step": "properties",
        "set": dict(step.set),
        "unset": list(step.unset),
        "comment": step.comment,
        "sql": list(step.sql),
    }


def change_text(st: dict[str, Any]) -> str:
    """The step as `plan` shows it (from its JSON form)."""
    parts = []
    shown = {k: v for k, v in st["set"].items() if k != ENTRY_PROPERTIES}
    if shown:
        parts.append("set " + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    unset = [k for k in st["unset"] if k != ENTRY_PROPERTIES]
    if unset:
        parts.append("unset " + ", ".join(unset))
    if st["comment"] is not None:
        parts.append(f"comment {st['comment']!r}")
    if not parts:
        parts.append("record the keys the entry sets")
    return "properties: " + "; ".join(parts)
