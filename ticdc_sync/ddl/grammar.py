"""The statement grammar: one upstream DDL text (one or more `;`-separated statements) into
typed statements (`statements`).

Every statement becomes one of the frozen dataclasses of `statements`; what the grammar does
not understand becomes `Unknown(sql, reason)`, never a guess. Pure Python; no pyspark.
It stays one module: it is one recursive-descent parser, and splitting it would scatter
clause rules that call each other.
"""

from __future__ import annotations

from dataclasses import replace

from ticdc_sync.ddl import partitioning
from ticdc_sync.ddl.columns import ColumnDef, parse_column_def, parse_default_value, parse_key_parts
from ticdc_sync.ddl.create_table import is_key_element_start, parse_create_table, parse_key_element
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
from ticdc_sync.ddl.tokens import ParseError, Parser, RawStatement, split_statements

# -- parsing ----------------------------------------------------------------------------------


def parse_statements(sql: str, default_db: str | None) -> list[DdlStatement]:
    """Parse without a protocol hint; `Unknown` for what the grammar does not cover."""
    try:
        raws = split_statements(sql)
    except ParseError as e:
        return [Unknown(sql, str(e))]
    return flatten([parse_one(r, default_db) for r in raws])


def parse_one(raw: RawStatement, default_db: str | None) -> DdlStatement:
    p = Parser(raw.tokens, default_db)
    try:
        stmt = _statement(p, raw.text)
    except ParseError as e:
        where = f" near {e.tok.text!r}" if e.tok is not None else ""
        return Unknown(raw.text, f"{e}{where}")
    if isinstance(stmt, Unknown):
        return stmt
    if not p.done():
        t = p.peek()
        return Unknown(raw.text, f"unexpected {t.text if t else '?'!r} after a complete statement")
    return stmt


_VIEW_PREFIX = ("ALGORITHM", "DEFINER", "SQL", "OR")


def _statement(p: Parser, sql: str) -> DdlStatement | list:
    if p.accept("CREATE"):
        return _create(p, sql)
    if p.accept("ALTER"):
        return _alter(p, sql)
    if p.accept("DROP"):
        return _drop(p, sql)
    if p.accept("RENAME"):
        p.accept("TABLE") or p.accept("TABLES")
        pairs = []
        while True:
            old = p.qname()
            p.expect("TO")
            new = p.qname()
            pairs.append((old, new))
            if not p.accept(","):
                break
        return RenameTables(tuple(pairs), sql)
    if p.accept("TRUNCATE"):
        p.accept("TABLE")
        db, t = p.qname()
        return TruncateTable(db, t, sql)
    if p.accept("RECOVER", "TABLE"):
        if p.accept("BY", "JOB"):
            p.next()
            return RecoverTable(None, None, None, sql)
        db, t = p.qname()
        if not p.done():
            p.next()  # optional job number
        return RecoverTable(db, t, None, sql)
    if p.accept("FLASHBACK"):
        if p.accept("TABLE"):
            db, t = p.qname()
            new = p.ident() if p.accept("TO") else None
            return RecoverTable(db, t, new, sql)
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            name = p.ident()
            if p.accept("TO"):
                p.ident()
            return RecoverTable(name, None, None, sql)
        raise ParseError("FLASHBACK CLUSTER is not a table change ticdc-sync can follow")
    if p.accept("LOCK") or p.accept("UNLOCK"):
        p.skip_rest()
        return SchemaObject("lock", "lock", None, sql)
    t = p.peek()
    raise ParseError(f"not a DDL statement this tool understands ({t.text if t else ''!r})")


