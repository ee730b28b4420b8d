"""Row segments of one target: type the staged row changes, collapse them to one change per key,
and apply them in ONE guarded MERGE whose commit carries the target's new marker.

For each segment (lo, hi] of the plan, the staged row changes of the target's upstream
tables are typed with the codec's value expressions for the schema in force at each row's
commit_ts (the DDL timeline), exploded into per-key changes (an UPDATE that moves its key
also deletes the old key), collapsed to each key's last change and merged (a plain INSERT
into a target without data files). A value that does not fit its column, or a row that
carries a column the upstream schema does not have, fails the MERGE or is quarantined, by
the table's `on_bad_message`. Rows stay in Spark. Decides nothing the plan has not decided:
each segment's schema spans and keys, the create properties and the bad-message policy are
the plan's (`plan.model.Rows`, `TargetPlan`); it never calls `routing` or `table_features`.
The SQL that types a row image is `row_typing`; the rest stays one module because it is one
class, `TargetWriter`, whose typing, bad-value handling, collapse and MERGE share one
target's state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F

from ticdc_sync import codecs
from ticdc_sync.core import datatypes
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.events import KIND_ROW, OP_DELETE, OP_INSERT, OP_UPDATE
from ticdc_sync.core.model import BadMessagePolicy, Mode, Source
from ticdc_sync.core.sqlgen import (
    COMMIT_TS,
    OP_COL,
    create_table_sql,
    quote,
    sql_string,
    table_ref,
)
from ticdc_sync.core.sqlgen_history import INSERT_SQL, MERGE_SQL
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.core.window import Marker
from ticdc_sync.plan.model import Properties, Rows, RowTable, TargetPlan
from ticdc_sync.spark.apply import mode_rows
from ticdc_sync.spark.apply.local_copies import drop_checkpoint, local_copy
from ticdc_sync.spark.apply.relayout import keep_clustering
from ticdc_sync.spark.apply.row_typing import (
    ROW_NAMES,
    Images,
    RawValues,
    fit_error,
    unknown_column_error,
)
from ticdc_sync.spark.runtime import raised
from ticdc_sync.spark.runtime.conf import INTERPRETED, before_commit, commit_marker, session_confs
from ticdc_sync.spark.runtime.delta_log import (
    checksum_facts,
    data_size,
    newest_commit_info,
    table_exists,
    target_marker,
)
from ticdc_sync.spark.runtime.remote import num_partitions, observed
from ticdc_sync.spark.runtime.rs_create import PlainCreate
from ticdc_sync.spark.runtime.table_create import create_table
from ticdc_sync.spark.staging.state import State

if TYPE_CHECKING:
    from ticdc_sync.spark.apply.shared_window import SharedWindow

SOURCE_VIEW = "__ticdc_sync_source"


@dataclass
class TargetResult:
    target: str
    applied_ts: int = -1
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    merges: int = 0
    ddl_applied: list[str] = field(default_factory=list)
    blocked: dict | None = None
    error: str | None = None
    quarantined: int = 0
    loaded: int | None = None  # rows of an initial load (`spark/apply/load.py`)


class TargetWriter:
    """The Spark side of one target of the plan: its table, its rows, its result."""

    def __init__(
        self,
        spark: SparkSession,
        state: State,
        source: Source,
        target: TargetPlan,
        out: Callable[[str], None],
    ) -> None:
        self.spark = spark
        self.state = state
        self.source = source
        self.plan = target
        self.out = out
        self.location = target.location
        self.ref = table_ref(self.location)
        self.codec = codecs.module_for(source.protocol)
        self.result = TargetResult(target.name, applied_ts=target.marker.applied_ts)
        # Staged events read once for several targets (`shared_window`), or None: this
        # target reads the staging table itself.
        self.window: SharedWindow | None = None

    @property
    def name(self) -> str:
        return self.plan.name

    def use_window(self, window: SharedWindow | None) -> None:
        """Read staged row events from `window` (which covers this target's row segments)
        instead of the staging table, until given None."""
        self.window = window

    def create(
        self,
        schema: TableSchema,
        properties: Properties = (),
        partition_by: tuple[str, ...] = (),
        cluster_by: tuple[str, ...] = (),
    ) -> None:
        """Create the target from `schema` with the planned TBLPROPERTIES and layout; a
        table that exists (dropped upstream and created again, or rows renamed in) is
        replaced by an empty one of that schema and layout, in one commit that keeps its
        history (CREATE OR REPLACE refuses a path table whose properties differ from the
        statement's)."""
        cols = [(c.name, datatypes.delta_type(c)) for c in schema.columns]
        extra = self.plan.mode_columns
        before_commit("create", target=self.name)
        if not table_exists(self.spark, self.location):
            sql = create_table_sql(
                self.ref, cols, schema.comment, dict(properties), extra, partition_by, cluster_by
            )
            create_table(
                self.spark,
                self.location,
                sql,
                PlainCreate(
                    (*cols, (COMMIT_TS, "BIGINT"), *extra),
                    schema.comment,
                    tuple(properties),
                    partition_by,
                    cluster_by,
                ),
            )
            return
        ddl = ", ".join(f"{quote(n)} {t}" for n, t in [*cols, (COMMIT_TS, "BIGINT"), *extra])
        writer = (
            self.spark.createDataFrame([], ddl)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
        )
        # Without it an overwrite of the schema drops the table's partitioning.
        writer = writer.partitionBy(*partition_by) if partition_by else writer
        writer.save(self.location)
        keep_clustering(self, cluster_by)

    # --- rows -----------------------------------------------------------------------

    def target_columns(self) -> list[tuple[str, str]]:
        df = self.spark.read.format("delta").load(self.location)
        own = self.own_columns()
        return [(f.name, f.dataType.simpleString()) for f in df.schema.fields if f.name not in own]

    def own_columns(self) -> set[str]:
        """The target's columns that are not upstream columns: `_commit_ts` and its mode's."""
        return {COMMIT_TS, *(n for n, _ in self.plan.mode_columns)}

    def typed_segment(self, step: Rows, target_cols: list[tuple[str, str]]) -> DataFrame | None:
        """Typed row changes of the segment's upstream tables, each span with the schema the
        plan gives it, with a fit check (None: no table of the segment has a schema)."""
        if step.error is not None:
            raise UserError(step.error)
        lo, hi = step.lo, step.hi
        # Straight from the staged Parquet unless a shared copy of the window was given:
        # for one target or a few over a large window, the filters and column pruning read
        # each target's rows about twice as fast as a DISK_ONLY copy of the window is
        # written and read back; for many targets of one small window, one copy saves a
        # scan and its planning per target (benchmarks/README.md). Same filter either way.
        window = self.window
        staged = (
            window.events(self.spark, self.name, step)
            if window is not None and window.covers(step)
            else self.state.staging.events(self.spark)
        )
        ev = staged.where(
            (F.col("source") == self.source.name)
            & (F.col("kind") == KIND_ROW)
            & (F.col("commit_ts") > lo)
            & (F.col("commit_ts") <= hi)
        )
        # A segment across ADD COLUMN DDLs (`fuse_additive`): each row is typed with the
        # schema of its commit_ts; a column added later gets its ADD's backfill (`fill`).
        frames = [self._typed_one(ev, t, step.keys, target_cols) for t in step.tables]
        if not frames:
            return None
        df = frames[0]
        for f in frames[1:]:
            df = df.unionByName(f)
        return df

    def _typed_one(
        self,
        ev,
        table: RowTable,
        keys: tuple[str, ...],
        target_cols,
    ) -> DataFrame:
        """The rows of one upstream table, typed for the target, with a fit check.

        All of the table's spans in ONE projection over one scan: where spans type a column
        differently (a column one of them lacks, filled), the expression is chosen by the
        row's commit_ts; a projection per span read the staged rows once per span.

        `ev` has the staged events' columns (`after`/`after_json`, positions, op)."""
        codec = self.codec
        opts = self.source.options
        db, tbl, spans = table.db, table.table, table.spans
        raws = RawValues()
        images = Images()
        per_span: list[tuple[list[str], list[tuple[str, str, str]]]] = []
        key_names: list[str] = []
        for span in spans:
            exprs: list[str] = []
            checks: list[tuple[str, str, str]] = []
            schema = span.schema
            fill = dict(span.fill)
            for name, ttype in target_cols:
                col = schema.column(name)
                if col is None:
                    value = fill.get(name.lower(), "NULL")
                    exprs.append(f"CAST({value} AS {ttype})")
                    continue
                raw = raws.of(images.after(col.name))
                exprs.append(f"CAST({codec.value_sql(col, raw, opts)} AS {ttype})")
                checks.append((col.name, raw, codec.fits_sql(col, raw, opts)))
            key_types = dict(target_cols)
            key_names = []
            for k in keys:
                col = schema.column(k)
                assert col is not None, "the plan checks that each key is a column"
                raw = raws.of(images.key(col.name))
                ktype = key_types.get(col.name) or datatypes.delta_type(col)
                key_names.append(col.name)
                exprs.append(f"CAST({codec.value_sql(col, raw, opts)} AS {ktype})")
                checks.append((col.name, raw, codec.fits_sql(col, raw, opts)))
            per_span.append((exprs, checks))
        names = [quote("v_" + n) for n, _ in target_cols] + [quote("b_" + k) for k in key_names]
        # Spans follow each other in commit_ts order: the first bound a row is under.
        bounds = [f"commit_ts <= {span.hi}" for span in spans]

        def by_span(texts: list[str]) -> str:
            if len(set(texts)) == 1:
                return texts[0]
            whens = " ".join(f"WHEN {b} THEN {t}" for b, t in zip(bounds[:-1], texts, strict=False))
            return f"CASE {whens} ELSE {texts[-1]} END"

        columns = [
            f"{by_span([exprs[i] for exprs, _ in per_span])} AS {name}"
            for i, name in enumerate(names)
        ]
        ignored = self.plan.entry.ignore_columns
        errors = [
            f"coalesce({unknown_column_error(span.schema, ignored)}, {fit_error(checks)})"
            for span, (_, checks) in zip(spans, per_span, strict=True)
        ]
        carried = ["topic", "`partition`", "`offset`", "idx", "commit_ts", "op", "db", "tbl"]
        # The row's text (what a quarantined value keeps), whichever way it was staged.
        text = "coalesce(after_json, to_json(after)) AS after_text"
        has_before = "before IS NOT NULL OR before_json IS NOT NULL AS has_before"
        # Only rows inside a span: one without a schema (before the table existed) has none.
        inside = F.lit(False)
        for span in spans:
            inside = inside | ((F.col("commit_ts") > span.lo) & (F.col("commit_ts") <= span.hi))
        rows = ev.where((F.col("db") == db) & (F.col("tbl") == tbl) & inside)
        return (
            rows.select(*carried, "after", "before", "after_json", "before_json", *images.parsed())
            .selectExpr(*carried, text, has_before, ROW_NAMES, *raws.columns())
            .selectExpr(
                *carried, "after_text", "has_before", *columns, f"{by_span(errors)} AS __err"
            )
        )

    def merge(self, marker: Marker, step: Rows) -> Marker:
        """Apply one row segment in one MERGE (or INSERT) whose commit carries the new marker."""
        # A local table's checksum answers for existence, columns and size without a query
        # plan or a job (one per target per batch otherwise); else ask Delta.
        facts = checksum_facts(self.location)
        if facts is not None:
            own = self.own_columns()
            target_cols = [c for c in facts.columns if c[0] not in own]
            files, size = facts.files, facts.size
        elif not table_exists(self.spark, self.location):
            return marker  # the DDL that creates this target comes later in the window
        else:
            target_cols = self.target_columns()
            files, size = data_size(self.spark, self.location)
        # No data files: a MERGE has nothing to match. The size picks how it merges.
        empty = files == 0
        # Else the kinds of its changes, counted as the source is copied (`_appends`).
        kinds = None if empty else Observation()
        changes = self.changes(step, target_cols, kinds=kinds)
        new_marker = Marker(step.hi, marker.ddl_ts, marker.ddl_part, marker.ddl_parts)
        if changes is None:
            return marker
        src, key_names = changes
        cols = [n for n, _ in target_cols]
        materialized = None
        conf = {MATERIALIZE: "none"}
        # Whether the statement is a plain INSERT (of what the MERGE would insert).
        append = empty
        try:
            if empty:
                # Nothing to match: the MERGE's result is its NOT MATCHED inserts, and a
                # plain append is one pass over the source, without joins or a copy.
                src.createOrReplaceTempView(SOURCE_VIEW)
                sql = INSERT_SQL[self.plan.mode](self.ref, SOURCE_VIEW, cols)
                # Not counted before it runs, and it reads the source's whole window:
                # bounded by what was ever staged for the source.
                conf.update(_interpreted_conf(self.source_rows_staged()))
            elif size <= SMALL_TARGET:
                # A small target (most tables of a real database, and every table in a
                # short --follow batch): its MERGE costs little but fixed overhead, paid
                # once per target per batch. So no key-range job (a table of a few files
                # has nothing to skip), and the MERGE rewrites the few files it touches
                # instead of writing deletion vectors for them, which takes more jobs than
                # rewriting files this small (benchmarks/README.md).
                counted = Observation()
                src = src.observe(counted, F.count(F.lit(1)).alias("rows"))
                # The copy's job fills `counted` (an eager checkpoint is an action).
                src = materialized = self._copy(src)
                src.createOrReplaceTempView(SOURCE_VIEW)
                interpreted = _interpreted_conf((observed(counted) or {}).get("rows"))
                append = self._appends(kinds, key_names, conf=interpreted)
                if append:
                    sql = INSERT_SQL[self.plan.mode](self.ref, SOURCE_VIEW, cols)
                    conf = {MATERIALIZE: "none", **interpreted}
                else:
                    sql = MERGE_SQL[self.plan.mode](self.ref, SOURCE_VIEW, key_names, cols)
                    conf = {
                        MATERIALIZE: "none",
                        MERGE_DELETION_VECTORS: "false",
                        **_small_merge_conf(src),
                        **interpreted,
                    }
            else:
                # Delta's MERGE reads its source twice (touched files, then the write):
                # computed once into a local checkpoint on disk (the first job over the
                # source, so a bad value raises here). Unlike a cache, a checkpoint is a
                # source Delta takes as it is (see MATERIALIZE).
                src = materialized = self._copy(src)
                src.createOrReplaceTempView(SOURCE_VIEW)
                key = key_names[0]
                key_range = _key_range(src, key, dict(target_cols)[key])
                append = self._appends(kinds, key_names, key_range)
                sql = (
                    INSERT_SQL[self.plan.mode](self.ref, SOURCE_VIEW, cols)
                    if append
                    else MERGE_SQL[self.plan.mode](
                        self.ref, SOURCE_VIEW, key_names, cols, key_range
                    )
                )
            with (
                commit_marker(self.spark, new_marker, "merge", target=self.name),
                # (a MERGE killed mid-write leaves its new files in the table's folder)
                session_confs(self.spark, conf),
            ):
                out = self.spark.sql(sql).collect()
            metrics = (
                [inserted_rows(self.spark, self.location, new_marker)]
                if append
                else [r.asDict() for r in out]
            )
        except Exception as e:  # noqa: BLE001 - surface raise_error text from the JVM
            raise (raised.user_error(e) or e) from None
        finally:
            self.spark.catalog.dropTempView(SOURCE_VIEW)
            if materialized is not None:
                drop_checkpoint(materialized)
        if metrics:
            m = metrics[0]
            self.result.inserted += int(m.get("num_inserted_rows") or 0)
            self.result.updated += int(m.get("num_updated_rows") or 0)
            self.result.deleted += int(m.get("num_deleted_rows") or 0)
            self.result.merges += 1
            if not any(int(m.get(k) or 0) for k in _CHANGED):
                self._record_marker(new_marker)
            return new_marker
        return marker

    def _appends(
        self,
        kinds: Observation | None,
        keys: list[str],
        key_range: tuple[str, str] | None = None,
        conf: dict[str, str] | None = None,
    ) -> bool:
        """Whether the copied source (SOURCE_VIEW) may be INSERTed instead of MERGEd: no
        key of it is in the target, so every MERGE clause but NOT MATCHED's insert would
        find nothing (each mode's MERGE matches on the keys, `<=>`, and more), and its
        INSERT is what the MERGE does to a target without those rows (`INSERT_SQL`).

        A MERGE is five Spark jobs and a join over the target; the INSERT one job. Asked
        only of a segment that grows the table (`kinds`, counted as the source was copied:
        no DELETE, no more UPDATEs than INSERTs: insert-only tables, and tails where rows
        are updated soon after their insert), where a key is seldom there yet; an
        update-mostly segment is merged without asking, its keys most likely there. Then
        one semi join over the target's key columns (inside `key_range` when given, so
        Delta's file statistics skip the rest) says for sure: which statement runs is a
        matter of cost only, never of the rows it lands. `conf`: the join's settings (the
        statement's own: interpreted where it would be)."""
        if kinds is None:
            return False
        seen = observed(kinds)
        if seen is None:
            # Never filled: Spark replaced a segment it knew to be empty (a span typed with
            # no schema, say) by an empty relation, counting node and all. Nothing to write.
            return False
        if int(seen["deletes"] or 0) or int(seen["updates"] or 0) > int(seen["inserts"] or 0):
            return False
        on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
        if key_range is not None:
            on += f" AND t.{quote(keys[0])} BETWEEN {key_range[0]} AND {key_range[1]}"
        with session_confs(self.spark, conf or {}):
            there = self.spark.sql(
                f"SELECT /*+ BROADCAST(s) */ count(*) FROM {self.ref} t "
                f"LEFT SEMI JOIN {quote(SOURCE_VIEW)} s ON {on}"
            ).collect()[0][0]
        return int(there) == 0

    def changes(
        self,
        step: Rows,
        target_cols: list[tuple[str, str]],
        *,
        quarantine: bool = True,
        kinds: Observation | None = None,
    ) -> tuple[DataFrame, list[str]] | None:
        """The segment's row changes typed, checked and collapsed to one per key (the MERGE
        source: the target's columns, `_commit_ts`, `__op`), with the key columns' names;
        None when no upstream table of the target has a schema to type rows with. Not
        `quarantine` (a read as of a TSO, `spark.as_of`): a row its table's policy
        quarantines is left out as the apply leaves it out, but nothing is written.
        `kinds`: filled by the first job over the result with how many of the segment's
        changes are INSERTs, UPDATEs and DELETEs (`inserts`, `updates`, `deletes`)."""
        typed = self.typed_segment(step, target_cols)
        if typed is None:
            return None
        key_names = [next(n for n, _ in target_cols if n.lower() == k.lower()) for k in step.keys]
        typed = self._handle_bad_values(typed, step, record=quarantine)
        if kinds is not None:
            op = F.col("op")
            typed = typed.observe(
                kinds,
                F.count(F.when(op == OP_INSERT, 1)).alias("inserts"),
                F.count(F.when(op == OP_UPDATE, 1)).alias("updates"),
                F.count(F.when(op == OP_DELETE, 1)).alias("deletes"),
            )
        return self.collapse(typed, key_names, [n for n, _ in target_cols]), key_names

    def _copy(self, src: DataFrame) -> DataFrame:
        """`src` computed into a local checkpoint on disk; interpreted when the source never
        staged more than SMALL_SOURCE_ROWS row changes (`_interpreted_conf`)."""
        with session_confs(self.spark, _interpreted_conf(self.source_rows_staged())):
            return local_copy(src)

    def source_rows_staged(self) -> int:
        """How many row changes of the source were ever staged, all its tables (the staging
        tallies). A job over a segment reads the staged window of the whole source (or its
        shared copy) and keeps the segment's tables' rows: this bounds what it reads,
        whatever the target's share of it."""
        tables = self.state.staging.tally(self.source.name).tables
        return sum(rows for rows, _ in tables.values())

    def _record_marker(self, marker: Marker) -> None:
        """Commit `marker` when the statement changed nothing: Delta makes no commit for a
        MERGE or INSERT without rows, and the target would otherwise keep its old marker
        (what `status` and readers see) though it is up to date."""
        if target_marker(self.spark, self.location) == marker:
            return
        with commit_marker(self.spark, marker, "marker", target=self.name):
            self.spark.sql(
                f"ALTER TABLE {self.ref} SET TBLPROPERTIES ('ticdc_sync.applied_ts' = "
                f"{sql_string(str(marker.applied_ts))})"
            )

    def _handle_bad_values(self, typed: DataFrame, step: Rows, record: bool = True) -> DataFrame:
        policy = self.plan.on_bad_message
        where = F.concat(
            F.lit("ticdc-sync: "),
            F.col("topic"),
            F.lit("/"),
            F.col("partition").cast("string"),
            F.lit("/"),
            F.col("offset").cast("string"),
            F.lit(" table "),
            F.col("db"),
            F.lit("."),
            F.col("tbl"),
            F.lit(" commit_ts "),
            F.col("commit_ts").cast("string"),
            F.lit(": "),
            F.col("__err"),
        )
        if policy is BadMessagePolicy.FAIL:
            # raise_error inside a column the MERGE needs: the job fails on the first bad
            # value without an extra pass over the data.
            return typed.withColumn(
                "commit_ts",
                F.when(F.col("__err").isNotNull(), F.raise_error(where)).otherwise(
                    F.col("commit_ts")
                ),
            )
        if not record:
            return typed.where(F.col("__err").isNull())
        bad = typed.where(F.col("__err").isNotNull())
        q = bad.select(
            F.lit(self.source.name).alias("source"),
            "topic",
            "partition",
            "offset",
            "idx",
            "db",
            "tbl",
            "commit_ts",
            F.col("__err").alias("reason"),
            F.lit(None).cast("binary").alias("raw_key"),
            F.encode(F.col("after_text"), "UTF-8").alias("raw_value"),
        )
        n = self.state.quarantine.append_new(q, self.name)
        if n:
            self.result.quarantined += n
            self.out(
                f"  {self.name}: quarantined {n} row change(s) with a value that does not fit "
                "or a column the schema lacks"
            )
        return typed.where(F.col("__err").isNull())

    def collapse(self, typed: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
        """One row per key: its last change (commit_ts, then DELETE before INSERT, then position);
        for a soft_delete or history target, the source its mode's MERGE takes."""
        keys_equal = F.lit(True)
        for k in keys:
            keys_equal = keys_equal & F.col(quote(f"v_{k}")).eqNullSafe(F.col(quote(f"b_{k}")))
        pos = ["commit_ts", "partition", "offset", "idx"]
        types = {f.name: f.dataType for f in typed.schema.fields}
        upsert = F.struct(
            *[F.col(quote(f"v_{c}")).alias(c) for c in columns],
            F.lit("U").alias(OP_COL),
            F.lit(1).alias("__rank"),
        )
        delete = F.struct(
            *[
                (F.col(quote(f"b_{c}")) if c in keys else F.lit(None).cast(types[f"v_{c}"])).alias(
                    c
                )
                for c in columns
            ],
            F.lit("D").alias(OP_COL),
            F.lit(0).alias("__rank"),
        )
        # An UPDATE that moves its key deletes the old key (codec facts 0.4).
        moved = (F.col("op") == OP_DELETE) | (
            (F.col("op") != OP_DELETE) & F.col("has_before") & ~keys_equal
        )
        # One or two changes per event from ONE pass over the typed rows (a union of an
        # upsert branch and a delete branch would read and type the staged rows twice).
        changes = F.array_compact(
            F.array(F.when(F.col("op") != OP_DELETE, upsert), F.when(moved, delete))
        )
        # The change stays one struct column until the end: a target column may be called
        # `offset` or `partition` too.
        both = typed.select(*pos, F.explode(changes).alias("__c"))
        if self.plan.mode is not Mode.MIRROR:
            # Marked deletes or every version, not the last change alone (`mode_rows`).
            return mode_rows.source(self.plan.mode, both, keys, columns)
        change = F.col("__c")
        w = Window.partitionBy(*[change[k] for k in keys]).orderBy(
            F.col("commit_ts").desc(),
            change["__rank"].desc(),
            F.col("partition").desc(),
            F.col("offset").desc(),
            F.col("idx").desc(),
        )
        last = both.withColumn("__n", F.row_number().over(w)).where(F.col("__n") == 1)
        return last.select(
            *[change[c].alias(c) for c in columns],
            F.col("commit_ts").alias(COMMIT_TS),
            change[OP_COL].alias(OP_COL),
        )


# Delta copies a MERGE source that is not a plain Delta scan to local disk before the
# MERGE, so that its two passes see the same rows. Ours already is such a copy (a local
# checkpoint): a second one would read and write every row once more. (Delta refuses a
# *cached* source when it does not copy it, hence a checkpoint and not `persist`.)
MATERIALIZE = "spark.databricks.delta.merge.materializeSource"
# Whether a MERGE marks the rows it removes with deletion vectors (where the table has
# them) or rewrites the files they are in.
MERGE_DELETION_VECTORS = "spark.databricks.delta.merge.deletionVectors.persistent"
ADAPTIVE = "spark.sql.adaptive.enabled"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Up to this size a target counts as small for `TargetWriter.merge`: below it, rewriting a
# touched file measured no slower than writing its deletion vector (benchmarks/README.md).
SMALL_TARGET = 16 * 1024 * 1024


def _small_merge_conf(src: DataFrame) -> dict[str, str]:
    """Session settings for the MERGE of a small target from its copied source `src`.

    Without adaptive execution: under it every shuffle and broadcast of the MERGE's
    queries (Delta's own log replay among them) runs as a job of its own with a
    re-optimization after it, which for a target of a few files is most of the MERGE's
    cost (benchmarks/README.md). Its shuffles then get as many partitions as the copied
    source has: that copy was computed adaptively, so it has one partition when it is
    small and more for a large batch, which the MERGE's join of it then keeps."""
    # The copy's partitions are known without a job (its blocks are in place); over Spark
    # Connect they are not known: the MERGE keeps the session's settings.
    parts = num_partitions(src)
    if parts is None:
        return {}
    return {ADAPTIVE: "false", SHUFFLE_PARTITIONS: str(max(1, parts))}


# Up to this many collapsed changes, a small target's MERGE runs without code generation
# (`_interpreted_conf`).
SMALL_SOURCE_ROWS = 10_000


def _interpreted_conf(source_rows: int | None) -> dict[str, str]:
    """Session settings that run a small target's MERGE (or the first append to a target,
    or the copy of a MERGE's source) interpreted when its source holds at most
    SMALL_SOURCE_ROWS changes (None: unknown).

    Every query Spark runs compiles its generated Java code first (Janino), and the MERGE
    of one target is a handful of queries (Delta's log replay, finding the touched files,
    the write) whose code depends on the target's columns, so compiling is paid again for
    each target and each new process. For a few thousand rows that costs more than the
    rows do: interpreted, the 50-tables batch row's cost per added target falls by a
    third. For a source of 150k rows it is slower (benchmarks/README.md), hence the
    bound; the target's own size is bounded by SMALL_TARGET already. Same results either
    way: interpreted is Spark's reference execution of the same plan."""
    if source_rows is None or source_rows > SMALL_SOURCE_ROWS:
        return {}
    return dict(INTERPRETED)


# MERGE / INSERT metrics that are non-zero when the statement changed the table.
_CHANGED = ("num_affected_rows", "num_inserted_rows", "num_updated_rows", "num_deleted_rows")


def inserted_rows(spark: SparkSession, location: str, marker: Marker) -> dict[str, int]:
    """The row count of the commit just made by an INSERT carrying `marker` (its Delta
    operation metrics); 0 when the newest commit is not that one: Delta makes no commit
    for an INSERT of no rows. A local table's commit file is read as it is (a job per
    append otherwise, for every target of a first run)."""
    info = newest_commit_info(location)
    if info is None:
        last = spark.sql(f"DESCRIBE HISTORY {table_ref(location)} LIMIT 1").collect()[0]
        info = {"userMetadata": last["userMetadata"], "operationMetrics": last["operationMetrics"]}
    if Marker.from_user_metadata(info.get("userMetadata")) != marker:
        return {"num_inserted_rows": 0}
    metrics = info.get("operationMetrics") or {}
    return {"num_inserted_rows": int(metrics.get("numOutputRows") or 0)}


_RANGE_TYPES = ("tinyint", "smallint", "int", "bigint", "string")


def _key_range(src: DataFrame, key: str, key_type: str) -> tuple[str, str] | None:
    """The (lo, hi) SQL literals of the MERGE source's first key, for integer, decimal and
    string keys (auto-increment and time-ordered ids are where file skipping pays; else
    None). One job over the materialized source."""
    ranged = key_type in _RANGE_TYPES or key_type.startswith("decimal")
    k = F.col(quote(key)) if ranged else F.lit(None)
    r = src.agg(F.min(k).alias("lo"), F.max(k).alias("hi")).collect()[0]
    if r["lo"] is None:
        return None
    if key_type == "string":
        return sql_string(r["lo"]), sql_string(r["hi"])
    if key_type.startswith("decimal"):
        return f"CAST('{r['lo']:f}' AS {key_type})", f"CAST('{r['hi']:f}' AS {key_type})"
    return str(int(r["lo"])), str(int(r["hi"]))
