"""The initial load of one target from a Dumpling export (`plan.model.Load`), in Spark.

Spark reads the export's data files, in parallel: a file is split into tasks like any text
file (a compressed one is one task), never passed through the driver. Each line is one
record, because Dumpling's backslash escapes (`--escape-backslash`, its default) turn every
newline and carriage return inside a value into `\\n` / `\\r`. Lines are read as ISO-8859-1,
one character per byte, so every value keeps its exact bytes. The exact parser cuts a line
into fields with one regular expression (CSV: Dumpling's separator, delimiter and null value;
SQL: the row tuples of its INSERT statements, `'..'` strings, `x'..'` bytes, NULL, numbers)
and undoes the fields' escapes. A CSV line is read first by Spark's own CSV parser (far
cheaper), whose reading is kept only where it is proven to be the exact parser's: writing
the values it read back as Dumpling writes them gives the very same line (`parse_fields`).
The values are typed for the target with the codec's conversions and fit checks
(`codecs.dumpling`), the SQL that types change events.

The target gets every row with `_commit_ts` = the snapshot TSO, in ONE Delta commit that
overwrites the table and carries the marker `Load.marker`: a load killed at any point left
no commit (the next run loads again), and a finished one is never redone (its marker). The
table's schema at the snapshot is recorded in the schema history first.

Bad input follows the table's `on_bad_message`: `fail` stops the load at the first line
that cannot be read or whose value does not fit, naming the file and line (found by a
second pass over that file only); `quarantine` keeps such lines in the quarantine table
(replacing what an earlier attempt of the same load kept there) and loads the rest.
Decides nothing: which targets load, from which files, is the plan's. `export_rows` is the
reading and typing alone, without a write: `ticdc-sync verify` compares a target with an
export through it, so that the export's values are typed exactly as a load types them.
It stays one module: Spark's CSV reading is kept only where the exact parser agrees with
it, and the two parsers read best beside the check that joins them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.codecs import dumpling as dumpling_codec
from ticdc_sync.codecs.dumpling_export import data_columns
from ticdc_sync.core import datatypes
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import BadMessagePolicy, DumplingOptions, ExportFiletype, SourceOptions
from ticdc_sync.core.sqlgen import COMMIT_TS, quote, sql_string
from ticdc_sync.core.window import Marker
from ticdc_sync.plan.loads import snapshot_ddl
from ticdc_sync.plan.model import Load, LoadTable
from ticdc_sync.spark.apply import mode_rows
from ticdc_sync.spark.apply.relayout import keep_clustering
from ticdc_sync.spark.apply.row_typing import fit_error
from ticdc_sync.spark.runtime import raised
from ticdc_sync.spark.runtime.conf import before_commit, commit_marker
from ticdc_sync.spark.runtime.delta_log import table_exists

# Marks the message of a failed load row so that the driver can find the line; fields are
# separated by \x1f (never in a path or a number).
LOAD_MARK = "dumpling-load\x1f"
QUARANTINE_TOPIC = "dumpling:"

__all__ = [
    "load",
    "export_rows",
    "failing_on_bad",
    "bad_row_error",
    "read_lines",
    "parse_fields",
    "fast_csv",
    "unescape",
]


def load(w, step_load: Load) -> Marker:
    """Load target `w` (a `TargetWriter`) from `step_load`; the target's new marker."""
    spark = w.spark
    _record_history(w, step_load)
    if not table_exists(spark, w.location):
        raise UserError(f"target {w.name}: its table does not exist; nothing was loaded")
    if step_load.reload:
        # The export's columns replace the target's (DDL after the snapshot follows).
        schema = step_load.tables[0].schema
        target_cols = [(c.name, datatypes.delta_type(c)) for c in schema.columns]
    else:
        target_cols = w.target_columns()
    typed = export_rows(spark, step_load, target_cols)
    if w.plan.on_bad_message is BadMessagePolicy.QUARANTINE:
        typed = _quarantine(w, step_load, typed)
    else:
        typed = failing_on_bad(typed, step_load)
    names = [n for n, _ in target_cols]
    rows = typed.select(
        *[F.col(quote(f"v_{n}")).alias(n) for n in names],
        F.col("commit_ts").alias(COMMIT_TS),
    )
    rows = mode_rows.with_mode_columns(rows, w.plan.mode)
    marker = step_load.marker
    writer = rows.write.format("delta").mode("overwrite")
    if step_load.reload:
        # The export's columns replace the target's (DDL after the snapshot follows).
        writer = writer.option("overwriteSchema", "true")
    if w.plan.partition_by:
        # The table's own partitioning (an overwrite of the schema would drop it).
        writer = writer.partitionBy(*w.plan.partition_by)
    try:
        with commit_marker(spark, marker, "load", target=w.name):
            writer.save(w.location)
        # Delta's overwrite clears a table's clustering columns (a reload's schema or not).
        keep_clustering(w, w.plan.cluster_by)
    except Exception as e:  # noqa: BLE001 - a bad row raised inside the job
        err = bad_row_error(
            spark,
            e,
            f"target {w.name}; nothing of this load was committed; set on_bad_message: "
            "quarantine on the table entry to load the other rows",
        )
        if err is None:
            raise
        raise err from None
    from ticdc_sync.spark.apply.rows import inserted_rows

    n = inserted_rows(spark, w.location, marker)["num_inserted_rows"]
    w.result.inserted += n
    w.result.loaded = n
    w.out(
        f"  {w.name}: loaded {n} row(s) from {len(step_load.files)} file(s) of the Dumpling "
        f"export {step_load.export} at snapshot {step_load.snapshot_ts}"
    )
    return marker


