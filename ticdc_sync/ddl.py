"""Upstream DDL: schema files, DDL messages, schema evolution and the Delta changes they cause.

Public API (the rest of the project imports from here only):
- `parse_schema_sql` reads `schema/*.sql` (CREATE TABLE / USE) into `TableSchema`s.
- `parse_ddl` turns one upstream DDL message into typed statements (`ddl_parse`).
- `apply_statement` / `diff_schemas` / `delta_sql` compute the new upstream schema, the
  Delta changes and their Spark SQL (`ddl_delta`).
- Protocol classification: Open Protocol ActionType codes and Canal `type` (codec facts 0.3, 1.4).
- Debezium `tableChanges[].table` to `TableSchema` (codec facts 3.3).

Pure Python; never imports pyspark; sqlglot only inside `ddl_lex`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ticdc_sync.datatypes import delta_type, normalize_base
from ticdc_sync.ddl_delta import (
    AddColumn,
    Catalog,
    ChangeColumnType,
    ChangeKey,
    CreateTarget,
    DeltaChange,
    DropColumn,
    DropTarget,
    MoveColumn,
    NoOp,
    RenameColumn,
    RenameTarget,
    SetDefault,
    TruncateTarget,
    Unsupported,
    _add_column_change,
    apply_statement,
    backfill_sql,
    change_column_type,
    delta_sql,
)
from ticdc_sync.ddl_lex import (
    ParseError,
    Parser,
    TypeSpec,
    make_column,
    parse_create_table,
    split_statements,
)
from ticdc_sync.ddl_parse import (
    AlterDatabase,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    CreateTableLike,
    DdlStatement,
    DropDatabase,
    DropIndex,
    DropTable,
    Position,
    RecoverTable,
    RenameTables,
    SchemaObject,
    TruncateTable,
    Unknown,
    parse_statements,
)
from ticdc_sync.errors import DdlError
from ticdc_sync.model import DdlKind
from ticdc_sync.upstream import Column, TableSchema

__all__ = [
    "AddColumn",
    "Catalog",
    "ChangeColumnType",
    "ChangeKey",
    "CreateTarget",
    "DeltaChange",
    "DropColumn",
    "DropTarget",
    "MoveColumn",
    "NoOp",
    "RenameColumn",
    "RenameTarget",
    "SetDefault",
    "TruncateTarget",
    "Unsupported",
    "apply_statement",
    "backfill_sql",
    "delta_sql",
    "parse_ddl",
    "parse_schema_sql",
]

_IGNORED_IN_SCHEMA_FILES = ("SET", "DROP", "CREATE DATABASE", "CREATE SCHEMA", "LOCK", "UNLOCK")


def parse_schema_sql(text: str, default_db: str | None, file: str) -> list[TableSchema]:
    """Parse a file of CREATE TABLE statements (and `USE db;`) into schemas, in file order.

    A table's database is its qualifier if written, else the last `USE db;` before it, else
    `default_db`. `CREATE TABLE ... LIKE` copies a table defined earlier in the same file.
    mysqldump noise (SET, DROP TABLE IF EXISTS, CREATE DATABASE, LOCK/UNLOCK TABLES, and
    `/*!...*/` comments) is ignored. Anything else raises `DdlError` naming file and line.
    """
    try:
        statements = split_statements(text)
    except ParseError as e:
        raise DdlError(f"{file}: {e} (hint: check for an unterminated quote or comment)") from e
    db = default_db
    out: list[TableSchema] = []
    by_name: dict[tuple[str, str], int] = {}
    for st in statements:
        where = f"{file}:{st.line}: statement {st.number}"
        p = Parser(st.tokens, db)
        try:
            if p.accept("USE"):
                db = p.ident()
                continue
            if any(p.at(*w.split()) for w in _IGNORED_IN_SCHEMA_FILES):
                continue
            if not (p.accept("CREATE", "TABLE") or p.accept("CREATE", "TEMPORARY", "TABLE")):
                first = st.tokens[0].text
                raise ParseError(f"only CREATE TABLE and USE statements are allowed, got {first!r}")
            ct = parse_create_table(p)
        except ParseError as e:
            hint = "write plain MySQL CREATE TABLE statements (SHOW CREATE TABLE output works)"
            if "no default database" in str(e):
                hint = "qualify the table name (db.table) or add `USE db;` before it"
            raise DdlError(f"{where}: {e} (hint: {hint})") from e
        schema = ct.schema
        if ct.like is not None:
            src = by_name.get((ct.like[0].lower(), ct.like[1].lower()))
            if src is None:
                raise DdlError(
                    f"{where}: CREATE TABLE ... LIKE {ct.like[0]}.{ct.like[1]}: that table is not "
                    "defined earlier in this file (hint: put its CREATE TABLE first)"
                )
            schema = out[src].with_(db=ct.db, table=ct.table)
        assert schema is not None
        key = (schema.db.lower(), schema.table.lower())
        if key in by_name:
            if ct.if_not_exists:
                continue
            raise DdlError(
                f"{where}: table {schema.qualified} is defined twice (hint: keep one CREATE TABLE)"
            )
        by_name[key] = len(out)
        out.append(schema)
    return out


# -- DDL messages -----------------------------------------------------------------------------


def parse_ddl(sql: str, default_db: str | None, hint: str | None = None) -> list[DdlStatement]:
    """One upstream DDL message into typed statements, cross-checked with the protocol's hint.

    `hint` is Canal's `type` (ALTER, CINDEX, QUERY, ...), an Open Protocol ActionType number as
    a string ("61"), or "debezium". A statement whose parse contradicts the hint becomes
    `Unknown`; a statement the grammar cannot read but the hint classifies as one with no
    table data effect (index, view, sequence, placement, TiFlash, comment, charset ...) becomes
    a `SchemaObject` (a no-op); anything else unreadable stays `Unknown` with the reason.
    """
    stmts = parse_statements(sql, default_db)
    if not hint or hint.lower() == "debezium":
        return stmts
    if hint.strip().isdigit():
        info = open_protocol_action(int(hint))
        allowed, noop, label = info.statements, info.noop, f"ActionType {info.code} {info.name}"
    else:
        allowed = _CANAL_STATEMENTS.get(hint.upper())
        noop, label = False, f"Canal type {hint.upper()}"
    out: list[DdlStatement] = []
    for s in stmts:
        if isinstance(s, Unknown):
            if noop:
                out.append(SchemaObject(label, "protocol", None, s.sql))
            else:
                out.append(Unknown(s.sql, f"{s.reason} ({label})"))
        elif allowed is not None and not isinstance(s, allowed):
            out.append(
                Unknown(
                    getattr(s, "sql", sql),
                    f"the protocol says {label} but the SQL parses as {type(s).__name__}",
                )
            )
        else:
            out.append(s)
    return out


@dataclass(frozen=True, slots=True)
class ActionInfo:
    """A TiDB ActionType (Open Protocol DDL `t`, codec facts 0.3)."""

    code: int
    name: str
    kind: DdlKind | None  # None: depends on the SQL (ModifyColumn, MultiSchemaChange)
    statements: tuple[type, ...] | None  # statement classes the SQL may parse as
    noop: bool = False  # no table data effect: safe to record and skip when unreadable


_T = AlterTable
_ACTIONS: dict[int, tuple[str, DdlKind | None, tuple[type, ...] | None, bool]] = {
    1: ("CreateSchema", DdlKind.OTHER, (CreateDatabase,), True),
    2: ("DropSchema", DdlKind.OTHER, (DropDatabase,), True),
    3: ("CreateTable", DdlKind.CREATE_TABLE, (CreateTable, CreateTableLike), False),
    4: ("DropTable", DdlKind.DROP_TABLE, (DropTable,), False),
    5: ("AddColumn", DdlKind.ADD_COLUMN, (_T,), False),
    6: ("DropColumn", DdlKind.DROP_COLUMN, (_T,), False),
    7: ("AddIndex", DdlKind.OTHER, (_T, CreateIndex), False),
    8: ("DropIndex", DdlKind.OTHER, (_T, DropIndex), False),
    9: ("AddForeignKey", DdlKind.OTHER, (_T,), True),
    10: ("DropForeignKey", DdlKind.OTHER, (_T,), True),
    11: ("TruncateTable", DdlKind.TRUNCATE_TABLE, (TruncateTable,), False),
    12: ("ModifyColumn", None, (_T,), False),
    13: ("RebaseAutoID", DdlKind.OTHER, (_T,), True),
    14: ("RenameTable", DdlKind.RENAME_TABLE, (RenameTables, _T), False),
    15: ("SetDefaultValue", DdlKind.SET_DEFAULT, (_T,), False),
    16: ("ShardRowID", DdlKind.OTHER, (_T,), True),
    17: ("ModifyTableComment", DdlKind.OTHER, (_T,), True),
    18: ("RenameIndex", DdlKind.OTHER, (_T,), True),
    19: ("AddTablePartition", DdlKind.OTHER, (_T,), False),
    20: ("DropTablePartition", DdlKind.PARTITION, (_T,), False),
    21: ("CreateView", DdlKind.OTHER, (SchemaObject,), True),
    22: ("ModifyTableCharsetAndCollate", DdlKind.OTHER, (_T,), True),
    23: ("TruncateTablePartition", DdlKind.PARTITION, (_T,), False),
    24: ("DropView", DdlKind.OTHER, (SchemaObject,), True),
    25: ("RecoverTable", DdlKind.RECOVER_TABLE, (RecoverTable,), False),
    26: ("ModifySchemaCharsetAndCollate", DdlKind.OTHER, (AlterDatabase,), True),
    27: ("LockTable", DdlKind.OTHER, None, True),
    28: ("UnlockTable", DdlKind.OTHER, None, True),
    29: ("RepairTable", DdlKind.OTHER, None, False),
    30: ("SetTiFlashReplica", DdlKind.OTHER, (_T,), True),
    31: ("UpdateTiFlashReplicaStatus", DdlKind.OTHER, None, True),
    32: ("AddPrimaryKey", DdlKind.PRIMARY_KEY, (_T,), False),
    33: ("DropPrimaryKey", DdlKind.PRIMARY_KEY, (_T,), False),
    34: ("CreateSequence", DdlKind.OTHER, (SchemaObject,), True),
    35: ("AlterSequence", DdlKind.OTHER, (SchemaObject,), True),
    36: ("DropSequence", DdlKind.OTHER, (SchemaObject,), True),
    37: ("AddColumns", DdlKind.ADD_COLUMN, (_T,), False),
    38: ("DropColumns", DdlKind.DROP_COLUMN, (_T,), False),
    39: ("ModifyTableAutoIDCache", DdlKind.OTHER, (_T,), True),
    40: ("RebaseAutoRandomBase", DdlKind.OTHER, (_T,), True),
    41: ("AlterIndexVisibility", DdlKind.OTHER, (_T,), True),
    42: ("ExchangeTablePartition", DdlKind.PARTITION, (_T,), False),
    43: ("AddCheckConstraint", DdlKind.OTHER, (_T,), True),
    44: ("DropCheckConstraint", DdlKind.OTHER, (_T,), True),
    45: ("AlterCheckConstraint", DdlKind.OTHER, (_T,), True),
    47: ("RenameTables", DdlKind.RENAME_TABLE, (RenameTables,), False),
    49: ("AlterTableAttributes", DdlKind.OTHER, (_T,), True),
    50: ("AlterTablePartitionAttributes", DdlKind.OTHER, (_T,), True),
    51: ("CreatePlacementPolicy", DdlKind.OTHER, (SchemaObject,), True),
    52: ("AlterPlacementPolicy", DdlKind.OTHER, (SchemaObject,), True),
    53: ("DropPlacementPolicy", DdlKind.OTHER, (SchemaObject,), True),
    54: ("AlterTablePartitionPlacement", DdlKind.OTHER, (_T,), True),
    55: ("ModifySchemaDefaultPlacement", DdlKind.OTHER, (AlterDatabase,), True),
    56: ("AlterTablePlacement", DdlKind.OTHER, (_T,), True),
    57: ("AlterCacheTable", DdlKind.OTHER, (_T,), True),
    58: ("AlterTableStatsOptions", DdlKind.OTHER, (_T,), True),
    59: ("AlterNoCacheTable", DdlKind.OTHER, (_T,), True),
    # tiflow keeps 60 on each split CREATE TABLE (codec facts 0.3).
    60: ("CreateTables", DdlKind.CREATE_TABLE, (CreateTable, CreateTableLike), False),
    61: ("MultiSchemaChange", None, (_T,), False),
    62: ("FlashbackCluster", DdlKind.RECOVER_TABLE, None, False),
    63: ("RecoverSchema", DdlKind.RECOVER_TABLE, (RecoverTable,), False),
    64: ("ReorganizePartition", DdlKind.PARTITION, (_T,), False),
    65: ("AlterTTLInfo", DdlKind.OTHER, (_T,), True),
    67: ("AlterTTLRemove", DdlKind.OTHER, (_T,), True),
    68: ("CreateResourceGroup", DdlKind.OTHER, (SchemaObject,), True),
    69: ("AlterResourceGroup", DdlKind.OTHER, (SchemaObject,), True),
    70: ("DropResourceGroup", DdlKind.OTHER, (SchemaObject,), True),
    71: ("AlterTablePartitioning", DdlKind.OTHER, (_T,), False),
    72: ("RemovePartitioning", DdlKind.OTHER, (_T,), False),
    73: ("AddVectorIndex", DdlKind.OTHER, (_T, CreateIndex), True),
}


def open_protocol_action(code: int) -> ActionInfo:
    """What an Open Protocol DDL type code (TiDB ActionType) means; unknown codes check nothing."""
    if code in _ACTIONS:
        name, kind, stmts, noop = _ACTIONS[code]
        return ActionInfo(code, name, kind, stmts, noop)
    return ActionInfo(code, f"ActionType{code}", None, None, False)


def classify_open_protocol(action_code: int) -> DdlKind | None:
    """The policy kind of an ActionType, or None when only the SQL can tell (12, 61)."""
    return open_protocol_action(action_code).kind


# Canal-JSON `type` of a DDL message (codec facts 1.4) -> statement classes it may parse as.
# QUERY is the catch-all (views, schema DDL, EXCHANGE PARTITION, TTL, CreateTables in
# tiflow...), so it checks nothing.
_CANAL_STATEMENTS: dict[str, tuple[type, ...] | None] = {
    "CREATE": (CreateTable, CreateTableLike),
    "ALTER": (AlterTable,),
    "ERASE": (DropTable,),
    "TRUNCATE": (TruncateTable,),
    "RENAME": (RenameTables, AlterTable),
    "CINDEX": (AlterTable, CreateIndex),
    "DINDEX": (AlterTable, DropIndex),
    "QUERY": None,
}
CANAL_DDL_TYPES = tuple(_CANAL_STATEMENTS)


# -- Debezium tableChanges (codec facts 3.3) ----------------------------------------------------

_DBZ_ID = re.compile(r'"((?:[^"]|"")*)"\."((?:[^"]|"")*)"')


def parse_debezium_id(text: str) -> list[tuple[str, str]]:
    """`"db"."t"` -> [(db, t)]; a RENAME id `"a"."b","c"."d"` -> [(a, b), (c, d)] (old first)."""
    return [
        (m.group(1).replace('""', '"'), m.group(2).replace('""', '"'))
        for m in _DBZ_ID.finditer(text)
    ]


def _unquote_member(m: str) -> str:
    m = m.strip()
    if len(m) >= 2 and m[0] == m[-1] == "'":
        return m[1:-1].replace("''", "'")
    return m


def schema_from_debezium_table(db: str, table: str, table_json: dict[str, Any]) -> TableSchema:
    """A `TableSchema` from a Debezium `tableChanges[].table` object (post-DDL schema)."""
    cols: list[tuple[int, Column]] = []
    for i, c in enumerate(table_json.get("columns") or []):
        type_name = str(c.get("typeName") or c.get("typeExpression") or "").strip()
        words = type_name.lower().split()
        unsigned = "unsigned" in words or "zerofill" in words
        base = " ".join(w for w in words if w not in ("unsigned", "zerofill"))
        length, scale = c.get("length"), c.get("scale")
        args: list[int] = []
        norm = normalize_base(base) if base not in ("bool", "boolean", "serial") else base
        if norm in ("datetime", "timestamp", "time"):
            args = [length] if length else []
        elif norm in ("decimal", "float", "double") and length and scale is not None:
            args = [length, scale]
        elif length and norm in ("decimal", "char", "varchar", "binary", "varbinary", "bit"):
            args = [length]
        members = [_unquote_member(m) for m in c.get("enumValues") or []]
        charset = (c.get("charsetName") or "").lower() or None
        spec = TypeSpec(base=base, args=args, members=members, unsigned=unsigned, charset=charset)
        try:
            col = make_column(c["name"], spec)
        except ParseError as e:
            raise DdlError(
                f"Debezium column {db}.{table}.{c.get('name')}: {e} (hint: check typeName/length)"
            ) from e
        dflt = c.get("defaultValueExpression")
        col = col.with_(
            nullable=bool(c.get("optional", True)),
            has_default=dflt is not None,
            default=dflt,
            comment=c.get("comment") or None,
        )
        cols.append((int(c.get("position") or i + 1), col))
    cols.sort(key=lambda pc: pc[0])
    return TableSchema(
        db=db,
        table=table,
        columns=tuple(c for _, c in cols),
        primary_key=tuple(table_json.get("primaryKeyColumnNames") or ()),
        comment=table_json.get("comment"),
    )


def _same_shape(a: TableSchema, b: TableSchema) -> bool:
    return [(c.name.lower(), delta_type(c)) for c in a.columns] == [
        (c.name.lower(), delta_type(c)) for c in b.columns
    ]


def diff_schemas(
    old: TableSchema, new: TableSchema, stmt: DdlStatement | None = None
) -> list[DeltaChange]:
    """Delta changes that take `old` to `new` (both upstream schemas).

    A column name only in `old` is a drop and one only in `new` an add (at its position): a
    rename cannot be told from drop+add by the schemas alone. When the parsed DDL `stmt` is
    given and replaying it on `old` gives `new`'s columns, its changes (with renames) win.
    """
    if stmt is not None and not isinstance(stmt, Unknown):
        try:
            replayed, changes = apply_statement(old, stmt)
        except DdlError:
            replayed = None
        if replayed is not None and _same_shape(replayed, new):
            return changes
    out: list[DeltaChange] = []
    new_names = {c.name.lower() for c in new.columns}
    for c in old.columns:
        if c.name.lower() not in new_names:
            out.append(DropColumn(c.name))
    cur = [c for c in old.columns if c.name.lower() in new_names]
    prev: str | None = None
    for c in new.columns:
        o = old.column(c.name)
        if o is None:
            pos = Position(prev)
            interim = old.with_(columns=tuple(cur))
            change = _add_column_change(interim, c, pos)
            out.append(change)
            idx = 0 if prev is None else [x.name.lower() for x in cur].index(prev.lower()) + 1
            cur.insert(idx, c)
        else:
            ot, nt = delta_type(o), delta_type(c)
            if o.type_sql() != c.type_sql() or ot != nt:
                out.append(change_column_type(c.name, ot, nt))
            if (o.has_default, o.default) != (c.has_default, c.default):
                out.append(SetDefault(c.name, c.default))
        prev = c.name
    if old.handle_key() != new.handle_key() and new.primary_key != old.primary_key:
        out.append(ChangeKey(new.handle_key()))
    return out


def apply_debezium_ddl(
    schema: TableSchema | None,
    ddl: str,
    database: str | None,
    table_changes: list[dict[str, Any]],
) -> tuple[TableSchema | None, list[DeltaChange]]:
    """A Debezium DDL event (payload `ddl`, `databaseName`, `tableChanges`) for one table.

    Quirks (codec facts 3.3): TRUNCATE has empty tableChanges; DROP INDEX and DROP VIEW come as
    type DROP with a non-null table (only DROP with `table == null` drops the table); a RENAME
    id is "old","new".
    """
    stmts = parse_ddl(ddl, database, "debezium")
    stmt = stmts[0] if len(stmts) == 1 else None
    if not table_changes:
        if isinstance(stmt, TruncateTable):
            return schema, [TruncateTarget()]
        if stmt is not None and not isinstance(stmt, (AlterTable, CreateTable, DropTable)):
            return apply_statement(schema, stmt)
        return schema, [NoOp("schema-level DDL (no tableChanges)")]
    tc = table_changes[0]
    kind = str(tc.get("type", "")).upper()
    ids = parse_debezium_id(str(tc.get("id", "")))
    body = tc.get("table")
    if kind == "DROP" and body is None:
        return None, [DropTarget()]
    if kind == "DROP":
        # DROP INDEX / DROP VIEW: the table survives; follow the post-DDL table.
        if schema is None:
            return None, [NoOp("DROP of an index or view")]
        new = schema_from_debezium_table(schema.db, schema.table, body)
        changes = diff_schemas(schema, new, stmt)
        return new.with_(unique_keys=schema.unique_keys), changes or [NoOp("drop index or view")]
    if not ids:
        raise DdlError(
            f"Debezium tableChanges id {tc.get('id')!r} names no table (hint: check the message)"
        )
    db, table = ids[-1]  # for RENAME the new name is last
    new = schema_from_debezium_table(db, table, body or {})
    if kind == "CREATE" or schema is None:
        if isinstance(stmt, SchemaObject):
            return schema, [NoOp(f"{stmt.object} {stmt.action}")]
        return new, [CreateTarget(new)]
    out: list[DeltaChange] = []
    if len(ids) == 2 or (db.lower(), table.lower()) != (schema.db.lower(), schema.table.lower()):
        out.append(RenameTarget(db, table))
        if isinstance(stmt, RenameTables):
            stmt = None
    renamed = schema.with_(db=db, table=table)
    out.extend(diff_schemas(renamed, new, stmt))
    # Debezium carries no unique keys: keep the ones the history knows.
    return new.with_(unique_keys=schema.unique_keys, extra=schema.extra), out or [
        NoOp("no column change")
    ]
