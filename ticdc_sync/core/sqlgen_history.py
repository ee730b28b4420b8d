"""Spark SQL text of the `soft_delete` and `history` modes: their extra columns, the MERGE
(or INSERT) of one row segment, and the statement a TRUNCATE becomes.

Shared by `plan` (which shows the columns and the TRUNCATE's statement) and `spark.rows`
(which runs the MERGE), like `sqlgen` for the mirror. Pure Python; no pyspark. Decides
nothing: which mode a target has is the plan's (`plan.modes`).

Validity is by TiDB commit_ts (a TSO); each TSO column has a wall-time twin, the TSO's
physical part (its high bits, milliseconds since the epoch: `ts >> 18`) as a UTC TIMESTAMP.
"""

from __future__ import annotations

from collections.abc import Sequence

from ticdc_sync.core.model import Mode
from ticdc_sync.core.sqlgen import COMMIT_TS, OP_COL, insert_sql, merge_sql, quote

# soft_delete
IS_DELETED = "_is_deleted"
DELETED_TS = "_deleted_ts"
DELETED_AT = "_deleted_at"
# history
VALID_FROM = "_valid_from"
VALID_TO = "_valid_to"
VALID_FROM_AT = "_valid_from_at"
VALID_TO_AT = "_valid_to_at"

# Internal columns of a MERGE source of these modes (never written to targets).
# soft_delete: whether the source row carries the row's values (a DELETE of a key whose
# last values in the segment are not known carries only the key: the target keeps its own).
HAS_ROW = "__has_row"

# The extra columns of each mode, after `_commit_ts`, in table order.
MODE_COLUMNS: dict[Mode, tuple[tuple[str, str], ...]] = {
    Mode.MIRROR: (),
    Mode.SOFT_DELETE: ((IS_DELETED, "boolean"), (DELETED_TS, "bigint"), (DELETED_AT, "timestamp")),
    Mode.HISTORY: (
        (VALID_FROM, "bigint"),
        (VALID_TO, "bigint"),
        (VALID_FROM_AT, "timestamp"),
        (VALID_TO_AT, "timestamp"),
    ),
}
# Every column any mode adds (`_commit_ts` aside): never an upstream column of a target.
ALL_MODE_COLUMNS = frozenset(n for cols in MODE_COLUMNS.values() for n, _ in cols)


def mode_columns(mode: Mode) -> tuple[tuple[str, str], ...]:
    return MODE_COLUMNS[mode]


def mode_of_columns(names: Sequence[str]) -> Mode:
    """The mode a target was created with, from its columns."""
    have = {n.lower() for n in names}
    if VALID_FROM in have:
        return Mode.HISTORY
    if IS_DELETED in have:
        return Mode.SOFT_DELETE
    return Mode.MIRROR


def wall_time(ts_sql: str) -> str:
    """SQL: the UTC wall time of a TSO (its physical part, milliseconds since the epoch)."""
    return f"timestamp_millis(shiftright({ts_sql}, 18))"


def truncate_sql(mode: Mode, ref: str, ts: int, where: str | None = None) -> str:
    """What a TRUNCATE at commit_ts `ts` does to a target of `mode` (not the mirror): every
    live row marked deleted, or every open version closed, at `ts`; with `where` (a
    TRUNCATE/DROP PARTITION), only the rows it holds for. Idempotent: a row already marked
    or closed (a resumed run) is not touched again."""
    only = f" AND ({where})" if where is not None else ""
    if mode is Mode.SOFT_DELETE:
        return (
            f"UPDATE {ref} SET {quote(IS_DELETED)} = true, {quote(DELETED_TS)} = {ts}, "
            f"{quote(DELETED_AT)} = {wall_time(str(ts))}, {quote(COMMIT_TS)} = {ts} "
            f"WHERE NOT coalesce({quote(IS_DELETED)}, false) AND {quote(COMMIT_TS)} < {ts}{only}"
        )
    if mode is Mode.HISTORY:
        return (
            f"UPDATE {ref} SET {quote(VALID_TO)} = {ts}, {quote(VALID_TO_AT)} = "
            f"{wall_time(str(ts))} WHERE {quote(VALID_TO)} IS NULL AND {quote(VALID_FROM)} < {ts}"
            f"{only}"
        )
    raise ValueError(f"no truncate statement of its own for mode {mode}")