def _record_history(w, step_load: Load) -> None:
    """The tables' schemas at the snapshot, in the schema history (the DDL timeline starts
    from them; a version recorded again by a repeated load is read once)."""
    rows = [
        (
            lt.db,
            lt.table,
            step_load.snapshot_ts,
            snapshot_ddl(step_load, lt),
            lt.schema.to_json(),
            w.source.name,
        )
        for lt in step_load.tables
    ]
    w.state.history.append(rows)


# --------------------------------------------------------------------------- reading


def read_lines(spark: SparkSession, paths: list[str], header: bool) -> DataFrame:
    """The lines of `paths`, one row each: `line` (ISO-8859-1: one character per byte),
    `__path` and `__block` (where the line's split of its file starts).

    Spark's CSV source with no quoting and a NUL separator reads a line as one field: it
    splits files into tasks at line boundaries, decompresses `.gz`/`.zst`, and drops the
    first line of each file when `header` (only in the split that starts the file). A NUL
    byte never appears raw: Dumpling writes it as `\\0`."""
    df = (
        spark.read.format("csv")
        .schema("line STRING")
        .options(
            sep="\u0000",
            quote="",
            escape="",
            header=str(header).lower(),
            encoding="ISO-8859-1",
            multiLine="false",
            mode="PERMISSIVE",
            ignoreLeadingWhiteSpace="false",
            ignoreTrailingWhiteSpace="false",
            nullValue="\u0000",
            emptyValue="",
        )
        .load(paths)
    )
    return df.select(
        F.coalesce(F.col("line"), F.lit("")).alias("line"),
        F.col("_metadata.file_path").alias("__path"),
        F.col("_metadata.file_block_start").alias("__block"),
    )


