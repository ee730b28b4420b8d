"""A target's rows after one row segment, as a DataFrame: what each mode's MERGE
(`sqlgen.merge_sql`, `sqlgen_history`) does to the table, written as one join of the table's
rows with the segment's MERGE source.

Two callers, one set of rules: a rewrite (`rewrite`) writes the result as the table's new
files, and a read as of a TSO (`spark.as_of`) returns it without writing anything. The
MERGE statements stay the SQL that `plan` shows and large targets run; the tests hold the
two to the same rows (`tests/spark/test_rewrite.py`). Rows stay in Spark; decides nothing
the plan has not decided (the mode, the keys).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from ticdc_sync.core.model import Mode
from ticdc_sync.core.sqlgen import COMMIT_TS, OP_COL, quote
from ticdc_sync.core.sqlgen_history import (
    CLOSE,
    DELETED_AT,
    DELETED_TS,
    HAS_ROW,
    IS_DELETED,
    OPEN,
    VALID_FROM,
    VALID_FROM_AT,
    VALID_TO,
    VALID_TO_AT,
)

# What the MERGE metrics call the rows it inserted, updated and deleted; filled by the
# first job over a merged frame when an Observation is given.
INSERTED = "num_inserted_rows"
UPDATED = "num_updated_rows"
DELETED = "num_deleted_rows"


def merged(
    target: DataFrame,
    src: DataFrame,
    mode: Mode,
    keys: Sequence[str],
    columns: Sequence[str],
    counts: Observation | None = None,
) -> DataFrame:
    """`target` (the table's rows, all its columns) after the MERGE of `src` (the mode's
    MERGE source of one segment: `rows.TargetWriter.changes`) on `keys`; `columns`: the
    upstream columns. The result has `target`'s columns in its order. `counts`: filled by
    the first job over the result with INSERTED, UPDATED and DELETED as the MERGE would
    count them."""
    rules = {Mode.SOFT_DELETE: _soft_delete, Mode.HISTORY: _history}.get(mode, _mirror)
    out = rules(target, src, keys, columns)
    what = F.col(WHAT)
    if counts is not None:
        out = out.observe(
            counts,
            *[
                F.count(F.when(what == w, 1)).alias(n)
                for w, n in (("I", INSERTED), ("U", UPDATED), ("D", DELETED))
            ],
        )
    return out.where(what.isNull() | (what != "D")).drop(WHAT)


# What the MERGE did to each row of a mode's result ('I', 'U', 'D', or NULL for a row it
# left alone): counted, then the deleted rows dropped (`merged`).
WHAT = "__ticdc_sync_what"


def wall_time(ts: Column) -> Column:
    """The UTC wall time of a TSO column (`sqlgen_history.wall_time`)."""
    return F.timestamp_millis(F.shiftright(ts, 18))


class _Sides:
    """The table's and the source's columns under positional names (`t0`, `s0`, ...), so a
    column named like a helper column (or `offset`) cannot clash, joined on the keys with
    a null-safe equality, as the MERGE's `t.k <=> s.k`."""

    def __init__(
        self, target: DataFrame, src: DataFrame, keys: Sequence[str], extra: Sequence[str] = ()
    ) -> None:
        self.t_names = list(target.columns)
        self.s_names = [c for c in src.columns]
        self.t = target.select(
            *[F.col(quote(c)).alias(f"t{i}") for i, c in enumerate(self.t_names)],
            F.lit(True).alias("__t"),
        )
        self.s = src.select(
            *[F.col(quote(c)).alias(f"s{i}") for i, c in enumerate(self.s_names)],
            F.lit(True).alias("__s"),
        )
        on = F.lit(True)
        for k in keys:
            on = on & self.tc(k).eqNullSafe(self.sc(k))
        self.on = on

    def tc(self, name: str) -> Column:
        return F.col(f"t{self._index(self.t_names, name)}")

    def sc(self, name: str) -> Column:
        return F.col(f"s{self._index(self.s_names, name)}")

    @staticmethod
    def _index(names: list[str], name: str) -> int:
        lower = name.lower()
        return next(i for i, n in enumerate(names) if n.lower() == lower)

    def out(self, frame: DataFrame, values: dict[str, Column], what: Column) -> DataFrame:
        """`frame` as the table's columns (`values` where given, else the table's own) and
        WHAT the MERGE did to the row (`what`)."""
        lower = {k.lower(): v for k, v in values.items()}
        return frame.select(
            *[lower.get(c.lower(), self.tc(c)).alias(c) for c in self.t_names],
            what.alias(WHAT),
        )


