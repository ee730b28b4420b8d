"""The initial load of one target from a Dumpling export (`plan.model.Load`), in Spark.

Spark reads the export's data files, in parallel: a file is split into tasks like any text
file (a compressed one is one task), never passed through the driver. Each line is one
record, because Dumpling's backslash escapes (`--escape-backslash`, its default) turn every
newline and carriage return inside a value into `\\n` / `\\r`. Lines are read as ISO-8859-1,
one character per byte, so every value keeps its exact bytes. A line is cut into fields by
one regular expression (CSV: Dumpling's separator, delimiter and null value; SQL: the row
tuples of its INSERT statements, `'..'` strings, `x'..'` bytes, NULL, numbers), the fields'
escapes are undone, and the row is shaped like a staged row event (an `after` map of column
to text), then typed by the same code as change events (`TargetWriter.typed_rows`, with the
`codecs.dumpling` conventions).

The target gets every row with `_commit_ts` = the snapshot TSO, in ONE Delta commit that
overwrites the table and carries the marker `Load.marker`: a load killed at any point left
no commit (the next run loads again), and a finished one is never redone (its marker). The
table's schema at the snapshot is recorded in the schema history first.

Bad input follows the table's `on_bad_message`: `fail` stops the load at the first line
that cannot be read or whose value does not fit, naming the file and line (found by a
second pass over that file only); `quarantine` keeps such lines in the quarantine table
(replacing what an earlier attempt of the same load kept there) and loads the rest.
Decides nothing: which targets load, from which files, is the plan's.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync import datatypes
from ticdc_sync.codecs import dumpling as dumpling_codec
from ticdc_sync.dumpling import data_columns
from ticdc_sync.errors import UserError
from ticdc_sync.events import OP_INSERT
from ticdc_sync.model import BadMessagePolicy, DumplingOptions, ExportFiletype, SourceOptions
from ticdc_sync.plan.loads import snapshot_ddl
from ticdc_sync.plan.model import Load, LoadTable
from ticdc_sync.spark import raised
from ticdc_sync.spark.conf import commit_marker
from ticdc_sync.spark.delta_log import table_exists
from ticdc_sync.sqlgen import COMMIT_TS, quote, sql_string
from ticdc_sync.window import Marker

# Marks the message of a failed load row so that the driver can find the line; fields are
# separated by \x1f (never in a path or a number).
LOAD_MARK = "dumpling-load\x1f"
QUARANTINE_TOPIC = "dumpling:"

__all__ = ["load", "read_lines", "parse_fields", "unescape"]


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
        target_cols = w._target_columns()
    frames = [_table_rows(w, step_load, lt, target_cols) for lt in step_load.tables]
    typed = frames[0]
    for f in frames[1:]:
        typed = typed.unionByName(f)
    policy = w.project.bad_message_policy(w.plan.entry)
    if policy is BadMessagePolicy.QUARANTINE:
        typed = _quarantine(w, step_load, typed)
    else:
        typed = typed.withColumn(
            "commit_ts",
            F.when(F.col("__err").isNotNull(), F.raise_error(_failure(step_load))).otherwise(
                F.col("commit_ts")
            ),
        )
    names = [n for n, _ in target_cols]
    rows = typed.select(
        *[F.col(quote(f"v_{n}")).alias(n) for n in names],
        F.col("commit_ts").alias(COMMIT_TS),
    )
    marker = step_load.marker
    writer = rows.write.format("delta").mode("overwrite")
    if step_load.reload:
        # The export's columns replace the target's (DDL after the snapshot follows).
        writer = writer.option("overwriteSchema", "true")
    try:
        with commit_marker(spark, marker):
            writer.save(w.location)
    except Exception as e:  # noqa: BLE001 - a bad row raised inside the job
        err = raised.user_error(e)
        if err is None:
            raise
        raise _located(spark, str(err), w.name) from None
    from ticdc_sync.spark.rows import _inserted

    n = _inserted(spark, w.location)["num_inserted_rows"]
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


def parse_fields(lines: DataFrame, options: DumplingOptions) -> DataFrame:
    """`lines` with `__fields` (the raw values of its `line`: ISO-8859-1 text; NULL for SQL
    NULL or the CSV null value) and `__ok` (whether the line is one well-formed record).

    Each step is a projection of its own: the tokens and the fields are each read more
    than once, and a column is computed once per row, where a repeated expression is
    shared only if Spark's subexpression elimination finds it."""
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

        ok = F.array_join(F.col("__tokens"), "") == whole
    else:
        inner = F.regexp_extract(line, SQL_ROW, 1)
        whole = F.concat(F.lit(","), inner)
        tokens = F.regexp_extract_all(whole, F.lit(SQL_TOKEN), 0)

        def field(t: Column) -> Column:
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

        ok = line.rlike(SQL_ROW) & (F.array_join(F.col("__tokens"), "") == whole)
    with_tokens = lines.withColumn("__tokens", tokens)
    return with_tokens.select(
        *[F.col(quote(c)) for c in lines.columns],
        F.transform(F.col("__tokens"), field).alias("__fields"),
        ok.alias("__ok"),
    )