def _lit(text: str) -> str:
    """A literal for a Java regex (`\\Q..\\E`)."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


def _run_without(text: str) -> str:
    """Java regex: one or more characters (possessive), none a backslash, never crossing
    an occurrence of `text`."""
    if len(text) == 1:
        return f"[^{_lit(text)}\\\\]++"
    return f"(?:(?!{_lit(text)})[^\\\\])++"


def csv_token_regex(o: DumplingOptions) -> str:
    """One field of a line with its leading separator (the line is matched with the
    separator put in front, so that every field, the first and an empty last one too, is
    `separator + field`). Escape mode: a backslash escapes the next character."""
    sep, delim = o.csv_separator, o.csv_delimiter
    plain = f"(?:{_run_without(sep)}|\\\\.)*+"
    if not delim:
        return f"(?s)\\G{_lit(sep)}{plain}"
    quoted = f"{_lit(delim)}(?:{_run_without(delim)}|\\\\.)*+{_lit(delim)}"
    # A bare field never starts with the delimiter: an unterminated quoted field fails.
    return f"(?s)\\G{_lit(sep)}(?:{quoted}|(?!{_lit(delim)}){plain})"


SQL_TOKEN = r"(?s)\G,(?:'(?:[^'\\]++|\\.)*+'|[xX]'[0-9a-fA-F]*+'|[^,'\\]*+)"
SQL_ROW = r"^\((.*)\)[,;]$"


# Stands in for an escaped backslash while the other escapes are undone. Lines are read as
# ISO-8859-1, one character per byte, so no character above U+00FF is ever in a line.
_BACKSLASH = "\ue000"
# MySQL's escapes (`\\0 \\b \\n \\r \\t \\Z`); any other escaped character stands for itself.
_ESCAPES = (
    ("0", "\u0000"),
    ("b", "\u0008"),
    ("n", "\n"),
    ("r", "\r"),
    ("t", "\t"),
    ("Z", "\u001a"),
)


def unescape(field: Column) -> Column:
    """Undo backslash escapes (MySQL's: `\\0 \\b \\n \\r \\t \\Z`, any other character as
    itself); a field without a backslash is returned as it is.

    Plain replacements, left to right like the escapes themselves: escaped backslashes first
    (so that `\\\\n` stays a backslash and an `n`), then each named escape, then any other
    escaped character, then the backslashes back: built-in string functions, with no
    lambda over escape pairs (Spark evaluates a lambda interpreted)."""
    out = F.replace(field, F.lit("\\\\"), F.lit(_BACKSLASH))
    for code, char in _ESCAPES:
        out = F.replace(out, F.lit("\\" + code), F.lit(char))
    out = F.regexp_replace(out, r"(?s)\\(.)", "$1")
    out = F.replace(out, F.lit(_BACKSLASH), F.lit("\\"))
    return F.when(F.instr(field, "\\") == 0, field).otherwise(out)


# Spark's CSV parser (the plain CSV source's, univocity) reads a line for a fraction of what
# the exact parser (a regular expression per line, escapes undone per field) costs. It does
# not read Dumpling's escapes as Dumpling means them (`\\n` stays two characters, the text
# `\\N` reads as NULL, a field too many is dropped), so its reading of a line is used only
# where it is proven exact (`_written`), and the exact parser reads every other line.
FAST_OPTIONS = {
    "escape": "\\",
    "mode": "PERMISSIVE",
    "ignoreLeadingWhiteSpace": "false",
    "ignoreTrailingWhiteSpace": "false",
    "maxColumns": "65536",
}
# A line of fewer bytes has fewer fields than `maxColumns` (with more, the parser fails the
# job instead of the line); a longer line goes to the exact parser.
FAST_MAX_BYTES = 65536


def fast_csv(options: DumplingOptions) -> bool:
    """Whether lines of this CSV dialect are read by Spark's CSV parser first: a one-character
    separator and delimiter (neither a backslash nor a line break), and a null value that the
    exact parser reads as one bare field (no separator in it, not starting with the
    delimiter, each backslash followed by a character that is neither a backslash nor the
    separator). Every other dialect is read by the exact parser alone."""
    sep, delim, null = options.csv_separator, options.csv_delimiter, options.csv_null_value
    if len(sep) != 1 or len(delim) != 1 or sep == delim or {sep, delim} & {"\\", "\r", "\n"}:
        return False
    return sep not in null and not null.startswith(delim) and _single_escapes(null)


def _single_escapes(text: str) -> bool:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if i + 1 == len(text) or text[i + 1] == "\\":
                return False
            i += 1
        i += 1
    return True


def _written(values: list[Column], bare: Sequence[bool], o: DumplingOptions) -> Column:
    """The line that writes `values` as Dumpling does, where the exact parser reads that
    line back as exactly `values`; else NULL. Numbers are bare; every other value is between
    delimiters, each backslash and delimiter in it escaped with a backslash (Dumpling's
    `escapeBackslashCSV`; a NUL left raw is read back raw: no CR or LF is ever in a line);
    NULL is the null value. A bare value holds no separator or backslash, does not start
    with the delimiter and is not the null value.

    This is what proves a line's reading by Spark's CSV parser exact: if the values it read
    write back to the very same line, the exact parser reads that line as those values,
    whatever Spark's parser did to get them."""
    sep, delim, null = o.csv_separator, o.csv_delimiter, o.csv_null_value
    parts: list[Column] = []
    fits = F.lit(True)
    for v, is_bare in zip(values, bare, strict=True):
        if is_bare:
            text = v
            fits = fits & (
                v.isNull()
                | (
                    (v != F.lit(null))
                    & (F.instr(v, sep) == 0)
                    & (F.instr(v, "\\") == 0)
                    & ~F.startswith(v, F.lit(delim))
                )
            )
        else:
            escaped = F.replace(
                F.replace(v, F.lit("\\"), F.lit("\\\\")), F.lit(delim), F.lit("\\" + delim)
            )
            text = F.concat(F.lit(delim), escaped, F.lit(delim))
        parts += [F.coalesce(text, F.lit(null)), F.lit(sep)]
    return F.when(fits, F.concat(*parts[:-1]))


