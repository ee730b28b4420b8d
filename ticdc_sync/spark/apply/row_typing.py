"""SQL pieces that type one row image for a target: where each raw value is read from
(the staged maps or the JSON text of each image), and the reason a row is bad (a value that
does not fit its column, a column the upstream schema lacks).

Builds SQL text and column expressions only; runs no job and decides no policy (what
happens to a bad row is `rows`, by the table's `on_bad_message`).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from ticdc_sync.core.sqlgen import quote, sql_string
from ticdc_sync.core.upstream import TableSchema


class RawValues:
    """Each raw value a row's typing reads (`after['c']`, a key's before-or-after), looked
    up once in a projection of its own. The typing and fit checks then read plain columns:
    Spark does not share a map lookup between the branches of the fit check's CASE, and a
    map lookup scans the row's keys (benchmarks/README.md has the measurements)."""

    def __init__(self) -> None:
        self._alias: dict[str, str] = {}

    def of(self, sql: str) -> str:
        """The column (quoted name) holding `sql`'s value."""
        if sql not in self._alias:
            self._alias[sql] = f"__raw{len(self._alias)}"
        return quote(self._alias[sql])

    def columns(self) -> list[str]:
        return [f"{sql} AS {quote(alias)}" for sql, alias in self._alias.items()]


class Images:
    """Where a row's raw values come from: the staged maps (`before`/`after`), or the JSON
    text of each image (`before_json`/`after_json`, `events`), parsed here once per row
    into a struct of just the columns this target reads (`__a`, and `__b` for keys). A
    row has one or the other, so each value is the first non-NULL of the two lookups.

    A key's old value is its value in `before`, else in `after`: TiCDC's Canal `old`
    holds every column, and a partial `old` (only-output-updated-columns, codec facts
    1.5) lacks the columns that did not change. From text, a key present in `old` with
    null reads as absent: a key column is not NULL."""

    def __init__(self) -> None:
        self._after: list[str] = []
        self._keys: list[str] = []

    def after(self, name: str) -> str:
        """SQL: the column's raw value after the change."""
        if name not in self._after:
            self._after.append(name)
        return f"coalesce(__a.{quote(name)}, after[{sql_string(name)}])"

    def key(self, name: str) -> str:
        """SQL: a key column's raw value before the change (else after it)."""
        self.after(name)
        if name not in self._keys:
            self._keys.append(name)
        lit = sql_string(name)
        return f"coalesce(__b.{quote(name)}, __a.{quote(name)}, before[{lit}], after[{lit}])"

    def parsed(self) -> list:
        """The struct columns `__a` and `__b` (call after every `after`/`key`)."""
        from pyspark.sql.types import StringType, StructField, StructType

        def struct(names: list[str]) -> StructType:
            return StructType([StructField(n, StringType()) for n in names])

        def parse(column: str, names: list[str], alias: str):
            if not names:
                return F.lit(None).cast("STRUCT<__none: STRING>").alias(alias)
            return F.from_json(column, struct(names)).alias(alias)

        return [parse("after_json", self._after, "__a"), parse("before_json", self._keys, "__b")]


BAD_VALUE_HINT = (
    " (hint: fix the schema in schema/*.sql, or set on_bad_message: quarantine on the table "
    "entry or in defaults)"
)


def fit_error(checks: list[tuple[str, str, str]]) -> str:
    """SQL: the reason for the first of `checks` (column, raw value, fits SQL) a row fails,
    naming `column = value`; NULL when the row fits."""
    if not checks:
        return "CAST(NULL AS STRING)"
    whens = " ".join(
        f"WHEN NOT ({fits}) THEN concat("
        f"{sql_string('value does not fit its column: ' + c + ' = ')}, coalesce({raw}, 'NULL'), "
        f"{sql_string(BAD_VALUE_HINT)})"
        for c, raw, fits in checks
    )
    return f"CASE {whens} END"


# The column names a row image carries, whichever way it was staged. As the row carries
# them: `unknown_column_error` matches them exactly first and lower-cases only a name that
# does not match, so the usual row (the schema's own spelling) costs no lower-casing.
ROW_NAMES = "coalesce(json_object_keys(after_json), map_keys(after)) AS __names"


def unknown_column_error(schema: TableSchema, ignored: tuple[str, ...]) -> str:
    """SQL: the reason when an inserted or updated row carries a column that the upstream
    schema in force at its commit_ts lacks (a DDL that added it was not understood, or
    skipped by an override): applying the row without it would lose its values silently.
    NULL when every column of the row is known (names compare case-insensitively, as MySQL
    does), or the user chose to ignore it (`ignored`: lower-cased).

    Per name, membership tests of literal lists, not an array difference: that built a hash
    set and two arrays for every row, and cost about as much as parsing the row
    (benchmarks/README.md)."""
    exact = sorted({c.name for c in schema.columns} | set(ignored))
    lowered = sorted({c.name.lower() for c in schema.columns} | set(ignored))

    def listed(names: list[str]) -> str:
        return ", ".join(sql_string(n) for n in names)

    unknown = f"k -> NOT k IN ({listed(exact)}) AND NOT lower(k) IN ({listed(lowered)})"
    reason = (
        f"concat('the row carries column ', element_at(filter(__names, {unknown}), 1), "
        f"{sql_string(f', which the schema of {schema.qualified} in force at this commit_ts does not have: a DDL that added it was not applied')}, "
        f"{sql_string(' (hint: add a `ddl_overrides` entry for that DDL with `action: apply_as` and the statement as ticdc-sync should read it, or list the column under `ignore_columns` on the table entry to drop its values)')})"
    )
    return f"CASE WHEN op <> 'D' AND exists(__names, {unknown}) THEN {reason} END"