def _create(p: Parser, sql: str) -> DdlStatement:
    if p.accept("DATABASE") or p.accept("SCHEMA"):
        p.accept("IF", "NOT", "EXISTS")
        name = p.ident()
        p.skip_rest()
        return CreateDatabase(name, sql)
    p.accept("TEMPORARY") or p.accept("GLOBAL", "TEMPORARY")
    if p.accept("TABLE"):
        ct = parse_create_table(p)
        if ct.like is not None:
            return CreateTableLike(ct.db, ct.table, ct.like[0], ct.like[1], ct.if_not_exists, sql)
        assert ct.schema is not None
        return CreateTable(ct.schema, ct.if_not_exists, sql)
    unique = False
    while p.peek() is not None and p.peek().up in (
        "UNIQUE",
        "FULLTEXT",
        "SPATIAL",
        "VECTOR",
        "COLUMNAR",
    ):
        unique = unique or p.peek().up == "UNIQUE"
        p.next()
    if p.accept("INDEX") or p.accept("KEY"):
        p.accept("IF", "NOT", "EXISTS")
        name = p.ident()
        if p.accept("USING"):
            p.next()
        p.expect("ON")
        db, t = p.qname()
        cols = parse_key_parts(p)
        p.skip_rest()
        return CreateIndex(db, t, name, unique, tuple(cols) if cols is not None else None, sql)
    for obj in ("VIEW", "SEQUENCE", "PLACEMENT POLICY", "RESOURCE GROUP"):
        if _find_word_then_skip(p, obj, allow_prefix=obj == "VIEW"):
            return SchemaObject(obj.lower(), "create", _name_after(p), sql)
    raise ParseError("unknown CREATE statement", p.peek())


def _find_word_then_skip(p: Parser, obj: str, allow_prefix: bool) -> bool:
    """Match `obj` here (or, for views, after OR REPLACE / ALGORITHM= / DEFINER= / SQL SECURITY)."""
    words = obj.split()
    if allow_prefix:
        j = p.i
        while j < len(p.toks):
            if p.toks[j].up == words[0]:
                p.i = j + 1
                return True
            j += 1
        return False
    p.accept("OR", "REPLACE")
    p.accept("IF", "NOT", "EXISTS")
    return p.accept(*words)


def _name_after(p: Parser) -> str | None:
    p.accept("IF", "NOT", "EXISTS")
    p.accept("IF", "EXISTS")
    name = None
    if not p.done():
        name = p.ident()
        if p.accept("."):
            name = f"{name}.{p.ident()}"
    p.skip_rest()
    return name


def _drop(p: Parser, sql: str) -> DdlStatement:
    if p.accept("DATABASE") or p.accept("SCHEMA"):
        p.accept("IF", "EXISTS")
        return DropDatabase(p.ident(), sql)
    p.accept("TEMPORARY")
    if p.accept("TABLE") or p.accept("TABLES"):
        if_exists = p.accept("IF", "EXISTS")
        names = [p.qname()]
        while p.accept(","):
            names.append(p.qname())
        p.accept("RESTRICT") or p.accept("CASCADE")
        if len(names) > 1:
            # Several tables in one DROP: TiCDC splits them per table; keep them apart too.
            return _Many([DropTable(d, t, if_exists, sql) for d, t in names])  # type: ignore[return-value]
        return DropTable(names[0][0], names[0][1], if_exists, sql)
    if p.accept("INDEX") or p.accept("KEY"):
        p.accept("IF", "EXISTS")
        name = p.ident()
        p.expect("ON")
        db, t = p.qname()
        p.skip_rest()
        return DropIndex(db, t, name, sql)
    for obj in ("VIEW", "SEQUENCE", "PLACEMENT POLICY", "RESOURCE GROUP"):
        if p.accept(*obj.split()):
            return SchemaObject(obj.lower(), "drop", _name_after(p), sql)
    raise ParseError("unknown DROP statement", p.peek())


class _Many(list):
    """Internal: one source statement that stands for several (DROP TABLE a, b)."""


def _alter(p: Parser, sql: str) -> DdlStatement:
    if p.accept("DATABASE") or p.accept("SCHEMA"):
        name = None
        t = p.peek()
        if (
            t is not None
            and t.kind == "ident"
            or (
                t is not None
                and t.kind == "word"
                and t.up
                not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "CHAR", "PLACEMENT", "SET")
            )
        ):
            name = p.ident()
        p.skip_rest()
        return AlterDatabase(name or p.default_db, sql)
    for obj in ("VIEW", "SEQUENCE", "PLACEMENT POLICY", "RESOURCE GROUP"):
        j = p.i
        if _find_word_then_skip(p, obj, allow_prefix=obj == "VIEW") and (
            obj != "VIEW" or _is_view(p, j)
        ):
            return SchemaObject(obj.lower(), "alter", _name_after(p), sql)
        p.i = j
    p.accept("ONLINE") or p.accept("OFFLINE")
    p.accept("IGNORE")
    if not p.accept("TABLE"):
        raise ParseError("unknown ALTER statement", p.peek())
    db, t = p.qname()
    clauses: list[AlterClause] = []
    if p.done():
        return AlterTable(db, t, (), sql)
    while True:
        c = _clause(p)
        clauses.extend(c)
        if not p.accept(","):
            break
    return AlterTable(db, t, tuple(clauses), sql)