# ----------------------------------------------------------------------------- soft_delete


def _soft_values(prefix: str) -> dict[str, str]:
    """The soft-delete columns of a source row (`prefix`: `s.` in a MERGE, empty in a SELECT)."""
    ts = f"{prefix}{quote(COMMIT_TS)}"
    deleted = f"{prefix}{OP_COL} = 'D'"
    return {
        IS_DELETED: deleted,
        DELETED_TS: f"IF({deleted}, {ts}, NULL)",
        DELETED_AT: f"IF({deleted}, {wall_time(ts)}, NULL)",
    }


def soft_delete_insert_sql(ref: str, source_view: str, columns: Sequence[str]) -> str:
    """What `soft_delete_merge_sql` does to a target without rows: insert every source row
    that carries its values, a deleted one marked."""
    names = [*columns, COMMIT_TS]
    extra = _soft_values("")
    cols = ", ".join(quote(c) for c in [*names, *extra])
    vals = ", ".join(
        [*(quote(c) for c in names), *(f"{v} AS {quote(k)}" for k, v in extra.items())]
    )
    return f"INSERT INTO {ref} ({cols})\nSELECT {vals} FROM {quote(source_view)} WHERE {HAS_ROW}"


def soft_delete_merge_sql(
    ref: str,
    source_view: str,
    keys: Sequence[str],
    columns: Sequence[str],
    key_range: tuple[str, str] | None = None,
) -> str:
    """The one MERGE per soft-delete target per window segment.

    The source holds one row per key, its last change (`__op` 'D' for a delete), and
    `__has_row`: whether it carries the row's values (an upsert, or a delete whose row was
    upserted earlier in the segment). A delete marks the row (`_is_deleted`, the delete's
    `_deleted_ts` and its wall time); the other columns keep the values the row had before
    it (the segment's, else the target's own). An upsert writes the row live (a key that was
    deleted is revived). The guard `t._commit_ts <= s._commit_ts` is the mirror's: a replay
    never takes a row back to an older change; a delete sets `_commit_ts` to its own ts."""
    on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
    if key_range is not None:
        on += f" AND t.{quote(keys[0])} BETWEEN {key_range[0]} AND {key_range[1]}"
    extra = _soft_values("s.")
    all_cols = [*columns, COMMIT_TS]
    sets = ", ".join(
        [*(f"t.{quote(c)} = s.{quote(c)}" for c in all_cols)]
        + [f"t.{quote(k)} = {v}" for k, v in extra.items()]
    )
    mark = ", ".join(
        [f"t.{quote(COMMIT_TS)} = s.{quote(COMMIT_TS)}"]
        + [f"t.{quote(k)} = {v}" for k, v in extra.items()]
    )
    ins_cols = ", ".join(quote(c) for c in [*all_cols, *extra])
    ins_vals = ", ".join([*(f"s.{quote(c)}" for c in all_cols), *extra.values()])
    guard = f"(t.{quote(COMMIT_TS)} IS NULL OR t.{quote(COMMIT_TS)} <= s.{quote(COMMIT_TS)})"
    return (
        f"MERGE INTO {ref} t\n"
        f"USING {quote(source_view)} s\n"
        f"ON {on}\n"
        f"WHEN MATCHED AND s.{HAS_ROW} AND {guard} THEN UPDATE SET {sets}\n"
        f"WHEN MATCHED AND {guard} THEN UPDATE SET {mark}\n"
        f"WHEN NOT MATCHED AND s.{HAS_ROW} THEN INSERT ({ins_cols}) VALUES ({ins_vals})"
    )