def parse_fields(
    lines: DataFrame, options: DumplingOptions, bare: Sequence[bool], fast: bool = True
) -> DataFrame:
    """`lines` with the raw values of each `line` as `__r0`..`__r{n-1}` (n = `len(bare)`,
    the table's data columns; `bare[i]` when Dumpling writes column i bare): ISO-8859-1
    text, NULL for SQL NULL or the CSV null value and past the line's last field; with
    `__count` (how many fields the line has), `__ok` (whether the line is one well-formed
    record) and `__proven` (whether Spark's CSV parser read it).

    Where the CSV dialect allows (`fast_csv`, and `fast`), Spark's CSV parser reads every
    line first, and the exact parser reads only the lines whose fast reading is not proven
    (`_written`). Each step is a projection of its own, so that what a step computes is
    computed once per row though read more than once (Spark does not merge a projection
    into the next when that would repeat an expensive expression)."""
    n = len(bare)
    line = F.col("line")
    keep = [F.col(quote(c)) for c in lines.columns]
    if options.filetype is ExportFiletype.CSV and fast and n and fast_csv(options):
        schema = ", ".join(f"__f{i} STRING" for i in range(n))
        opts = {
            **FAST_OPTIONS,
            "sep": options.csv_separator,
            "quote": options.csv_delimiter,
            "nullValue": options.csv_null_value,
        }
        read = F.when(F.octet_length(line) < FAST_MAX_BYTES, F.from_csv(line, schema, opts))
        lines = lines.select(*keep, read.alias("__fast"))
        written = _written([F.col("__fast")[f"__f{i}"] for i in range(n)], bare, options)
        # The fast reading where it is proven; NULL sends the line to the exact parser.
        lines = lines.select(*keep, F.when(written == line, F.col("__fast")).alias("__fast"))
        fast_values = [F.col("__fast")[f"__f{i}"] for i in range(n)]
    else:
        lines = lines.select(*keep, F.lit(None).cast("struct<__f0:string>").alias("__fast"))
        fast_values = [F.lit(None).cast("string")] * n
    proven = F.col("__fast").isNotNull()
    tokens, field, whole = _exact_parser(options)
    lines = lines.select(*keep, "__fast", F.when(~proven, tokens).alias("__tokens"))
    ok = proven | (F.array_join(F.col("__tokens"), "") == whole)
    if options.filetype is ExportFiletype.SQL:
        ok = proven | (line.rlike(SQL_ROW) & (F.array_join(F.col("__tokens"), "") == whole))
    lines = lines.select(
        *keep, "__fast", F.transform(F.col("__tokens"), field).alias("__exact"), ok.alias("__ok")
    )
    exact = F.col("__exact")
    raws = [
        F.when(proven, v).otherwise(F.get(exact, i)).alias(f"__r{i}")
        for i, v in enumerate(fast_values)
    ]
    count = F.when(proven, F.lit(n)).otherwise(F.size(exact))
    return lines.select(*keep, *raws, count.alias("__count"), "__ok", proven.alias("__proven"))