def _is_view(p: Parser, start: int) -> bool:
    """ALTER [ALGORITHM=..] [DEFINER=..] [SQL SECURITY ..] VIEW: VIEW before any TABLE word."""
    return all(tok.up != "TABLE" for tok in p.toks[start : p.i])


_PARTITION_ACTIONS = (
    "TRUNCATE",
    "EXCHANGE",
    "REORGANIZE",
    "COALESCE",
    "ANALYZE",
    "CHECK",
    "OPTIMIZE",
    "REBUILD",
    "REPAIR",
    "DISCARD",
    "IMPORT",
)
_SIMPLE_OPTIONS = (
    "ENGINE",
    "AUTO_INCREMENT",
    "AUTO_ID_CACHE",
    "AUTO_RANDOM_BASE",
    "SHARD_ROW_ID_BITS",
    "PRE_SPLIT_REGIONS",
    "ROW_FORMAT",
    "KEY_BLOCK_SIZE",
    "AVG_ROW_LENGTH",
    "MAX_ROWS",
    "MIN_ROWS",
    "PACK_KEYS",
    "CHECKSUM",
    "DELAY_KEY_WRITE",
    "COMPRESSION",
    "ENCRYPTION",
    "STATS_PERSISTENT",
    "STATS_AUTO_RECALC",
    "STATS_SAMPLE_PAGES",
    "STATS_BUCKETS",
    "STATS_TOPN",
    "STATS_COL_CHOICE",
    "STATS_COL_LIST",
    "STATS_SAMPLE_RATE",
    "ALGORITHM",
    "LOCK",
    "TTL",
    "TTL_ENABLE",
    "TTL_JOB_INTERVAL",
    "ATTRIBUTES",
    "TABLESPACE",
    "INSERT_METHOD",
    "UNION",
    "SECONDARY_ENGINE",
    "CONNECTION",
    "PASSWORD",
    "DATA",
    "INDEX",
)


def _end_of_clause(p: Parser) -> bool:
    return p.done() or p.at_punct(",")


def _position(p: Parser) -> Position | None:
    if p.accept("FIRST"):
        return Position(None)
    if p.accept("AFTER"):
        return Position(p.ident())
    return None


def _column_with_position(p: Parser, name: str) -> tuple[ColumnDef, Position | None]:
    d = parse_column_def(p, name, stop=("FIRST", "AFTER"))
    return d, _position(p)


