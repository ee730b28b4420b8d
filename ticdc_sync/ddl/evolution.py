"""Schema evolution: a parsed DDL statement applied to an upstream schema, and the Delta changes.

`apply_statement` computes the new upstream `TableSchema` and the list of `DeltaChange`s for
one table (DESIGN.md §2 "DDL to Delta"; `timeline` replays statements over a set of tables:
RENAME across tables, CREATE TABLE ... LIKE); `diff_schemas` derives the changes between
two schemas (a Debezium table description, a CREATE TABLE over a known table). Pure Python; no pyspark, no
I/O; renders no SQL (`delta_sql`) and decides no policy (`plan.policy`).
"""

from __future__ import annotations

from ticdc_sync.core.datatypes import delta_type
from ticdc_sync.core.errors import DdlError
from ticdc_sync.core.model import DdlKind
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.ddl import create_table, partition_rows, partitioning
from ticdc_sync.ddl.changes import (
    AddColumn,
    ChangeKey,
    CreateTarget,
    DeletePartitionRows,
    DeltaChange,
    DropColumn,
    DropTarget,
    ExchangePartition,
    MoveColumn,
    NoOp,
    RenameColumn,
    RenameTarget,
    SetDefault,
    TruncateTarget,
    Unsupported,
    change_column_type,
)
from ticdc_sync.ddl.defaults import ZERO_DATE, backfill_sql
from ticdc_sync.ddl.partition_expr import PartitionError
from ticdc_sync.ddl.statements import (
    AddColumnClause,
    AddPrimaryKeyClause,
    AddUniqueKeyClause,
    AlterClause,
    AlterDatabase,
    AlterTable,
    ChangeColumnClause,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    CreateTableLike,
    DdlStatement,
    DropColumnClause,
    DropDatabase,
    DropIndex,
    DropPrimaryKeyClause,
    DropTable,
    IndexClause,
    PartitionClause,
    Position,
    RecoverTable,
    RenameColumnClause,
    RenameTableClause,
    RenameTables,
    SchemaObject,
    SetDefaultClause,
    TableOptionClause,
    TiFlashClause,
    TruncateTable,
    Unknown,
)
from ticdc_sync.ddl.tokens import ParseError


def _add_column_change(schema: TableSchema, col: Column, pos: Position | None) -> AddColumn:
    note = None
    default_sql = None
    backfill = backfill_sql(col)
    if col.has_default and col.default is not None:
        default_sql = backfill
        if backfill is None and not ZERO_DATE.match(col.default):
            note = f"existing rows not backfilled: upstream filled them with {col.default}"
            if col.default.upper().startswith("CURRENT_TIMESTAMP"):
                note = "existing rows not backfilled: upstream filled them with the ALTER time"
            elif delta_type(col) == "TIMESTAMP":
                note = (
                    "existing rows not backfilled: the TIMESTAMP default is wall-clock text "
                    "in the upstream session time zone"
                )
    if pos is None and schema.columns:
        # Keep upstream order with `_commit_ts` last: a plain ADD goes after the last column.
        pos = Position(schema.columns[-1].name)
    return AddColumn(col.name, delta_type(col), pos, default_sql, backfill, col.comment, note)


# -- applying statements ----------------------------------------------------------------------


def _err(schema: TableSchema | None, msg: str) -> DdlError:
    where = schema.qualified if schema is not None else "?"
    return DdlError(
        f"{where}: {msg} (hint: the schema history is out of step with upstream; seed it "
        "from schema/*.sql with the table's current SHOW CREATE TABLE)"
    )


def _index(schema: TableSchema, name: str) -> int:
    low = name.lower()
    for i, c in enumerate(schema.columns):
        if c.name.lower() == low:
            return i
    raise _err(schema, f"column {name!r} does not exist")


def _insert(cols: list[Column], col: Column, pos: Position | None, schema: TableSchema) -> None:
    if pos is None:
        cols.append(col)
    elif pos.after is None:
        cols.insert(0, col)
    else:
        low = pos.after.lower()
        for i, c in enumerate(cols):
            if c.name.lower() == low:
                cols.insert(i + 1, col)
                return
        raise _err(schema, f"AFTER column {pos.after!r} does not exist")