def _insert_heads(lt: LoadTable) -> list[str]:
    """The INSERT lines Dumpling writes for the table: the column list only when some
    columns are left out (generated) or with --complete-insert."""
    table = "`" + lt.table.replace("`", "``") + "`"
    cols = ",".join("`" + c.replace("`", "``") + "`" for c in data_columns(lt.schema))
    return [f"INSERT INTO {table} VALUES", f"INSERT INTO {table} ({cols}) VALUES"]


def _table_rows(w, step_load: Load, lt: LoadTable, target_cols) -> DataFrame:
    """The typed rows of one upstream table of the load (`TargetWriter.typed_rows`)."""
    o = step_load.options
    csv = o.filetype is ExportFiletype.CSV
    paths = [f.location for f in lt.files]
    names = data_columns(lt.schema)
    if not paths:
        lines = w.spark.createDataFrame([], "line STRING, __path STRING, __block BIGINT")
    else:
        lines = read_lines(w.spark, paths, header=csv and not o.no_header)
    lines = parse_fields(lines, o)
    line = F.col("line")
    fields, ok = F.col("__fields"), F.col("__ok")
    n = len(names)
    count = F.size(fields)
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
            F.concat(
                F.lit(
                    "cannot read this line as a Dumpling "
                    + ("CSV record" if csv else "INSERT row")
                    + " (an unterminated or misquoted value?) (hint: check the export's flags "
                    "in `initial_load.options`)"
                ),
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
    # A row of the wrong width still fills exactly n values (the error names it).
    padded = F.slice(F.concat(fields, F.array_repeat(F.lit(None).cast("string"), n)), 1, n)
    name_arr = F.array(*[F.lit(c) for c in names])
    shown = F.concat(F.lit(step_load.export + "/"), F.element_at(F.split("__path", "/"), -1))
    frame = lines.select(
        shown.alias("topic"),
        F.lit(0).alias("partition"),
        F.col("__block").alias("offset"),
        F.lit(0).alias("idx"),
        F.lit(step_load.snapshot_ts).cast("bigint").alias("commit_ts"),
        F.lit(OP_INSERT).alias("op"),
        F.lit(lt.db).alias("db"),
        F.lit(lt.table).alias("tbl"),
        F.when(is_row | bad.isNotNull(), F.map_from_arrays(name_arr, padded))
        .otherwise(F.lit(None))
        .alias("after"),
        F.lit(None).cast("map<string,string>").alias("before"),
        F.lit(None).cast("string").alias("after_json"),
        F.lit(None).cast("string").alias("before_json"),
        bad.alias("__bad"),
        F.col("__path"),
        F.xxhash64(F.encode(line, "ISO-8859-1")).alias("__hash"),
        F.encode(line, "ISO-8859-1").alias("__raw"),
    ).where(F.col("after").isNotNull())
    opts = SourceOptions(time_zone=o.time_zone)
    return w.typed_rows(
        frame,
        lt.db,
        lt.table,
        lt.schema,
        target_cols,
        step_load.snapshot_ts,
        codec=dumpling_codec,
        opts=opts,
        row_error="__bad",
        carry=("__bad", "__path", "__hash", "__raw"),
        # The `after` map is built from the schema's own column names (above).
        names_known=True,
    )


# --------------------------------------------------------------------------- bad rows


def _failure(step_load: Load) -> Column:
    """The message a bad row raises: where it is, for `_located`, and why."""
    sep = F.lit("\x1f")
    return F.concat(
        F.lit(raised.PREFIX + LOAD_MARK),
        F.col("__path"),
        sep,
        F.col("topic"),
        sep,
        F.col("offset").cast("string"),
        sep,
        F.col("__hash").cast("string"),
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


def _located(spark: SparkSession, message: str, target: str) -> UserError:
    """The error for a bad row: `file:line: reason`. The line is found by reading that
    file once more: the first line with the failing line's bytes."""
    m = _MARKED.match(message)
    if m is None:
        return UserError(message)
    path, shown, _block, digest, table, reason = m.groups()
    line = locate_line(spark, path, int(digest))
    where = f"{shown}:{line}" if line is not None else shown
    return UserError(
        f"{where}: table {table}: {reason} (target {target}; nothing of this load was "
        "committed; set on_bad_message: quarantine on the table entry to load the other rows)"
    )


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
        F.concat(F.lit(QUARANTINE_TOPIC), F.col("topic")).alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("bigint").alias("offset"),
        F.col("idx").cast("int").alias("idx"),
        "db",
        "tbl",
        "commit_ts",
        F.concat(
            F.col("__err"),
            F.lit(" (in the part of the file from byte "),
            F.col("offset").cast("string"),
            F.lit(")"),
        ).alias("reason"),
        F.lit(None).cast("binary").alias("raw_key"),
        F.col("__raw").alias("raw_value"),
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