def _clause(p: Parser) -> list[AlterClause]:
    start = p.i
    if p.accept("ADD"):
        if p.at("PARTITION") or p.at("PARTITIONS"):
            return [_partition(p, "ADD", start)]
        if is_key_element_start(p):
            return [_key_clause(p)]
        p.accept("COLUMN")
        ine = p.accept("IF", "NOT", "EXISTS")
        if p.at_punct("("):
            p.next()
            out: list[AlterClause] = []
            while True:
                if is_key_element_start(p):
                    out.append(_key_clause(p))
                else:
                    name = p.ident()
                    d = parse_column_def(p, name)
                    out.append(AddColumnClause(d.column, None, d.primary, d.unique, ine))
                if not p.accept(","):
                    break
            p.expect(")")
            return out
        name = p.ident()
        d, pos = _column_with_position(p, name)
        return [AddColumnClause(d.column, pos, d.primary, d.unique, ine)]
    if p.accept("DROP"):
        if p.at("PARTITION"):
            return [_partition(p, "DROP", start)]
        if p.accept("PRIMARY", "KEY"):
            return [DropPrimaryKeyClause()]
        if p.accept("INDEX") or p.accept("KEY"):
            p.accept("IF", "EXISTS")
            return [IndexClause("drop", p.ident())]
        if p.accept("FOREIGN", "KEY") or p.accept("CHECK") or p.accept("CONSTRAINT"):
            p.accept("IF", "EXISTS")
            return [IndexClause("drop", p.ident())]
        p.accept("COLUMN")
        ie = p.accept("IF", "EXISTS")
        name = p.ident()
        p.accept("RESTRICT") or p.accept("CASCADE")
        return [DropColumnClause(name, ie)]
    if p.accept("MODIFY"):
        p.accept("COLUMN")
        p.accept("IF", "EXISTS")
        name = p.ident()
        d, pos = _column_with_position(p, name)
        return [ChangeColumnClause(name, d.column, pos, d.primary, d.unique)]
    if p.accept("CHANGE"):
        p.accept("COLUMN")
        p.accept("IF", "EXISTS")
        old = p.ident()
        new = p.ident()
        d, pos = _column_with_position(p, new)
        return [ChangeColumnClause(old, d.column, pos, d.primary, d.unique)]
    if p.accept("RENAME"):
        if p.accept("COLUMN"):
            old = p.ident()
            p.expect("TO")
            return [RenameColumnClause(old, p.ident())]
        if p.accept("INDEX") or p.accept("KEY"):
            old = p.ident()
            p.expect("TO")
            return [IndexClause("rename", f"{old}->{p.ident()}")]
        p.accept("TO") or p.accept("AS")
        db, t = p.qname()
        return [RenameTableClause(db, t)]
    if p.accept("ALTER"):
        if p.accept("INDEX") or p.accept("CHECK") or p.accept("CONSTRAINT"):
            name = p.ident()
            while not _end_of_clause(p):
                p.next()
            return [IndexClause("alter", name)]
        p.accept("COLUMN")
        name = p.ident()
        if p.accept("SET", "DEFAULT"):
            return [SetDefaultClause(name, parse_default_value(p))]
        if p.accept("DROP", "DEFAULT"):
            return [SetDefaultClause(name, None, drop=True)]
        if p.accept("SET", "VISIBLE") or p.accept("SET", "INVISIBLE"):
            return [IndexClause("alter", name)]
        raise ParseError("unknown ALTER COLUMN form", p.peek())
    if p.at("PARTITION", "BY"):
        return [_partition(p, "PARTITION BY", start)]
    if p.at("REMOVE", "PARTITIONING"):
        return [_partition(p, "REMOVE PARTITIONING", start)]
    if (
        p.peek() is not None
        and p.peek().up in _PARTITION_ACTIONS
        and p.peek(1) is not None
        and p.peek(1).up in ("PARTITION", "PARTITIONS", "TABLESPACE")
    ):
        return [_partition(p, p.peek().up, start)]
    if p.accept("SET", "TIFLASH", "REPLICA"):
        n = p.next()
        if n.kind != "num":
            raise ParseError("expected a replica count", n)
        while not _end_of_clause(p):
            p.next()  # LOCATION LABELS ...
        return [TiFlashClause(int(n.text))]
    if p.accept("COMMENT"):
        p.accept("=")
        c = p.next()
        if c.kind != "str":
            raise ParseError("expected a quoted COMMENT", c)
        return [TableOptionClause("COMMENT", c.text)]
    if p.accept("CONVERT", "TO"):
        while not _end_of_clause(p):
            p.next()
        return [TableOptionClause("CONVERT TO CHARACTER SET")]
    p.accept("DEFAULT")
    if p.at("CHARACTER", "SET") or p.at("CHARSET") or p.at("COLLATE") or p.at("CHAR", "SET"):
        while not _end_of_clause(p):
            p.next()
        return [TableOptionClause("CHARACTER SET")]
    if (
        p.at("PLACEMENT", "POLICY")
        or p.at("REMOVE", "TTL")
        or p.at("FORCE")
        or p.at("CACHE")
        or p.at("NOCACHE")
        or p.at("ORDER", "BY")
        or p.at("ENABLE", "KEYS")
        or p.at("DISABLE", "KEYS")
        or p.at("WITH", "VALIDATION")
        or p.at("WITHOUT", "VALIDATION")
        or p.at("SECONDARY_LOAD")
        or p.at("SECONDARY_UNLOAD")
    ):
        opt = p.next().up
        while not _end_of_clause(p):
            p.next()
        return [TableOptionClause(opt)]
    t = p.peek()
    if (
        t is not None
        and t.up in _SIMPLE_OPTIONS
        and p.peek(1) is not None
        and (
            p.peek(1).text == "="
            or t.up in ("ENGINE", "ALGORITHM", "LOCK", "TTL", "ATTRIBUTES")
            or p.peek(1).kind in ("num", "str", "word")
        )
    ):
        opt = p.next().up
        while not _end_of_clause(p):
            p.next()
        return [TableOptionClause(opt)]
    raise ParseError("unknown ALTER TABLE clause", t)


