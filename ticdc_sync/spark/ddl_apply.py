"""Apply the DDL events of one commit_ts to one target: policy check, schema history, Delta commits.

Every Delta statement a DDL needs is its own commit carrying the target's marker with the
statement's index, so a run killed half-way through a multi-clause ALTER resumes at the
next statement. Policies (`apply`/`skip`/`fail`/`rebuild`) are checked for every change
before anything is committed; a refused change blocks this target only, and the error
carries the pending DDL (classified, with its Delta change) for `target/state.json`.

RENAME TABLE: TiCDC keys the DDL under the new name (codec facts 0.5), so the target of the
new name handles it. When the route gives the new name another target (a `{table}`
template), the new target is created from the renamed schema, the old target is first
brought up to just before the rename, its rows are copied over, then removed from the old
target (which is marked `ticdc_sync.renamed_to`): three commits on the new target, each
with its marker, each safe to repeat. Must not touch targets other than the two named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ticdc_sync import ddl as ddl_mod
from ticdc_sync.ddl.statements import AlterTable, CreateTable, RenameTableClause, RenameTables
from ticdc_sync.errors import BlockedError
from ticdc_sync.locations import target_location
from ticdc_sync.model import Action, DdlKind
from ticdc_sync.spark.conf import commit_marker
from ticdc_sync.spark.delta_log import has_data_files, table_exists, target_marker
from ticdc_sync.sqlgen import COMMIT_TS, quote, sql_string, table_ref
from ticdc_sync.upstream import TableSchema
from ticdc_sync.window import ApplyDdl, DdlEvent, Marker

# A dropped (or renamed-away) upstream table is recorded in the schema history as its last
# schema with this comment: rows typed after the drop still find their columns (there are
# none, but a MERGE segment past the drop asks), and a later CREATE TABLE sees no table.
DROPPED = "\x00ticdc_sync:dropped"


@dataclass
class Part:
    """One Delta commit of a DDL: SQL text, or a callable that commits with the marker it gets."""

    describe: str
    sql: str | None = None
    run: Callable[[Marker], None] | None = None
    tolerate: tuple[str, ...] = ()  # error fragments meaning "already done" (shards, resumes)


def is_dropped(schema: TableSchema | None) -> bool:
    return schema is not None and schema.comment == DROPPED


def tombstone(schema: TableSchema) -> TableSchema:
    return schema.with_(comment=DROPPED)


def _rename_source(stmt, db: str, tbl: str) -> tuple[str, str] | None:
    """The old name of the table a RENAME event is keyed under (its new name), if it is one."""
    if isinstance(stmt, RenameTables):
        for (od, ot), (nd, nt) in stmt.pairs:
            if (nd.lower(), nt.lower()) == (db.lower(), tbl.lower()):
                return od, ot
        return None
    if isinstance(stmt, AlterTable):
        for c in stmt.clauses:
            if isinstance(c, RenameTableClause) and (c.new_db.lower(), c.new_table.lower()) == (
                db.lower(),
                tbl.lower(),
            ):
                return stmt.db, stmt.table
    return None


def creates_target(event: DdlEvent) -> bool:
    """Whether a DDL brings its (new) table into being: CREATE TABLE, or a RENAME onto it.

    The engine waits for such a DDL instead of inferring the target from row metadata.
    """
    head = event.sql.lstrip().upper()
    if head.startswith("CREATE"):
        return True
    if "RENAME" not in head:
        return False
    try:
        stmts = ddl_mod.parse_ddl(event.sql, event.db or None, event.hint)
    except Exception:  # noqa: BLE001 - unreadable DDL is reported when it is applied
        return False
    return any(_rename_source(s, event.db, event.tbl) is not None for s in stmts)


def statement_table(stmt, fallback: tuple[str, str]) -> tuple[str, str]:
    schema = getattr(stmt, "schema", None)
    if isinstance(schema, TableSchema):
        return schema.db, schema.table
    db, table = getattr(stmt, "db", None), getattr(stmt, "table", None)
    if db and table:
        return db, table
    return fallback


def _base(applier, db: str, tbl: str, ts: int) -> TableSchema | None:
    s = applier.schemas.at(db, tbl, ts - 1)
    return None if is_dropped(s) else s


def _blocked(applier, event: DdlEvent, ts: int, change, setting: str, reason: str) -> BlockedError:
    from ticdc_sync.spark.apply import blocked

    err = blocked(applier.target, event.sql, ts, change.kind.value, setting, reason)
    cls = "destructive" if change.effect in ("destructive", "none") else change.effect
    # `target/state.json` entry read by `plan` (plan.PlanState).
    err.pending = [  # type: ignore[attr-defined]
        {
            "upstream": f"{event.db}.{event.tbl}",
            "target": applier.target,
            "kind": change.kind.value,
            "sql": event.sql.strip(),
            "commit_ts": ts,
            "classification": cls,
            "delta": change.describe(),
            "reason": f"{reason} (set `{setting}` to let it through)",
        }
    ]
    return err


# Changes that leave every existing column as it is: rows on both sides of such a DDL can
# share one MERGE (window.fuse_additive). SetDefault affects future upstream inserts only.
_ADDITIVE = ("AddColumn", "NoOp", "SetDefault")


def is_additive(applier, step: ApplyDdl) -> bool:
    """Whether every change of the DDL group adds a column or changes nothing in Delta, all
    under the `apply` policy, keeping the merge key (see window.fuse_additive)."""
    ts = step.commit_ts
    current: dict[tuple[str, str], TableSchema | None] = {}
    for event in step.ddls:
        try:
            statements = ddl_mod.parse_ddl(event.sql, event.db or None, event.hint)
        except Exception:  # noqa: BLE001 - reported when the DDL is applied on its own
            return False
        for stmt in statements:
            if isinstance(stmt, CreateTable) or _rename_source(stmt, event.db, event.tbl):
                return False
            if event.table_changes and type(stmt).__name__ == "Unknown":
                return False
            db, tbl = statement_table(stmt, (event.db, event.tbl))
            key = (db.lower(), tbl.lower())
            base = current[key] if key in current else _base(applier, db, tbl, ts)
            if base is None:
                return False
            try:
                new_schema, changes = ddl_mod.apply_statement(base, stmt)
            except Exception:  # noqa: BLE001 - as above
                return False
            if new_schema is None or new_schema.handle_key() != base.handle_key():
                return False
            for change in changes:
                name = type(change).__name__
                if name == "ChangeColumnType" and change.change == "same":
                    continue
                if name not in _ADDITIVE or change.effect == "unsupported":
                    return False
                if applier.project.ddl_policy(applier.entry, change.kind) is not Action.APPLY:
                    return False
            current[key] = new_schema
    return True


def apply_ddl_group(applier, marker: Marker, step: ApplyDdl) -> Marker:
    ts = step.commit_ts
    parts: list[Part] = []
    new_versions: list[tuple[TableSchema, str]] = []
    described: list[str] = []
    # Schemas changed earlier in this group: DDLs sharing a commit_ts (an `es`-ordered source
    # puts CREATE and the next ALTER in the same second) see each other in order.
    current: dict[tuple[str, str], TableSchema | None] = {}
    for event in step.ddls:
        statements = ddl_mod.parse_ddl(event.sql, event.db or None, event.hint)
        for stmt in statements:
            old_name = _rename_source(stmt, event.db, event.tbl)
            db, tbl = old_name or statement_table(stmt, (event.db, event.tbl))
            key = (db.lower(), tbl.lower())
            base = current[key] if key in current else _base(applier, db, tbl, ts)
            if isinstance(stmt, CreateTable) and base is not None:
                # A seed (schema/*.sql) or a table whose DROP we never saw: follow the CREATE.
                new_schema = stmt.schema
                changes = ddl_mod.diff_schemas(base, new_schema)
            elif event.table_changes and type(stmt).__name__ == "Unknown":
                new_schema, changes = _from_debezium(event, base)
            else:
                new_schema, changes = ddl_mod.apply_statement(base, stmt)
            for change in changes:
                kind: DdlKind = change.kind
                action = applier.project.ddl_policy(applier.entry, kind)
                name = type(change).__name__
                narrow = name == "ChangeColumnType" and change.change == "narrow"
                if name == "ChangeColumnType" and change.change == "same":
                    described.append(change.describe() + " (no Delta change)")
                    continue
                if change.effect == "unsupported":
                    if action is Action.SKIP:
                        described.append(f"skipped (unsupported): {change.describe()}")
                        continue
                    raise _blocked(
                        applier,
                        event,
                        ts,
                        change,
                        f"{kind.value}: skip",
                        f"{change.describe()} (no row events come with it: the target "
                        "cannot follow; `skip` ignores it)",
                    )
                if action is Action.SKIP:
                    described.append(f"skipped by policy: {change.describe()}")
                    continue
                if narrow and action is not Action.REBUILD:
                    raise _blocked(
                        applier,
                        event,
                        ts,
                        change,
                        f"{kind.value}: rebuild",
                        f"{change.describe()} narrows the Delta type "
                        f"(policy {kind.value}: {action.value}; `skip` keeps the wider type)",
                    )
                if action is Action.FAIL:
                    raise _blocked(
                        applier,
                        event,
                        ts,
                        change,
                        f"{kind.value}: apply",
                        f"{change.describe()} (policy {kind.value}: fail)",
                    )
                if narrow:
                    parts.append(_rebuild_part(applier, change))
                elif name == "RenameTarget" and old_name is not None:
                    parts.extend(_rename_parts(applier, event, ts, old_name, new_schema))
                else:
                    parts.extend(_parts_for(applier, change, base))
                described.append(change.describe())
            current[key] = new_schema
            if old_name is not None:
                current[(event.db.lower(), event.tbl.lower())] = new_schema
            if new_schema is not None:
                current[(new_schema.db.lower(), new_schema.table.lower())] = new_schema
                new_versions.append((new_schema, event.sql))
            elif base is not None:
                new_versions.append((tombstone(base), event.sql))
            if old_name is not None and base is not None:
                new_versions.append((tombstone(base), event.sql))
    # History first: a resumed run recomputes the same parts from the version before `ts`.
    for schema, sql in new_versions:
        applier.state.history.record_schema(applier.source.name, schema, ts, sql)
        applier.schemas.add(schema, ts)
    n = len(parts)
    done = marker.parts_done(ts)
    if n == 0:
        parts = [Part("record DDL", sql=_last_ddl_sql(applier.ref, ts))]
        n = 1
    for k in range(done, n):
        last = k == n - 1
        # A DDL moved ahead of its rows (step.ahead) must not claim them as applied.
        applied = marker.applied_ts if step.ahead else ts if last else ts - 1
        m = Marker(
            applied_ts=max(marker.applied_ts, applied),
            ddl_ts=ts,
            ddl_part=k,
            ddl_parts=n,
        )
        _execute(applier, parts[k], m)
        marker = m
    applier.result.ddl_applied.extend(described or [f"recorded: {step.ddls[0].sql.strip()}"])
    for d in described:
        applier.out(f"  {applier.target}: DDL at {ts}: {d}")
    return marker


def _last_ddl_sql(ref: str, ts: int) -> str:
    return f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.last_ddl_ts' = {sql_string(str(ts))})"


def _execute(applier, part: Part, m: Marker) -> None:
    spark = applier.spark
    if part.run is not None:
        part.run(m)
        return
    with commit_marker(spark, m):
        try:
            assert part.sql is not None
            spark.sql(part.sql)
        except Exception as e:  # noqa: BLE001 - tolerated "already done" cases only
            if not any(t in str(e) for t in part.tolerate):
                raise
            # Already applied (a shard's twin DDL, or a resumed run): still commit the marker.
            spark.sql(_last_ddl_sql(applier.ref, m.ddl_ts))


def _create_part(applier, schema: TableSchema, describe: str) -> Part:
    def run(m: Marker) -> None:
        with commit_marker(applier.spark, m):
            applier._create(schema, replace=table_exists(applier.spark, applier.location))

    return Part(describe, run=run)


def _parts_for(applier, change, base: TableSchema | None) -> list[Part]:
    name = type(change).__name__
    ref = applier.ref
    if name == "CreateTarget":
        if not table_exists(applier.spark, applier.location):
            return [_create_part(applier, change.schema, change.describe())]
        if base is not None:
            out = []
            for c in ddl_mod.diff_schemas(base, change.schema):
                out.extend(_parts_for(applier, c, base))
            return out
        # The table was dropped upstream (its target kept, emptied): start it afresh.
        return [_create_part(applier, change.schema, change.describe())]
    if name == "DropTarget":
        # Rows go, the Delta table and its history stay (time travel; crash-safe).
        return [
            Part(change.describe(), sql=f"DELETE FROM {ref}"),
            Part(
                "mark dropped",
                sql=f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.dropped' = 'true')",
            ),
        ]
    if name in ("RenameTarget", "ChangeKey", "NoOp", "SetDefault"):
        # RenameTarget keyed under the old name / onto the same target: routing only.
        return []
    statements = ddl_mod.delta_sql(change, ref)
    tolerate: tuple[str, ...] = ()
    if name == "AddColumn":
        tolerate = ("already exists", "FIELDS_ALREADY_EXISTS")
    elif name == "DropColumn":
        tolerate = ("does not exist", "cannot be resolved", "FIELD_NOT_FOUND", "Cannot drop")
    parts = [Part(change.describe(), sql=s, tolerate=tolerate) for s in statements]
    if name == "AddColumn" and change.backfill_sql is not None:
        parts[-1] = _backfill_part(applier, statements[-1], change.describe())
    return parts


def _backfill_part(applier, update_sql: str, describe: str) -> Part:
    """The UPDATE that backfills an added column, skipped on a target without data files
    (a DDL moved ahead of the first rows, window.fuse_additive). A skipped part makes no
    commit: the next commit carries the marker, and until then a resumed run re-checks."""

    def run(m: Marker) -> None:
        if not has_data_files(applier.spark, applier.location):
            return
        with commit_marker(applier.spark, m):
            applier.spark.sql(update_sql)

    return Part(describe, run=run)


def _rename_parts(
    applier, event: DdlEvent, ts: int, old: tuple[str, str], new_schema: TableSchema | None
) -> list[Part]:
    """RENAME onto this target's upstream: carry the old target's rows over (see module doc).

    Always three parts, so a resumed run counts them the same way whatever state it finds.
    """
    spark = applier.spark
    old_entry = applier.project.route(applier.source.name, old[0], old[1])
    old_name = old_entry.target_name(old[0], old[1]) if old_entry is not None else None
    if old_name == applier.target or new_schema is None:
        return []  # same target (fixed name, shards): only the upstream name changes
    old_loc = target_location(applier.state.warehouse, old_name) if old_name else None
    old_ref = table_ref(old_loc) if old_loc else None

    def create(m: Marker) -> None:
        if old_entry is not None and old_name is not None:
            _catch_up(applier, old_entry, old_name, old, ts - 1)
        with commit_marker(spark, m):
            applier._create(new_schema, replace=table_exists(spark, applier.location))

    def copy(m: Marker) -> None:
        with commit_marker(spark, m):
            if old_loc is None or not table_exists(spark, old_loc):
                spark.sql(_last_ddl_sql(applier.ref, ts))
                return
            mine = {f.name for f in spark.read.format("delta").load(applier.location).schema}
            theirs = spark.read.format("delta").load(old_loc).schema.fieldNames()
            cols = ", ".join(quote(c) for c in theirs if c in mine)
            spark.sql(
                f"INSERT INTO {applier.ref} ({cols}) SELECT {cols} FROM {old_ref} "
                f"WHERE {quote(COMMIT_TS)} < {ts}"
            )

    def clean(m: Marker) -> None:
        if old_loc is not None and table_exists(spark, old_loc):
            # Commits on the old target keep the old target's own marker.
            with commit_marker(spark, target_marker(spark, old_loc) or Marker()):
                spark.sql(f"DELETE FROM {old_ref} WHERE {quote(COMMIT_TS)} < {ts}")
                spark.sql(
                    f"ALTER TABLE {old_ref} SET TBLPROPERTIES "
                    f"('ticdc_sync.renamed_to' = {sql_string(applier.target)})"
                )
        with commit_marker(spark, m):
            spark.sql(
                f"ALTER TABLE {applier.ref} SET TBLPROPERTIES "
                f"('ticdc_sync.renamed_from' = {sql_string(old_name or '')})"
            )

    what = f"{old[0]}.{old[1]} -> {event.db}.{event.tbl}"
    return [
        Part(f"create target for renamed {what}", run=create),
        Part(f"copy rows of target {old_name}", run=copy),
        Part(f"empty target {old_name} (renamed to {applier.target})", run=clean),
    ]


def _catch_up(applier, entry, name: str, upstream: tuple[str, str], upto: int) -> None:
    """Bring the old target of a RENAME up to just before it (it may sort after this one)."""
    from ticdc_sync.spark.apply import TargetApplier
    from ticdc_sync.window import dedupe_ddl

    loc = target_location(applier.state.warehouse, name)
    if table_exists(applier.spark, loc):
        m = target_marker(applier.spark, loc)
        if m is not None and m.applied_ts >= upto:
            return
    src = applier.source.name
    ups = {upstream}
    for r in applier.state.staging.upstream_tables(src):
        db, tbl = r["db"] or "", r["tbl"] or ""
        e = applier.project.route(src, db, tbl) if tbl else None
        if e is not None and e.target_name(db, tbl) == name:
            ups.add((db, tbl))
    other = TargetApplier(
        applier.spark,
        applier.state,
        applier.project,
        applier.source,
        entry,
        name,
        sorted(ups),
        applier.schemas,
        applier.out,
    )
    other.run(upto, dedupe_ddl(applier.state.staging.ddl_events(src, upto)))


def _rebuild_part(applier, change) -> Part:
    """Narrowing type change, opted in with `narrow_column: rebuild`: rewrite with a cast."""

    def run(m: Marker) -> None:
        from pyspark.sql import functions as F

        spark = applier.spark
        df = spark.read.format("delta").load(applier.location)
        cols = [
            F.col(quote(c)).cast(change.new_type).alias(c)
            if c.lower() == change.name.lower()
            else F.col(quote(c))
            for c in df.columns
        ]
        with commit_marker(spark, m):
            (
                df.select(*cols)
                .write.format("delta")
                .mode("overwrite")
                .option("overwriteSchema", "true")
                .save(applier.location)
            )

    return Part(change.describe(), run=run)


def _from_debezium(event, base: TableSchema | None):
    """Debezium DDL text we cannot parse: diff its post-DDL `tableChanges` schema instead."""
    import json

    changes_json = json.loads(event.table_changes or "[]")
    for tc in changes_json:
        table = tc.get("table")
        if table is None:
            continue
        new = ddl_mod.schema_from_debezium_table(event.db, event.tbl, table)
        if base is None:
            return new, [ddl_mod.CreateTarget(new)]
        return new, ddl_mod.diff_schemas(base, new)
    return base, []


__all__ = ["apply_ddl_group", "creates_target", "is_additive", "is_dropped", "COMMIT_TS"]