def _exact_parser(options: DumplingOptions) -> tuple[Column, Callable[[Column], Column], Column]:
    """The exact parser of a line: its tokens (one per field, with the separator before it),
    the raw value of a token, and the text the tokens of a well-formed line join to."""
    line = F.col("line")
    if options.filetype is ExportFiletype.CSV:
        sep, delim = options.csv_separator, options.csv_delimiter
        whole = F.concat(F.lit(sep), line)
        tokens = F.regexp_extract_all(whole, F.lit(csv_token_regex(options)), 0)
        n = len(sep)
        d = len(delim)

        def field(t: Column) -> Column:
            raw = F.substring(t, n + 1, 2**31 - 1)
            inner = F.substring(raw, d + 1, F.length(raw) - 2 * d)
            quoted = F.lit(bool(delim)) & F.startswith(raw, F.lit(delim)) & (F.length(raw) >= 2 * d)
            return (
                F.when(quoted, unescape(inner))
                .when(raw == F.lit(options.csv_null_value), F.lit(None).cast("string"))
                .otherwise(unescape(raw))
            )

        return tokens, field, whole
    inner = F.regexp_extract(line, SQL_ROW, 1)
    whole = F.concat(F.lit(","), inner)
    tokens = F.regexp_extract_all(whole, F.lit(SQL_TOKEN), 0)

    def sql_field(t: Column) -> Column:
        raw = F.substring(t, 2, 2**31 - 1)
        first = F.substring(raw, 1, 1)
        return (
            F.when(first == "'", unescape(F.substring(raw, 2, F.length(raw) - 2)))
            .when(
                F.lower(F.substring(raw, 1, 2)) == "x'",
                F.decode(F.unhex(F.substring(raw, 3, F.length(raw) - 3)), "ISO-8859-1"),
            )
            .when(F.upper(raw) == "NULL", F.lit(None).cast("string"))
            .otherwise(raw)
        )

    return tokens, sql_field, whole


def _insert_heads(lt: LoadTable) -> list[str]:
    """The INSERT lines Dumpling writes for the table: the column list only when some
    columns are left out (generated) or with --complete-insert."""
    table = "`" + lt.table.replace("`", "``") + "`"
    cols = ",".join("`" + c.replace("`", "``") + "`" for c in data_columns(lt.schema))
    return [f"INSERT INTO {table} VALUES", f"INSERT INTO {table} ({cols}) VALUES"]


def export_rows(
    spark: SparkSession, step_load: Load, target_cols: Sequence[tuple[str, str]]
) -> DataFrame:
    """The rows of every table of `step_load`, typed for `target_cols` (name, Delta type):
    `v_<name>` per target column, `commit_ts` (the snapshot), `__err` (why the row cannot
    be loaded, or NULL) and where a bad row is (`line`, `__path`, `__block`, `db`, `tbl`).
    Lazy: nothing is read until an action runs."""
    frames = [_table_rows(spark, step_load, lt, target_cols) for lt in step_load.tables]
    typed = frames[0]
    for f in frames[1:]:
        typed = typed.unionByName(f)
    return typed


def failing_on_bad(typed: DataFrame, step_load: Load) -> DataFrame:
    """`typed` (`export_rows`) raising at its first bad row, with what `bad_row_error`
    needs to name its file and line."""
    return typed.withColumn(
        "commit_ts",
        F.when(F.col("__err").isNotNull(), F.raise_error(_failure(step_load))).otherwise(
            F.col("commit_ts")
        ),
    )


def bad_row_error(spark: SparkSession, e: BaseException, context: str) -> UserError | None:
    """The error for a bad row raised by `failing_on_bad` inside a job (`file:line: table:
    reason (context)`), or None when `e` is no such error."""
    err = raised.user_error(e)
    if err is None:
        return None
    return _located(spark, str(err), context)