def _key_clause(p: Parser) -> AlterClause:
    r = parse_key_element(p)
    if r is None:
        return IndexClause("add", None)
    kind, name, cols = r
    if kind == "primary":
        if cols is None:
            raise ParseError("PRIMARY KEY on an expression")
        return AddPrimaryKeyClause(tuple(cols))
    return AddUniqueKeyClause(name, tuple(cols) if cols is not None else None)


def _partition(p: Parser, action: str, start: int) -> PartitionClause:
    # Partition clauses stand alone in MySQL and may contain commas (DROP PARTITION p0, p1):
    # each is the rest of the statement, and anything after what it takes is not understood.
    text = " ".join(t.text for t in p.toks[start:])
    c = PartitionClause(action, text)
    if action == "PARTITION BY":
        parsed = partitioning.parse_clause(p)
        return replace(c, definitions=parsed.text)
    if action == "REMOVE PARTITIONING":
        p.expect("REMOVE", "PARTITIONING")
        if p.accept("UPDATE", "INDEXES"):
            p.skip_balanced()
    elif action == "ADD":
        p.accept("PARTITION")
        p.accept("IF", "NOT", "EXISTS")
        if p.accept("PARTITIONS"):
            c = replace(c, count=_count(p))
        else:
            c = replace(c, definitions=_group_text(p))
    elif action in ("DROP", "TRUNCATE", "EXCHANGE", "REORGANIZE", "COALESCE"):
        if action != "DROP":
            p.next()  # the verb (DROP was read by the caller)
        p.expect("PARTITION")
        if action == "DROP":
            p.accept("IF", "EXISTS")
        if action == "COALESCE":
            c = replace(c, count=_count(p))
        elif action == "TRUNCATE" and p.accept("ALL"):
            c = replace(c, all_partitions=True)
        elif not p.done():
            names = [p.ident()]
            while p.accept(","):
                names.append(p.ident())
            c = replace(c, names=tuple(names))
        if action == "EXCHANGE":
            p.expect("WITH", "TABLE")
            c = replace(c, table=p.qname())
            p.accept("WITH", "VALIDATION") or p.accept("WITHOUT", "VALIDATION")
        elif action == "REORGANIZE" and p.accept("INTO"):
            c = replace(c, definitions=_group_text(p))
    else:  # ANALYZE, CHECK, OPTIMIZE, REBUILD, REPAIR, DISCARD, IMPORT: no row changes
        p.skip_rest()
    if not p.done():
        raise ParseError(f"unexpected {p.peek().text!r} in a {action} PARTITION clause", p.peek())
    return c


def _count(p: Parser) -> int:
    t = p.next()
    if t.kind != "num" or not t.text.isdigit():
        raise ParseError("expected a partition count", t)
    return int(t.text)


def _group_text(p: Parser) -> str:
    """A parenthesised group as text (`(PARTITION p9 VALUES LESS THAN (100))`)."""
    start = p.i
    p.skip_balanced()
    return partitioning.definitions_text(p.toks[start : p.i])


def flatten(stmts: list) -> list[DdlStatement]:
    out: list[DdlStatement] = []
    for s in stmts:
        if isinstance(s, _Many):
            out.extend(s)
        else:
            out.append(s)
    return out
