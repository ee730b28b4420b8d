"""`schema/*.sql` files (CREATE TABLE and USE statements, mysqldump output) into `TableSchema`s.

Pure Python; reads no files itself (the caller passes the text and its name).
"""

from __future__ import annotations

from ticdc_sync.core.errors import DdlError
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl.create_table import parse_create_table
from ticdc_sync.ddl.tokens import ParseError, Parser, split_statements

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