def _table_rows(spark: SparkSession, step_load: Load, lt: LoadTable, target_cols) -> DataFrame:
    """The typed rows of one upstream table of the load: `v_<column>` for each target
    column, `__err` (why the row cannot be loaded, or NULL), and what a bad row's message
    and quarantine need (`line`, `__path`, `__block`, `db`, `tbl`)."""
    o = step_load.options
    csv = o.filetype is ExportFiletype.CSV
    paths = [f.location for f in lt.files]
    names = data_columns(lt.schema)
    if not paths:
        lines = spark.createDataFrame([], "line STRING, __path STRING, __block BIGINT")
    else:
        lines = read_lines(spark, paths, header=csv and not o.no_header)
    columns = [lt.schema.column(c) for c in names]
    bare = [c is not None and dumpling_codec.written_bare(c) for c in columns]
    parsed = parse_fields(lines, o, bare)
    line = F.col("line")
    ok, count = F.col("__ok"), F.col("__count")
    n = len(names)
    if csv:
        is_row = F.lit(True)
        other = F.lit(None).cast("string")
    else:
        is_row = F.startswith(line, F.lit("("))
        heads = _insert_heads(lt)
        allowed = line.isin(*heads) | line.rlike(r"^/\*!.*\*/;$")
        other = F.when(
            ~allowed,
            F.concat(
                F.lit("not a line of a Dumpling INSERT file for "),
                F.lit(f"{lt.db}.{lt.table}: "),
                F.substring(line, 1, 80),
                F.lit(f" (hint: expected `{heads[0]}`, `(...),` rows or `/*!...*/;`)"),
            ),
        )
    what = "fields" if csv else "values"
    bad = (
        F.when(~is_row, other)
        .when(
            ~ok,
            F.lit(
                "cannot read this line as a Dumpling "
                + ("CSV record" if csv else "INSERT row")
                + " (an unterminated or misquoted value?) (hint: check the export's flags "
                "in `initial_load.options`)"
            ),
        )
        .when(
            count != n,
            F.concat(
                F.lit("the line has "),
                count.cast("string"),
                F.lit(
                    f" {what}, but {lt.db}.{lt.table} has {n} column(s) in the export's schema "
                    f"file {lt.schema_file} (hint: check csv-separator and csv-delimiter in "
                    "`initial_load.options`)"
                    if csv
                    else f" {what}, but {lt.db}.{lt.table} has {n} column(s) in the export's "
                    f"schema file {lt.schema_file}"
                ),
            ),
        )
    )
    raws = [f"__r{i}" for i in range(n)]
    # Lines that are no row (an SQL file's INSERT heads and comments) and are allowed drop out.
    rows = parsed.where(is_row | bad.isNotNull()).select(
        "line", "__path", "__block", *raws, bad.alias("__bad")
    )
    converted, typing = _typing(lt, target_cols, o, dict(zip(names, raws, strict=True)))
    # Two projections: each value is converted once, in the first, and both its target
    # value and its fit check read it (Spark keeps the projections apart, as merging them
    # would repeat the conversions).
    typed = rows.selectExpr("line", "__path", "__block", "__bad", *raws, *converted).selectExpr(
        "line", "__path", "__block", *typing
    )
    return typed.select(
        "*",
        F.lit(step_load.snapshot_ts).cast("bigint").alias("commit_ts"),
        F.lit(lt.db).alias("db"),
        F.lit(lt.table).alias("tbl"),
    )


def _typing(
    lt: LoadTable, target_cols: list[tuple[str, str]], o: DumplingOptions, raws: dict[str, str]
) -> tuple[list[str], list[str]]:
    """SQL of two projections over the raw values (`raws`: data column to the column
    holding its text). The first: each column's converted value (`__v<i>`). The second:
    each target column's value (`v_<name>`) and `__err`: the row's `__bad`, else the first
    value that does not fit its column. The codec's conversions and fit checks
    (`codecs.dumpling`), the same as change events are typed with, the conversion in a fit
    check read from its `__v<i>` (the same expression, converted once); a column the
    export does not hold (generated upstream, or another shard's) is NULL."""
    opts = SourceOptions(time_zone=o.time_zone)
    by_name = {n.lower(): quote(r) for n, r in raws.items()}
    converted: list[str] = []
    values: list[str] = []
    checks: list[tuple[str, str, str]] = []
    for name, ttype in target_cols:
        col = lt.schema.column(name)
        raw = by_name.get(col.name.lower()) if col is not None else None
        if col is None or raw is None:
            values.append(f"CAST(NULL AS {ttype}) AS {quote('v_' + name)}")
            continue
        value = dumpling_codec.value_sql(col, raw, opts)
        v = quote(f"__v{len(converted)}")
        converted.append(f"{value} AS {v}")
        values.append(f"CAST({v} AS {ttype}) AS {quote('v_' + name)}")
        # The conversion's text stands for itself wherever the check repeats it.
        fits = dumpling_codec.fits_sql(col, raw, opts).replace(value, v)
        checks.append((col.name, raw, fits))
    return converted, [*values, f"coalesce(__bad, {fit_error(checks)}) AS __err"]


# --------------------------------------------------------------------------- bad rows