def _mirror(target, src, keys, columns) -> DataFrame:
    x = _Sides(target, src, keys)
    j = x.t.join(x.s, x.on, "full_outer")
    has_t, has_s = F.col("__t").isNotNull(), F.col("__s").isNotNull()
    ts = COMMIT_TS
    # The MERGE's guard: a matched row changes only when the table's is not newer.
    guard = x.tc(ts).isNull() | (x.tc(ts) <= x.sc(ts))
    take_s = has_s & (~has_t | guard)
    delete = x.sc(OP_COL) == "D"
    what = F.when(has_s & ~has_t, F.when(delete, F.lit("-")).otherwise(F.lit("I"))).when(
        take_s, F.when(delete, F.lit("D")).otherwise(F.lit("U"))
    )
    values = {c: F.when(take_s, x.sc(c)).otherwise(x.tc(c)) for c in [*columns, ts]}
    # A delete of a key the table does not hold ('-') deletes nothing, and is no row.
    return x.out(j, values, what).where(F.col(WHAT).isNull() | (F.col(WHAT) != "-"))


def _soft_delete(target, src, keys, columns) -> DataFrame:
    x = _Sides(target, src, keys)
    j = x.t.join(x.s, x.on, "full_outer")
    has_t, has_s = F.col("__t").isNotNull(), F.col("__s").isNotNull()
    ts = COMMIT_TS
    guard = x.tc(ts).isNull() | (x.tc(ts) <= x.sc(ts))
    has_row = x.sc(HAS_ROW)
    deleted = x.sc(OP_COL) == "D"
    # WHEN MATCHED AND has_row AND guard: every column from the source; WHEN MATCHED AND
    # guard: only the commit_ts and the marks; WHEN NOT MATCHED AND has_row: insert. A
    # delete marks the row: an update, as the MERGE counts it.
    inserted = has_s & ~has_t & has_row
    values_from_s = inserted | (has_s & has_t & has_row & guard)
    marks_from_s = inserted | (has_s & has_t & guard)
    what = F.when(inserted, F.lit("I")).when(marks_from_s, F.lit("U"))
    s_ts = x.sc(ts)
    values: dict[str, Column] = {
        c: F.when(values_from_s, x.sc(c)).otherwise(x.tc(c)) for c in columns
    }
    values[ts] = F.when(marks_from_s, s_ts).otherwise(x.tc(ts))
    marks = {
        IS_DELETED: deleted,
        DELETED_TS: F.when(deleted, s_ts),
        DELETED_AT: F.when(deleted, wall_time(s_ts)),
    }
    for name, value in marks.items():
        values[name] = F.when(marks_from_s, value).otherwise(x.tc(name))
    # A source row without the row's values, for a key the table does not hold: nothing.
    return x.out(j.where(has_t | inserted), values, what)


def _history(target, src, keys, columns) -> DataFrame:
    x = _Sides(target, src, keys)
    frm, to = VALID_FROM, VALID_TO
    op = x.sc(OP_COL)
    # A target row matches at most one source row (`history_merge_sql`): the key's close
    # (`C`, the segment's first change of the key) matches its open version older than
    # it; a version (`I`) matches the row of the same key and `_valid_from`, if there is
    # one, and is then not inserted again (a replay).
    closes = x.s.where(op == CLOSE)
    closing = x.tc(to).isNull() & (x.tc(frm) < x.sc(frm))
    t = x.t.join(closes, x.on & closing, "left")
    closed = F.col("__s").isNotNull()
    old = x.out(
        t,
        {
            to: F.when(closed, x.sc(frm)).otherwise(x.tc(to)),
            VALID_TO_AT: F.when(closed, wall_time(x.sc(frm))).otherwise(x.tc(VALID_TO_AT)),
        },
        F.when(closed, F.lit("U")),
    )
    opens = x.s.where(op == OPEN).join(x.t, x.on & (x.tc(frm) == x.sc(frm)), "left_anti")
    s_frm, s_to = x.sc(frm), x.sc(to)
    values: dict[str, Column] = {c: x.sc(c) for c in columns}
    values.update(
        {
            COMMIT_TS: s_frm,
            frm: s_frm,
            to: s_to,
            VALID_FROM_AT: wall_time(s_frm),
            VALID_TO_AT: wall_time(s_to),
        }
    )
    types = {f.name.lower(): f.dataType for f in target.schema.fields}
    new = opens.select(
        *[values[c].cast(types[c.lower()]).alias(c) for c in x.t_names],
        F.lit("I").alias(WHAT),
    )
    return old.unionByName(new)
