"""Apply the DDL events of one commit_ts to one target: policy check, schema history, Delta commits.

Every Delta statement a DDL needs is its own commit carrying the target's marker with the
statement's index, so a run killed half-way through a multi-clause ALTER resumes at the
next statement. Policies (`apply`/`skip`/`fail`/`rebuild`) are checked for every change
before anything is committed; a refused change blocks this target only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ticdc_sync import ddl as ddl_mod
from ticdc_sync.model import Action, DdlKind
from ticdc_sync.spark.state import commit_marker
from ticdc_sync.sqlgen import COMMIT_TS, quote, sql_string
from ticdc_sync.upstream import TableSchema
from ticdc_sync.window import ApplyDdl, Marker


@dataclass
class Part:
    """One Delta commit of a DDL: SQL text, or a callable for rewrites."""

    describe: str
    sql: str | None = None
    run: Callable[[], None] | None = None
    tolerate: tuple[str, ...] = ()  # error fragments meaning "already done" (shards, resumes)


def statement_table(stmt, fallback: tuple[str, str]) -> tuple[str, str]:
    schema = getattr(stmt, "schema", None)
    if isinstance(schema, TableSchema):
        return schema.db, schema.table
    db, table = getattr(stmt, "db", None), getattr(stmt, "table", None)
    if db and table:
        return db, table
    return fallback


def apply_ddl_group(applier, marker: Marker, step: ApplyDdl) -> Marker:
    from ticdc_sync.spark.apply import blocked

    ts = step.commit_ts
    parts: list[Part] = []
    new_versions: list[tuple[TableSchema, str]] = []
    described: list[str] = []
    for event in step.ddls:
        statements = ddl_mod.parse_ddl(event.sql, event.db or None, event.hint)
        for stmt in statements:
            db, tbl = statement_table(stmt, (event.db, event.tbl))
            base = applier.schemas.at(db, tbl, ts - 1)
            new_schema, changes = ddl_mod.apply_statement(base, stmt)
            if event.table_changes and type(stmt).__name__ == "Unknown":
                new_schema, changes = _from_debezium(event, base)
            for change in changes:
                kind: DdlKind = change.kind
                action = applier.project.ddl_policy(applier.entry, kind)
                name = type(change).__name__
                setting = f"{kind.value}: skip"
                if change.effect == "unsupported":
                    if action is Action.SKIP:
                        described.append(f"skipped (unsupported): {change.describe()}")
                        continue
                    raise blocked(
                        applier.target,
                        event.sql,
                        ts,
                        kind.value,
                        setting,
                        f"{change.describe()} (unsupported: no row events come with it)",
                    )
                if action is Action.FAIL:
                    raise blocked(
                        applier.target,
                        event.sql,
                        ts,
                        kind.value,
                        f"{kind.value}: apply",
                        f"{change.describe()} (policy {kind.value}: fail)",
                    )
                if action is Action.SKIP:
                    described.append(f"skipped by policy: {change.describe()}")
                    continue
                if name == "ChangeColumnType" and getattr(change, "change", "") == "narrow":
                    if action is not Action.REBUILD:
                        raise blocked(
                            applier.target,
                            event.sql,
                            ts,
                            kind.value,
                            f"{kind.value}: rebuild",
                            f"{change.describe()} narrows the Delta type",
                        )
                    parts.append(_rebuild_part(applier, change))
                    described.append(change.describe())
                    continue
                parts.extend(_parts_for(applier, change, base))
                described.append(change.describe())
            if new_schema is not None:
                new_versions.append((new_schema, event.sql))
    # History first: a resumed run recomputes the same parts from the version before `ts`.
    for schema, sql in new_versions:
        applier.state.record_schema(applier.source.name, schema, ts, sql)
        applier.schemas.add(schema, ts)
    n = len(parts)
    done = marker.parts_done(ts)
    if n == 0:
        parts = [
            Part(
                "record DDL",
                sql=(
                    f"ALTER TABLE {applier.ref} SET TBLPROPERTIES "
                    f"('ticdc_sync.last_ddl_ts' = {sql_string(str(ts))})"
                ),
            )
        ]
        n = 1
    for k in range(done, n):
        last = k == n - 1
        m = Marker(
            applied_ts=max(marker.applied_ts, ts if last else ts - 1),
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


def _execute(applier, part: Part, m: Marker) -> None:
    spark = applier.spark
    with commit_marker(spark, m):
        try:
            if part.sql is not None:
                spark.sql(part.sql)
            elif part.run is not None:
                part.run()
        except Exception as e:  # noqa: BLE001 - tolerated "already done" cases only
            if not any(t in str(e) for t in part.tolerate):
                raise
            # Already applied (a shard's twin DDL, or a resumed run): still commit the marker.
            spark.sql(
                f"ALTER TABLE {applier.ref} SET TBLPROPERTIES "
                f"('ticdc_sync.last_ddl_ts' = {sql_string(str(m.ddl_ts))})"
            )


def _parts_for(applier, change, base: TableSchema | None) -> list[Part]:
    name = type(change).__name__
    ref = applier.ref
    if name == "CreateTarget":
        from ticdc_sync.spark.state import table_exists

        if not table_exists(applier.spark, applier.location):
            return [Part(change.describe(), run=lambda: applier._create(change.schema))]
        if base is not None:
            out = []
            for c in ddl_mod.diff_schemas(base, change.schema):
                out.extend(_parts_for(applier, c, base))
            return out
        return [Part(change.describe(), run=lambda: applier._create(change.schema, replace=True))]
    if name == "DropTarget":
        return [
            Part(change.describe(), sql=f"DELETE FROM {ref}"),
            Part(
                "mark dropped",
                sql=f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.dropped' = 'true')",
            ),
        ]
    if name == "RenameTarget":
        return []  # the route follows the new upstream name; the Delta table keeps its place
    if name in ("ChangeKey", "NoOp", "SetDefault"):
        return []
    statements = ddl_mod.delta_sql(change, ref)
    tolerate: tuple[str, ...] = ()
    if name == "AddColumn":
        tolerate = ("already exists", "FIELDS_ALREADY_EXISTS")
    elif name == "DropColumn":
        tolerate = ("does not exist", "cannot be resolved", "FIELD_NOT_FOUND", "Cannot drop")
    return [Part(change.describe(), sql=s, tolerate=tolerate) for s in statements]


def _rebuild_part(applier, change) -> Part:
    """Narrowing type change, opted in with `narrow_column: rebuild`: rewrite with a cast."""

    def run() -> None:
        from pyspark.sql import functions as F

        spark = applier.spark
        df = spark.read.format("delta").load(applier.location)
        cols = [
            F.col(quote(c)).cast(change.new_type).alias(c) if c == change.name else F.col(quote(c))
            for c in df.columns
        ]
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


__all__ = ["apply_ddl_group", "COMMIT_TS"]