def _shown(step_load: Load) -> Column:
    """The bad row's file as the plan shows it: `<export>/<file name>`."""
    return F.concat(F.lit(step_load.export + "/"), F.element_at(F.split("__path", "/"), -1))


def _failure(step_load: Load) -> Column:
    """The message a bad row raises: where it is, for `_located`, and why. Built only for a
    bad row (inside the `when` that raises it)."""
    sep = F.lit("\x1f")
    return F.concat(
        F.lit(raised.PREFIX + LOAD_MARK),
        F.col("__path"),
        sep,
        _shown(step_load),
        sep,
        F.col("__block").cast("string"),
        sep,
        F.xxhash64(F.encode("line", "ISO-8859-1")).cast("string"),
        sep,
        F.col("db"),
        F.lit("."),
        F.col("tbl"),
        sep,
        F.col("__err"),
    )


_MARKED = re.compile(
    re.escape(LOAD_MARK) + "([^\x1f]*)\x1f([^\x1f]*)\x1f(-?\\d+)\x1f(-?\\d+)\x1f([^\x1f]*)\x1f(.*)",
    re.S,
)


def _located(spark: SparkSession, message: str, context: str) -> UserError:
    """The error for a bad row: `file:line: reason`. The line is found by reading that
    file once more: the first line with the failing line's bytes."""
    m = _MARKED.match(message)
    if m is None:
        return UserError(message)
    path, shown, _block, digest, table, reason = m.groups()
    line = locate_line(spark, path, int(digest))
    where = f"{shown}:{line}" if line is not None else shown
    return UserError(f"{where}: table {table}: {reason} ({context})")


def locate_line(spark: SparkSession, path: str, digest: int) -> int | None:
    """The 1-based number of the first line of file `path` whose bytes hash to `digest`
    (xxhash64), counting every line, or None."""
    df = spark.read.text(path).select(
        F.col("_metadata.file_block_start").alias("b"),
        F.monotonically_increasing_id().alias("m"),
        F.xxhash64(F.col("value").cast("binary")).alias("h"),
    )
    first = df.where(F.col("h") == digest).agg(F.min(F.struct("b", "m")).alias("f")).collect()
    if not first or first[0]["f"] is None:
        return None
    b, m = first[0]["f"]["b"], first[0]["f"]["m"]
    before = (F.col("b") < b) | ((F.col("b") == b) & (F.col("m") <= m))
    return int(df.where(before).count())


def _quarantine(w, step_load: Load, typed: DataFrame) -> DataFrame:
    """Keep the rows that cannot be loaded in the quarantine (in place of what an earlier
    attempt of this load kept there); the rows that can."""
    bad = typed.where(F.col("__err").isNotNull())
    q = bad.select(
        F.lit(w.source.name).alias("source"),
        F.concat(F.lit(QUARANTINE_TOPIC), _shown(step_load)).alias("topic"),
        F.lit(0).alias("partition"),
        F.col("__block").alias("offset"),
        F.lit(0).alias("idx"),
        "db",
        "tbl",
        "commit_ts",
        F.concat(
            F.col("__err"),
            F.lit(" (in the part of the file from byte "),
            F.col("__block").cast("string"),
            F.lit(")"),
        ).alias("reason"),
        F.lit(None).cast("binary").alias("raw_key"),
        F.encode("line", "ISO-8859-1").alias("raw_value"),
    )
    # One load writes its bad rows at once; run again, it replaces them (no duplicates).
    where = " OR ".join(
        f"(`source` = {sql_string(w.source.name)} AND db = {sql_string(lt.db)} AND "
        f"tbl = {sql_string(lt.table)} AND startswith(topic, "
        f"{sql_string(QUARANTINE_TOPIC + step_load.export + '/')}))"
        for lt in step_load.tables
    )
    q = q.cache()
    try:
        n = q.count()
        before_commit("quarantine.append", target=w.name)
        (
            q.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", where)
            .save(w.state.quarantine.path)
        )
    finally:
        q.unpersist()
    if n:
        w.result.quarantined += n
        w.out(
            f"  {w.name}: quarantined {n} line(s) of the export that cannot be loaded "
            "(`ticdc-sync status` counts them)"
        )
    return typed.where(F.col("__err").isNull())