# --------------------------------------------------------------------------------- history

# `__op` of a history MERGE source: open a version, or close the key's open version.
OPEN = "I"
CLOSE = "C"


def _history_values(prefix: str) -> dict[str, str]:
    """The validity columns of a version from its source row (`_valid_from`, `_valid_to`
    as computed by the segment; `_commit_ts` = `_valid_from`)."""
    frm = f"{prefix}{quote(VALID_FROM)}"
    to = f"{prefix}{quote(VALID_TO)}"
    return {
        COMMIT_TS: frm,
        VALID_FROM: frm,
        VALID_TO: to,
        VALID_FROM_AT: wall_time(frm),
        VALID_TO_AT: wall_time(to),
    }


def history_insert_sql(ref: str, source_view: str, columns: Sequence[str]) -> str:
    """What `history_merge_sql` does to a target without rows: insert every version."""
    extra = _history_values("")
    cols = ", ".join(quote(c) for c in [*columns, *extra])
    vals = ", ".join(
        [*(quote(c) for c in columns), *(f"{v} AS {quote(k)}" for k, v in extra.items())]
    )
    return (
        f"INSERT INTO {ref} ({cols})\nSELECT {vals} FROM {quote(source_view)} "
        f"WHERE {OP_COL} = '{OPEN}'"
    )


def history_merge_sql(
    ref: str,
    source_view: str,
    keys: Sequence[str],
    columns: Sequence[str],
    key_range: tuple[str, str] | None = None,
) -> str:
    """The one MERGE per history target per window segment.

    The source holds, per key the segment touches, one `C` row (close the key's open
    version at `_valid_from`, the segment's first change of the key) and one `I` row per
    new version (`_valid_from`, `_valid_to` chained inside the segment, NULL for the last
    when it is not deleted). Idempotent under replays: a version is identified by (key,
    `_valid_from`), so an `I` whose version exists is skipped, and a `C` only closes a
    version that is open and older than the close. No target row matches two source rows
    (`C` matches only versions older than every `I` of its key)."""
    on_keys = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
    if key_range is not None:
        on_keys += f" AND t.{quote(keys[0])} BETWEEN {key_range[0]} AND {key_range[1]}"
    frm, to = quote(VALID_FROM), quote(VALID_TO)
    which = (
        f"((s.{OP_COL} = '{CLOSE}' AND t.{to} IS NULL AND t.{frm} < s.{frm}) OR "
        f"(s.{OP_COL} = '{OPEN}' AND t.{frm} = s.{frm}))"
    )
    extra = _history_values("s.")
    ins_cols = ", ".join(quote(c) for c in [*columns, *extra])
    ins_vals = ", ".join([*(f"s.{quote(c)}" for c in columns), *extra.values()])
    return (
        f"MERGE INTO {ref} t\n"
        f"USING {quote(source_view)} s\n"
        f"ON {on_keys} AND {which}\n"
        f"WHEN MATCHED AND s.{OP_COL} = '{CLOSE}' THEN UPDATE SET t.{to} = s.{frm}, "
        f"t.{quote(VALID_TO_AT)} = {wall_time(f's.{frm}')}\n"
        f"WHEN NOT MATCHED AND s.{OP_COL} = '{OPEN}' THEN INSERT ({ins_cols}) VALUES ({ins_vals})"
    )


# The MERGE and the INSERT (a target without data files) of one row segment, per mode.
MERGE_SQL = {
    Mode.MIRROR: merge_sql,
    Mode.SOFT_DELETE: soft_delete_merge_sql,
    Mode.HISTORY: history_merge_sql,
}
INSERT_SQL = {
    Mode.MIRROR: insert_sql,
    Mode.SOFT_DELETE: soft_delete_insert_sql,
    Mode.HISTORY: history_insert_sql,
}