def _rename_in_keys(schema: TableSchema, old: str, new: str) -> TableSchema:
    def ren(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(new if n.lower() == old.lower() else n for n in names)

    extra = {
        k: "\t".join(ren(tuple(v.split("\t")))) if k.startswith(create_table.UK_PREFIX) else v
        for k, v in schema.extra.items()
    }
    return schema.with_(
        primary_key=ren(schema.primary_key),
        unique_keys=tuple(ren(u) for u in schema.unique_keys),
        extra=extra,
    )


def _drop_from_keys(schema: TableSchema, name: str) -> TableSchema:
    low = name.lower()

    def rm(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(n for n in names if n.lower() != low)

    extra: dict[str, str] = {}
    for k, v in schema.extra.items():
        if k.startswith(create_table.UK_PREFIX):
            left = rm(tuple(v.split("\t")))
            if left:
                extra[k] = "\t".join(left)
        else:
            extra[k] = v
    uks: list[tuple[str, ...]] = []
    for u in schema.unique_keys:
        left = rm(u)
        if left and left not in uks:
            uks.append(left)
    return schema.with_(primary_key=rm(schema.primary_key), unique_keys=tuple(uks), extra=extra)


def _set_pk(schema: TableSchema, cols: tuple[str, ...]) -> TableSchema:
    names = [schema.columns[_index(schema, n)].name for n in cols]
    low = {n.lower() for n in names}
    columns = tuple(c.with_(nullable=False) if c.name.lower() in low else c for c in schema.columns)
    return schema.with_(columns=columns, primary_key=tuple(names))


def _apply_clause(schema: TableSchema, clause: AlterClause, out: list[DeltaChange]) -> TableSchema:
    if isinstance(clause, AddColumnClause):
        if schema.column(clause.column.name) is not None:
            if clause.if_not_exists:
                out.append(NoOp(f"column {clause.column.name} already exists"))
                return schema
            raise _err(schema, f"column {clause.column.name!r} already exists")
        cols = list(schema.columns)
        out.append(_add_column_change(schema, clause.column, clause.position))
        _insert(cols, clause.column, clause.position, schema)
        schema = schema.with_(columns=tuple(cols))
        if clause.primary:
            schema = _set_pk(schema, (clause.column.name,))
        if clause.unique:
            schema = create_table.add_unique_key(schema, None, (clause.column.name,))
        return schema
    if isinstance(clause, DropColumnClause):
        if schema.column(clause.name) is None and clause.if_exists:
            out.append(NoOp(f"column {clause.name} does not exist"))
            return schema
        i = _index(schema, clause.name)
        name = schema.columns[i].name
        out.append(DropColumn(name))
        schema = schema.with_(columns=schema.columns[:i] + schema.columns[i + 1 :])
        return _drop_from_keys(schema, name)
    if isinstance(clause, ChangeColumnClause):
        i = _index(schema, clause.old)
        old = schema.columns[i]
        new = clause.column
        if new.name.lower() != old.name.lower() and schema.column(new.name) is not None:
            raise _err(schema, f"column {new.name!r} already exists")
        if new.name != old.name:
            out.append(RenameColumn(old.name, new.name))
            schema = _rename_in_keys(schema, old.name, new.name)
        if new.name.lower() in {n.lower() for n in schema.primary_key}:
            new = new.with_(nullable=False)
        out.append(change_column_type(new.name, delta_type(old), delta_type(new)))
        if (old.has_default, old.default) != (new.has_default, new.default):
            out.append(SetDefault(new.name, new.default))
        cols = list(schema.columns)
        cols[i] = new
        if clause.position is not None:
            del cols[i]
            _insert(cols, new, clause.position, schema)
            out.append(MoveColumn(new.name, clause.position))
        schema = schema.with_(columns=tuple(cols))
        if clause.primary:
            schema = _set_pk(schema, (new.name,))
        if clause.unique:
            schema = create_table.add_unique_key(schema, None, (new.name,))
        return schema
    if isinstance(clause, RenameColumnClause):
        i = _index(schema, clause.old)
        old = schema.columns[i]
        if clause.new.lower() != old.name.lower() and schema.column(clause.new) is not None:
            raise _err(schema, f"column {clause.new!r} already exists")
        out.append(RenameColumn(old.name, clause.new))
        cols = list(schema.columns)
        cols[i] = old.with_(name=clause.new)
        return _rename_in_keys(schema.with_(columns=tuple(cols)), old.name, clause.new)
    if isinstance(clause, SetDefaultClause):
        i = _index(schema, clause.name)
        c = schema.columns[i]
        c = (
            c.with_(has_default=False, default=None)
            if clause.drop
            else c.with_(has_default=True, default=clause.default)
        )
        cols = list(schema.columns)
        cols[i] = c
        out.append(SetDefault(c.name, c.default))
        return schema.with_(columns=tuple(cols))
    if isinstance(clause, AddPrimaryKeyClause):
        if schema.primary_key:
            raise _err(schema, "the table already has a primary key")
        return _set_pk(schema, clause.columns)
    if isinstance(clause, DropPrimaryKeyClause):
        return schema.with_(primary_key=())
    if isinstance(clause, AddUniqueKeyClause):
        if clause.columns is None:
            out.append(NoOp("unique key on an expression (not usable as a merge key)"))
            return schema
        names = tuple(schema.columns[_index(schema, n)].name for n in clause.columns)
        out.append(NoOp(f"unique key ({', '.join(names)})"))
        return create_table.add_unique_key(schema, clause.name, names)
    if isinstance(clause, IndexClause):
        out.append(NoOp(f"index {clause.action} {clause.name or ''}".strip()))
        if clause.action == "drop" and clause.name:
            return create_table.drop_unique_key(schema, clause.name)
        if clause.action == "rename" and clause.name:
            old, new = clause.name.split("->", 1)
            key = create_table.UK_PREFIX + old.lower()
            if key in schema.extra:
                extra = {k: v for k, v in schema.extra.items() if k != key}
                extra[create_table.UK_PREFIX + new.lower()] = schema.extra[key]
                return schema.with_(extra=extra)
        return schema
    if isinstance(clause, TableOptionClause):
        if clause.option == "COMMENT":
            out.append(NoOp("table comment"))
            return schema.with_(comment=clause.comment)
        out.append(NoOp(f"table option {clause.option}"))
        return schema
    if isinstance(clause, TiFlashClause):
        out.append(NoOp(f"TiFlash replica count {clause.replicas}"))
        return schema
    if isinstance(clause, PartitionClause):
        return _apply_partition(schema, clause, out)
    if isinstance(clause, RenameTableClause):
        out.append(RenameTarget(clause.new_db, clause.new_table))
        return schema.with_(db=clause.new_db, table=clause.new_table)
    raise TypeError(f"unhandled clause {clause!r}")


def _apply_partition(
    schema: TableSchema, clause: PartitionClause, out: list[DeltaChange]
) -> TableSchema:
    """A partition clause: the partitioning the schema history records after it, and the
    rows it removes or swaps (computed from the partitioning in force before it)."""
    action = clause.action
    if action == "PARTITION BY":
        out.append(NoOp("partitioning change (PARTITION BY) keeps every row"))
        return schema.with_(partitioning=clause.definitions)
    if action == "REMOVE PARTITIONING":
        out.append(NoOp("partitioning change (REMOVE PARTITIONING) keeps every row"))
        return schema.with_(partitioning=None)
    if action not in ("ADD", "DROP", "TRUNCATE", "EXCHANGE", "REORGANIZE", "COALESCE"):
        out.append(NoOp(f"{action} PARTITION keeps every row"))
        return schema
    try:
        part = partitioning.read_schema(schema)
    except PartitionError as e:
        part, problem = None, str(e)
    names = tuple(part.names()) if part is not None and clause.all_partitions else clause.names
    if action in ("TRUNCATE", "DROP", "EXCHANGE"):
        where = f"{action} PARTITION {', '.join(names) or 'ALL'}"
        try:
            if part is None:
                raise PartitionError(problem)
            predicate = partition_rows.predicate(part, names, schema)
        except PartitionError as e:
            out.append(
                Unsupported(
                    f"{where} removes or swaps rows without row events: {e}", DdlKind.PARTITION
                )
            )
        else:
            if action == "EXCHANGE":
                assert clause.table is not None
                out.append(ExchangePartition(names[0], clause.table, True, predicate))
            else:
                out.append(DeletePartitionRows(action, names, predicate))
        if action != "DROP":
            return schema
    else:
        out.append(NoOp(f"partitioning change ({action} PARTITION) keeps every row"))
    if part is None:
        return schema  # not understood before: not understood after either
    try:
        if action == "ADD":
            part = partitioning.add(part, clause.definitions, clause.count)
        elif action == "DROP":
            part = partitioning.drop(part, names)
        elif action == "REORGANIZE":
            part = partitioning.reorganize(part, names, clause.definitions)
        else:
            part = partitioning.coalesce(part, clause.count or 0)
    except (PartitionError, ParseError):
        # Out of step with upstream: nothing here relies on the partitioning until a
        # TRUNCATE/DROP/EXCHANGE PARTITION, which then blocks with that reason.
        return schema.with_(partitioning=None)
    return schema.with_(partitioning=part.sql())


def apply_statement(
    schema: TableSchema | None, stmt: DdlStatement
) -> tuple[TableSchema | None, list[DeltaChange]]:
    """Apply one statement to one table's schema (None: the table does not exist yet).

    Returns the new schema (None once dropped) and the Delta changes, in order. For
    statements that name several tables (RENAME TABLES), the pair whose old name is `schema`
    is applied; `timeline` handles a set of tables (renames, CREATE TABLE ... LIKE). Raises `DdlError` when the
    statement contradicts the schema (the history is out of step with upstream).
    """
    if isinstance(stmt, CreateTable):
        if schema is not None:
            if stmt.if_not_exists:
                return schema, [NoOp("CREATE TABLE IF NOT EXISTS on an existing table")]
            raise _err(schema, "CREATE TABLE for a table that already exists")
        return stmt.schema, [CreateTarget(stmt.schema)]
    if isinstance(stmt, CreateTableLike):
        raise DdlError(
            f"CREATE TABLE {stmt.db}.{stmt.table} LIKE {stmt.like_db}.{stmt.like_table} needs "
            "the source table's schema (hint: seed it from schema/*.sql)"
        )
    if isinstance(stmt, Unknown):
        return schema, [Unsupported(f"DDL not understood: {stmt.reason}", DdlKind.UNPARSED)]
    if isinstance(stmt, RecoverTable):
        return schema, [
            Unsupported(
                "RECOVER/FLASHBACK TABLE brings back rows without row events", DdlKind.RECOVER_TABLE
            )
        ]
    if isinstance(stmt, (CreateDatabase, DropDatabase, AlterDatabase)):
        return schema, [NoOp("schema-level DDL")]
    if isinstance(stmt, SchemaObject):
        return schema, [NoOp(f"{stmt.object} {stmt.action}")]
    if schema is None:
        raise DdlError(
            f"{type(stmt).__name__} on a table with no known schema (hint: seed the table from "
            "schema/*.sql or let its CREATE TABLE reach the topic first)"
        )
    if isinstance(stmt, AlterTable):
        out: list[DeltaChange] = []
        before = schema.handle_key()
        for clause in stmt.clauses:
            schema = _apply_clause(schema, clause, out)
        if schema.handle_key() != before:
            out.append(ChangeKey(schema.handle_key()))
        if not stmt.clauses:
            out.append(NoOp("ALTER TABLE without clauses"))
        return schema, out
    if isinstance(stmt, RenameTables):
        cur = (schema.db.lower(), schema.table.lower())
        out = []
        for (od, ot), (nd, nt) in stmt.pairs:
            if (od.lower(), ot.lower()) == cur:
                out.append(RenameTarget(nd, nt))
                schema = schema.with_(db=nd, table=nt)
                cur = (nd.lower(), nt.lower())
        return schema, out or [NoOp("rename of other tables")]
    if isinstance(stmt, TruncateTable):
        return schema, [TruncateTarget()]
    if isinstance(stmt, DropTable):
        return None, [DropTarget()]
    if isinstance(stmt, CreateIndex):
        new = schema
        if stmt.unique and stmt.columns is not None:
            names = tuple(schema.columns[_index(schema, n)].name for n in stmt.columns)
            new = create_table.add_unique_key(schema, stmt.name, names)
        out = [NoOp(f"create index {stmt.name}")]
        if new.handle_key() != schema.handle_key():
            out.append(ChangeKey(new.handle_key()))
        return new, out
    if isinstance(stmt, DropIndex):
        new = create_table.drop_unique_key(schema, stmt.name)
        out = [NoOp(f"drop index {stmt.name}")]
        if new.handle_key() != schema.handle_key():
            out.append(ChangeKey(new.handle_key()))
        return new, out
    raise TypeError(f"unhandled statement {stmt!r}")


TableKey = tuple[str, str]


def table_key(db: str, table: str) -> TableKey:
    return (db.lower(), table.lower())


def statement_tables(stmt: DdlStatement) -> list[TableKey]:
    """The upstream tables a statement touches (before it runs)."""
    if isinstance(stmt, CreateTable):
        return [table_key(stmt.schema.db, stmt.schema.table)]
    if isinstance(stmt, RenameTables):
        return [table_key(*old) for old, _ in stmt.pairs]
    if isinstance(stmt, RecoverTable):
        return [table_key(stmt.db, stmt.table)] if stmt.db and stmt.table else []
    db = getattr(stmt, "db", None)
    table = getattr(stmt, "table", None)
    if isinstance(db, str) and isinstance(table, str):
        return [table_key(db, table)]
    return []


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
