"""CREATE TABLE bodies: columns, keys and table options into a `TableSchema`, plus the unique-key
bookkeeping that CREATE/DROP INDEX and ALTER TABLE share.

Pure Python; no pyspark, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl import partitioning
from ticdc_sync.ddl.columns import (
    ColumnDef,
    parse_column_def,
    parse_key_parts,
)
from ticdc_sync.ddl.tokens import ParseError, Parser

# -- CREATE TABLE ---------------------------------------------------------------------------


@dataclass(slots=True)
class CreateTableParse:
    db: str
    table: str
    schema: TableSchema | None  # None for CREATE TABLE ... LIKE
    if_not_exists: bool
    like: tuple[str, str] | None = None


# `TableSchema.extra` key: the generated columns' names, tab-separated (CREATE TABLE only).
GENERATED = "generated"
_INDEX_WORDS = ("KEY", "INDEX", "FULLTEXT", "SPATIAL", "VECTOR", "COLUMNAR", "CLUSTERED")


def _skip_index_options(p: Parser) -> None:
    p.skip_until_comma_or_close()


def parse_key_element(p: Parser) -> tuple[str, str | None, list[str] | None] | None:
    """A table-level key/constraint element: (kind, name, cols) for PRIMARY/UNIQUE, else None.

    The cursor is at CONSTRAINT / PRIMARY / UNIQUE / KEY / INDEX / FOREIGN / CHECK / ...
    `cols` is None when a key part is an expression (functional index).
    """
    constraint = None
    if p.accept("CONSTRAINT") and not any(
        p.at(w) for w in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK")
    ):
        constraint = p.ident()
    for kind, words in (("primary", ("PRIMARY", "KEY")), ("unique", ("UNIQUE",))):
        if p.accept(*words):
            if kind == "unique":
                p.accept("KEY") or p.accept("INDEX")
            name = constraint
            while not p.at_punct("("):
                t = p.next()  # [name] [USING BTREE|HASH]
                if t.up == "USING":
                    p.next()
                elif t.kind in ("ident", "word"):
                    name = t.text
            cols = parse_key_parts(p)
            _skip_index_options(p)
            return kind, name, cols
    _skip_index_options(p)
    return None


def is_key_element_start(p: Parser) -> bool:
    """Whether a table element is a key/constraint (reserved words; backquoted names are not)."""
    t = p.peek()
    if t is None or t.kind != "word":
        return False
    if t.up in ("CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "KEY", "INDEX"):
        return True
    if t.up in ("FULLTEXT", "SPATIAL"):
        return True
    # Non-reserved words that start TiDB/PolarDB index kinds only when INDEX/KEY follows.
    nxt = p.peek(1)
    return (
        t.up in ("VECTOR", "COLUMNAR", "CLUSTERED")
        and nxt is not None
        and nxt.up
        in (
            "INDEX",
            "KEY",
            "COLUMNAR",
        )
    )


def parse_create_table(p: Parser) -> CreateTableParse:
    """After `CREATE [TEMPORARY] TABLE`."""
    if_not_exists = p.accept("IF", "NOT", "EXISTS")
    db, table = p.qname()
    if p.accept("LIKE"):
        return CreateTableParse(db, table, None, if_not_exists, like=p.qname())
    if p.at("(", "LIKE"):
        p.next()
        p.next()
        like = p.qname()
        p.expect(")")
        return CreateTableParse(db, table, None, if_not_exists, like=like)
    if not p.at_punct("("):
        raise ParseError("CREATE TABLE without a column list (CREATE TABLE ... SELECT?)", p.peek())
    # Table options come after the column list, but the charset decides TEXT(N) sizing:
    # look ahead for it first.
    table_charset = _lookahead_charset(p)
    p.next()
    defs: list[ColumnDef] = []
    pk: list[str] = []
    uks: list[tuple[str | None, tuple[str, ...]]] = []
    while True:
        if is_key_element_start(p):
            r = parse_key_element(p)
            if r is not None and r[2] is not None:
                if r[0] == "primary":
                    pk = r[2]
                else:
                    uks.append((r[1], tuple(r[2])))
        else:
            name = p.ident()
            defs.append(parse_column_def(p, name, table_charset))
        if p.accept(","):
            continue
        p.expect(")")
        break
    comment, parts = _parse_table_options(p)
    schema = build_schema(db, table, defs, pk, uks, comment, table_charset)
    if parts is not None:
        schema = schema.with_(partitioning=parts)
    return CreateTableParse(db, table, schema, if_not_exists)


def build_schema(
    db: str,
    table: str,
    defs: list[ColumnDef],
    pk: list[str],
    uks: list[tuple[str | None, tuple[str, ...]]],
    comment: str | None,
    charset: str | None,
) -> TableSchema:
    cols = [d.column for d in defs]
    names = {c.name.lower(): c.name for c in cols}
    col_pk = [d.column.name for d in defs if d.primary]
    if pk and col_pk:
        raise ParseError("multiple primary keys defined")
    pk = pk or col_pk
    pk = [names.get(n.lower(), n) for n in pk]
    for n in pk:
        if n.lower() not in names:
            raise ParseError(f"primary key column {n!r} is not a column of {db}.{table}")
    pk_low = {n.lower() for n in pk}
    cols = [c.with_(nullable=False) if c.name.lower() in pk_low else c for c in cols]
    extra = {"charset": charset} if charset else {}
    generated = [d.column.name for d in defs if d.generated]
    if generated:
        # Dumpling leaves generated columns out of its data files (`dumpling.data_columns`).
        extra[GENERATED] = "\t".join(generated)
    schema = TableSchema(
        db=db, table=table, columns=tuple(cols), primary_key=tuple(pk), comment=comment, extra=extra
    )
    for d in defs:
        if d.unique:
            schema = add_unique_key(schema, None, (d.column.name,))
    for name, u in uks:
        schema = add_unique_key(schema, name, tuple(names.get(n.lower(), n) for n in u))
    return schema


UK_PREFIX = "uk."


def add_unique_key(schema: TableSchema, name: str | None, cols: tuple[str, ...]) -> TableSchema:
    """Add a unique key, remembering its index name in `extra` (MySQL's naming when unnamed:
    the first column, then `_2`, `_3`, ...) so that DROP INDEX can find it later."""
    if not name:
        name = cols[0]
        taken = {k[len(UK_PREFIX) :] for k in schema.extra if k.startswith(UK_PREFIX)}
        n = 2
        base = name
        while name.lower() in taken:
            name = f"{base}_{n}"
            n += 1
    extra = {**schema.extra, UK_PREFIX + name.lower(): "\t".join(cols)}
    uks = schema.unique_keys if cols in schema.unique_keys else (*schema.unique_keys, cols)
    return schema.with_(unique_keys=uks, extra=extra)


def drop_unique_key(schema: TableSchema, name: str) -> TableSchema:
    """Drop the unique key named `name` (no change when it is a non-unique index)."""
    key = UK_PREFIX + name.lower()
    if key not in schema.extra:
        return schema
    cols = tuple(schema.extra[key].split("\t"))
    extra = {k: v for k, v in schema.extra.items() if k != key}
    still = any(v == schema.extra[key] for k, v in extra.items() if k.startswith(UK_PREFIX))
    uks = schema.unique_keys if still else tuple(u for u in schema.unique_keys if u != cols)
    return schema.with_(unique_keys=uks, extra=extra)


def _lookahead_charset(p: Parser) -> str | None:
    depth = 0
    j = p.i
    while j < len(p.toks):
        t = p.toks[j]
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
        elif depth == 0 and t.kind == "word":
            u = t.up
            k = j + 1
            if u in ("CHARACTER", "CHAR") and k < len(p.toks) and p.toks[k].up == "SET":
                k += 1
            elif u != "CHARSET":
                j += 1
                continue
            if k < len(p.toks) and p.toks[k].kind == "punct" and p.toks[k].text == "=":
                k += 1
            if k < len(p.toks):
                return p.toks[k].text.lower()
        j += 1
    return None


def _parse_table_options(p: Parser) -> tuple[str | None, str | None]:
    """Table options after the column list: the COMMENT, and the partitioning's text
    (`ddl.partitioning`; it comes last). The other options are not kept."""
    comment = None
    parts = None
    while not p.done():
        if p.accept("COMMENT"):
            p.accept("=")
            c = p.next()
            if c.kind == "str":
                comment = c.text
        elif p.at("PARTITION", "BY"):
            parts = partitioning.parse_clause(p).text
        elif p.at("AS") or p.at("SELECT") or p.at("IGNORE") or p.at("REPLACE"):
            raise ParseError("CREATE TABLE ... SELECT is not supported", p.peek())
        elif p.at_punct("("):
            p.skip_balanced()
        else:
            p.next()
    return comment, parts
