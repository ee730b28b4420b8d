"""MySQL/TiDB DDL lexing and the shared pieces of DDL parsing: column types and CREATE TABLE.

Tokens come from sqlglot's MySQL tokenizer (it handles backticks, string escapes, `b'..'`,
`x'..'` and comments, including TiDB's `/*T![clustered_index] CLUSTERED */`, which it drops as
comments). The grammar on top is our own small recursive-descent parser, because sqlglot 30
falls back to an unparsed `exp.Command` for most MySQL DDL (ALTER TABLE with column
positions, `text(N)`, `CHARACTER SET binary`, partition clauses, RENAME TABLE, ...). sqlglot is
imported nowhere else in the project. Pure Python; no pyspark, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from ticdc_sync.datatypes import normalize_base
from ticdc_sync.upstream import Column, TableSchema

_PUNCT = {
    TokenType.L_PAREN: "(",
    TokenType.R_PAREN: ")",
    TokenType.COMMA: ",",
    TokenType.DOT: ".",
    TokenType.SEMICOLON: ";",
    TokenType.EQ: "=",
    TokenType.DASH: "-",
    TokenType.PLUS: "+",
}
_STRINGS = {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING}


@dataclass(frozen=True, slots=True)
class Tok:
    """One token. kind: word | ident (backquoted) | str | num | bits | hex | punct."""

    kind: str
    text: str
    line: int
    start: int
    end: int  # exclusive

    @property
    def up(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


class ParseError(Exception):
    """Internal: a statement this grammar does not understand (turned into DdlError/Unknown)."""

    def __init__(self, message: str, tok: Tok | None = None) -> None:
        super().__init__(message)
        self.tok = tok


class _Tokenizer(MySQL.Tokenizer):
    # sqlglot swallows the rest of a "command" statement (RENAME, SHOW, ...) as one string;
    # we want real tokens for every statement.
    COMMANDS: set = set()


def tokenize(sql: str) -> list[Tok]:
    try:
        raw = _Tokenizer(dialect="mysql").tokenize(sql)
    except TokenError as e:
        raise ParseError(f"cannot tokenize: {e}") from e
    out: list[Tok] = []
    for t in raw:
        end = t.end + 1
        if t.token_type in _PUNCT:
            out.append(Tok("punct", _PUNCT[t.token_type], t.line, t.start, end))
        elif t.token_type == TokenType.IDENTIFIER:
            out.append(Tok("ident", t.text, t.line, t.start, end))
        elif t.token_type in _STRINGS:
            out.append(Tok("str", t.text, t.line, t.start, end))
        elif t.token_type == TokenType.NUMBER:
            out.append(Tok("num", t.text, t.line, t.start, end))
        elif t.token_type == TokenType.BIT_STRING:
            out.append(Tok("bits", t.text, t.line, t.start, end))
        elif t.token_type in (TokenType.HEX_STRING, TokenType.BYTE_STRING):
            out.append(Tok("hex", t.text, t.line, t.start, end))
        else:
            # Multi-word keywords ("PRIMARY KEY", "CHARACTER SET") become one word each.
            parts = t.text.split()
            if len(parts) > 1 and t.token_type != TokenType.VAR:
                for p in parts:
                    out.append(Tok("word", p, t.line, t.start, end))
            elif t.text in ("(", ")", ",", ".", ";", "="):
                out.append(Tok("punct", t.text, t.line, t.start, end))
            else:
                out.append(Tok("word", t.text, t.line, t.start, end))
    return out


@dataclass(frozen=True, slots=True)
class RawStatement:
    """One `;`-separated statement: its tokens, text, 1-based number and first line."""

    tokens: tuple[Tok, ...]
    text: str
    number: int
    line: int


def split_statements(sql: str) -> list[RawStatement]:
    """Split on `;` tokens (never inside strings or comments); empty statements are dropped."""
    toks = tokenize(sql)
    out: list[RawStatement] = []
    cur: list[Tok] = []
    n = 0
    for t in [*toks, Tok("punct", ";", 0, len(sql), len(sql))]:
        if t.kind == "punct" and t.text == ";":
            if cur:
                n += 1
                text = sql[cur[0].start : cur[-1].end].strip()
                out.append(RawStatement(tuple(cur), text, n, cur[0].line))
            cur = []
        else:
            cur.append(t)
    return out


class Parser:
    """A cursor over one statement's tokens with the small helpers the grammar needs."""

    def __init__(self, toks: tuple[Tok, ...] | list[Tok], default_db: str | None = None) -> None:
        self.toks = list(toks)
        self.i = 0
        self.default_db = default_db

    # -- cursor ---------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def done(self) -> bool:
        return self.i >= len(self.toks)

    def next(self) -> Tok:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end of statement")
        self.i += 1
        return t

    def at(self, *words: str) -> bool:
        """Whether the next tokens are these words (case-insensitive) or punctuation."""
        for k, w in enumerate(words):
            t = self.peek(k)
            if t is None:
                return False
            if t.kind == "punct":
                if t.text != w:
                    return False
            elif t.up != w:
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            t = self.peek()
            got = t.text if t else "end of statement"
            raise ParseError(f"expected {' '.join(words)}, got {got!r}", t)

    def at_punct(self, p: str) -> bool:
        t = self.peek()
        return t is not None and t.kind == "punct" and t.text == p

    # -- names ----------------------------------------------------------------------------
    def ident(self) -> str:
        t = self.next()
        if t.kind in ("ident", "word"):
            return t.text
        if t.kind == "str":  # MySQL accepts 'name' in a few name positions
            return t.text
        raise ParseError(f"expected a name, got {t.text!r}", t)

    def qname(self) -> tuple[str, str]:
        """`db.t` or `t` (db from USE / the message's schema); DB is required."""
        first = self.ident()
        if self.accept("."):
            return first, self.ident()
        if self.default_db is None:
            raise ParseError(f"table {first!r} has no database and no default database")
        return self.default_db, first

    def ident_list(self) -> list[str]:
        self.expect("(")
        names = [self.ident()]
        while self.accept(","):
            names.append(self.ident())
        self.expect(")")
        return names

    # -- skipping -------------------------------------------------------------------------
    def skip_balanced(self) -> str:
        """Consume a parenthesised group; returns its inner text (roughly, tokens joined)."""
        self.expect("(")
        depth = 1
        parts: list[str] = []
        while depth:
            t = self.next()
            if t.kind == "punct" and t.text == "(":
                depth += 1
            elif t.kind == "punct" and t.text == ")":
                depth -= 1
                if depth == 0:
                    break
            parts.append(_tok_sql(t))
        return " ".join(parts)

    def skip_until_comma_or_close(self) -> None:
        """Skip to the next `,` or unmatched `)` at depth 0 (not consumed), or the end."""
        while not self.done():
            if self.at_punct(",") or self.at_punct(")"):
                return
            if self.at_punct("("):
                self.skip_balanced()
            else:
                self.i += 1

    def skip_rest(self) -> None:
        self.i = len(self.toks)


def _tok_sql(t: Tok) -> str:
    if t.kind == "str":
        return "'" + t.text.replace("'", "''") + "'"
    if t.kind == "ident":
        return "`" + t.text.replace("`", "``") + "`"
    if t.kind == "bits":
        return f"b'{t.text}'"
    if t.kind == "hex":
        return f"x'{t.text}'"
    return t.text


# -- types ---------------------------------------------------------------------------------

# Bytes per character, for TEXT(N)/BLOB(N) sizing (MySQL picks the smallest type that fits).
_CHARSET_BYTES = {"binary": 1, "latin1": 1, "ascii": 1, "gbk": 2, "utf8": 3, "utf8mb3": 3}
_TEXT_SIZES = ((255, "tinytext"), (65535, "text"), (16777215, "mediumtext"))
_BLOB_SIZES = ((255, "tinyblob"), (65535, "blob"), (16777215, "mediumblob"))
_TO_BINARY = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}
BINARY_BASES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
_MULTIWORD_TYPES = {
    ("DOUBLE", "PRECISION"): "double",
    ("LONG", "VARCHAR"): "mediumtext",
    ("LONG", "VARBINARY"): "mediumblob",
    ("LONG", "VARCHARACTER"): "mediumtext",
    ("CHARACTER", "VARYING"): "varchar",
    ("CHAR", "VARYING"): "varchar",
    ("NATIONAL", "CHAR"): "char",
    ("NATIONAL", "CHARACTER"): "char",
    ("NATIONAL", "VARCHAR"): "varchar",
    ("NCHAR", "VARCHAR"): "varchar",
    ("NCHAR", "VARYING"): "varchar",
}
KNOWN_BASES = frozenset(
    [
        "tinyint",
        "smallint",
        "mediumint",
        "int",
        "bigint",
        "decimal",
        "float",
        "double",
        "bit",
        "bool",
        "boolean",
        "serial",
        "char",
        "varchar",
        "binary",
        "varbinary",
        "tinytext",
        "text",
        "mediumtext",
        "longtext",
        "tinyblob",
        "blob",
        "mediumblob",
        "longblob",
        "enum",
        "set",
        "date",
        "datetime",
        "timestamp",
        "time",
        "year",
        "json",
        "vector",
        "long",
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    ]
)


@dataclass(slots=True)
class TypeSpec:
    """A parsed column type before it becomes a `Column`."""

    base: str
    args: list[int]
    members: list[str]
    unsigned: bool = False
    charset: str | None = None
    serial: bool = False


def parse_type(p: Parser) -> TypeSpec:
    t = p.next()
    if t.kind not in ("word", "ident"):
        raise ParseError(f"expected a column type, got {t.text!r}", t)
    nxt = p.peek()
    key = (t.text.upper(), nxt.up if nxt else "")
    if key in _MULTIWORD_TYPES:
        p.i += 1
        base = _MULTIWORD_TYPES[key]
    else:
        raw = t.text.lower()
        base = normalize_base(raw) if raw not in ("bool", "boolean", "serial", "long") else raw
        if base == "geomcollection":
            base = "geometrycollection"
    if base not in KNOWN_BASES and normalize_base(base) not in KNOWN_BASES:
        raise ParseError(f"unknown column type {t.text!r}", t)
    spec = TypeSpec(base=base, args=[], members=[])
    if p.at_punct("("):
        p.next()
        if base in ("enum", "set"):
            while True:
                m = p.next()
                if m.kind != "str":
                    raise ParseError(f"expected a quoted {base} member, got {m.text!r}", m)
                spec.members.append(m.text)
                if not p.accept(","):
                    break
        else:
            while True:
                n = p.next()
                if n.kind != "num":
                    raise ParseError(f"expected a number in the type of {base}, got {n.text!r}", n)
                spec.args.append(int(float(n.text)))
                if not p.accept(","):
                    break
        p.expect(")")
    # Type attributes. `BINARY` after a char type is a binary *collation*, not the binary
    # charset, so it does not make the column binary.
    while True:
        if p.accept("UNSIGNED"):
            spec.unsigned = True
        elif p.accept("ZEROFILL"):
            spec.unsigned = True  # ZEROFILL implies UNSIGNED (MySQL and TiDB)
        elif p.accept("SIGNED") or p.accept("BINARY"):
            pass
        elif p.accept("ASCII"):
            spec.charset = "latin1"
        elif p.accept("UNICODE") or p.accept("BYTE"):
            pass
        elif p.at("CHARACTER", "SET") or p.at("CHAR", "SET"):
            p.i += 2
            spec.charset = p.ident().lower()
        elif p.accept("CHARSET"):
            spec.charset = p.ident().lower()
        elif p.accept("COLLATE"):
            p.ident()
        else:
            break
    return spec


def make_column(name: str, spec: TypeSpec, table_charset: str | None = None) -> Column:
    """A `Column` from a parsed type, with MySQL's own normalisations (as SHOW CREATE TABLE)."""
    b, a = spec.base, spec.args
    kw: dict = {"unsigned": spec.unsigned}
    if b in ("bool", "boolean"):
        b, a = "tinyint", [1]
    elif b == "serial":
        b, a, kw["unsigned"] = "bigint", [], True
    elif b == "long":
        b = "mediumtext"
    b = normalize_base(b)
    charset = spec.charset or table_charset
    if charset == "binary" and b in _TO_BINARY:
        b = _TO_BINARY[b]
    if b in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        kw["length"] = a[0] if a else None
    elif b == "decimal":
        kw["precision"] = a[0] if a else 10
        kw["scale"] = a[1] if len(a) > 1 else 0
    elif b in ("float", "double"):
        if b == "float" and len(a) == 1:
            b = "float" if a[0] <= 24 else "double"
        elif len(a) == 2:
            kw["precision"], kw["scale"] = a[0], a[1]
    elif b in ("char", "binary", "bit"):
        kw["length"] = a[0] if a else 1
    elif b in ("varchar", "varbinary"):
        if not a:
            raise ParseError(f"{b} needs a length")
        kw["length"] = a[0]
    elif b in ("text", "blob") and a:
        per_char = 1 if b == "blob" else _CHARSET_BYTES.get(charset or "utf8mb4", 4)
        need = a[0] * per_char
        sizes = _BLOB_SIZES if b == "blob" else _TEXT_SIZES
        b = next(
            (n for limit, n in sizes if need <= limit), "longblob" if b == "blob" else "longtext"
        )
    elif b in ("datetime", "timestamp", "time"):
        kw["fsp"] = a[0] if a else 0
    elif b in ("enum", "set"):
        kw["members"] = tuple(spec.members)
    elif b == "vector" and a:
        kw["length"] = a[0]
    kw["binary"] = b in BINARY_BASES
    return Column(name=name, base=b, **kw)


# -- column definitions ----------------------------------------------------------------------


@dataclass(slots=True)
class ColumnDef:
    """A parsed column definition: the column plus key flags set on the column itself."""

    column: Column
    primary: bool = False
    unique: bool = False


_CURRENT_TS = ("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP")


def parse_default_value(p: Parser) -> str | None:
    """The value after DEFAULT as literal text (strings unquoted); None for NULL."""
    t = p.next()
    if t.kind == "word" and t.text.startswith("_") and p.peek() and p.peek().kind == "str":
        t = p.next()  # charset introducer, e.g. _utf8mb4'x'
    if t.kind == "str":
        return t.text
    if t.kind == "num":
        return t.text
    if t.kind == "punct" and t.text in ("-", "+"):
        n = p.next()
        if n.kind != "num":
            raise ParseError(f"expected a number after {t.text!r}", n)
        return ("-" if t.text == "-" else "") + n.text
    if t.kind == "bits":
        return f"b'{t.text}'"
    if t.kind == "hex":
        return f"x'{t.text}'"
    if t.kind == "punct" and t.text == "(":
        p.i -= 1
        return "(" + p.skip_balanced() + ")"
    if t.up == "NULL":
        return None
    if t.up in ("TRUE", "FALSE"):
        return "1" if t.up == "TRUE" else "0"
    if t.up in _CURRENT_TS:
        fsp = ""
        if p.at_punct("("):
            inner = p.skip_balanced().strip()
            fsp = f"({inner})" if inner and inner != "0" else ""
        return "CURRENT_TIMESTAMP" + fsp
    if t.kind == "word":
        # A function call default such as uuid() (MySQL 8 requires parentheses, TiDB not).
        text = t.text
        if p.at_punct("("):
            text += "(" + p.skip_balanced() + ")"
        return text
    raise ParseError(f"cannot read DEFAULT value {t.text!r}", t)


def _skip_reference(p: Parser) -> None:
    p.qname() if p.default_db else p.ident()
    if p.accept("."):
        p.ident()
    if p.at_punct("("):
        p.skip_balanced()
    while True:
        if p.accept("MATCH"):
            p.next()
        elif p.accept("ON"):
            p.next()  # DELETE/UPDATE
            if p.accept("SET") or p.accept("NO"):
                p.next()
            else:
                p.next()
        else:
            return


def parse_column_def(
    p: Parser, name: str, table_charset: str | None = None, stop: tuple[str, ...] = ()
) -> ColumnDef:
    """Column definition after its name: type and options, up to `,` / `)` / a stop word."""
    spec = parse_type(p)
    col = make_column(name, spec, table_charset)
    out = ColumnDef(col)
    nullable = True
    has_default, default = False, None
    comment = None
    if spec.base == "serial":
        nullable, out.unique = False, True
    while not p.done() and not p.at_punct(",") and not p.at_punct(")"):
        t = p.peek()
        if t.up in stop:
            break
        if p.accept("NOT", "NULL"):
            nullable = False
        elif p.accept("NULL"):
            nullable = True
        elif p.accept("DEFAULT"):
            if p.accept("VALUE"):  # SERIAL DEFAULT VALUE
                continue
            default = parse_default_value(p)
            has_default = True
        elif p.accept("SERIAL", "DEFAULT", "VALUE"):
            nullable, out.unique = False, True
        elif p.accept("AUTO_INCREMENT") or p.accept("AUTO_RANDOM"):
            if p.at_punct("("):
                p.skip_balanced()
        elif p.accept("PRIMARY", "KEY") or p.accept("KEY"):
            out.primary = True
        elif p.accept("UNIQUE"):
            p.accept("KEY") or p.accept("INDEX")
            out.unique = True
        elif p.accept("COMMENT"):
            c = p.next()
            if c.kind != "str":
                raise ParseError("expected a quoted COMMENT", c)
            comment = c.text
        elif p.accept("COLLATE"):
            p.ident()
        elif p.at("CHARACTER", "SET") or p.at("CHAR", "SET"):
            p.i += 2
            p.ident()
        elif p.accept("CHARSET"):
            p.ident()
        elif p.accept("ON", "UPDATE"):
            p.next()
            if p.at_punct("("):
                p.skip_balanced()
        elif p.accept("GENERATED", "ALWAYS", "AS") or p.accept("AS"):
            p.skip_balanced()
        elif p.accept("VIRTUAL") or p.accept("STORED") or p.accept("PERSISTENT"):
            pass
        elif p.accept("COLUMN_FORMAT") or p.accept("STORAGE") or p.accept("SRID"):
            p.next()
        elif p.accept("VISIBLE") or p.accept("INVISIBLE"):
            pass
        elif p.accept("REFERENCES"):
            _skip_reference(p)
        elif p.accept("CONSTRAINT"):
            if not p.at("CHECK"):
                p.ident()
        elif p.accept("CHECK"):
            p.skip_balanced()
        elif p.accept("NOT", "ENFORCED") or p.accept("ENFORCED"):
            pass
        else:
            raise ParseError(f"unknown column option {t.text!r} in column {name!r}", t)
    if out.primary:
        nullable = False
    out.column = col.with_(
        nullable=nullable, has_default=has_default, default=default, comment=comment
    )
    return out


def parse_key_parts(p: Parser) -> list[str] | None:
    """`(a, b(10) DESC, (expr))`: the column names, or None if any part is an expression."""
    p.expect("(")
    names: list[str] | None = []
    while True:
        if p.at_punct("("):
            p.skip_balanced()
            names = None
        else:
            n = p.ident()
            if names is not None:
                names.append(n)
            if p.at_punct("("):
                p.skip_balanced()
        p.accept("ASC") or p.accept("DESC")
        if not p.accept(","):
            break
    p.expect(")")
    return names


# -- CREATE TABLE ---------------------------------------------------------------------------


@dataclass(slots=True)
class CreateTableParse:
    db: str
    table: str
    schema: TableSchema | None  # None for CREATE TABLE ... LIKE
    if_not_exists: bool
    like: tuple[str, str] | None = None


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
    comment = _parse_table_options(p)
    schema = build_schema(db, table, defs, pk, uks, comment, table_charset)
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


def _parse_table_options(p: Parser) -> str | None:
    """Table options after the column list; only COMMENT is kept. Partitioning is ignored."""
    comment = None
    while not p.done():
        if p.accept("COMMENT"):
            p.accept("=")
            c = p.next()
            if c.kind == "str":
                comment = c.text
        elif p.at("PARTITION", "BY"):
            p.skip_rest()
        elif p.at("AS") or p.at("SELECT") or p.at("IGNORE") or p.at("REPLACE"):
            raise ParseError("CREATE TABLE ... SELECT is not supported", p.peek())
        elif p.at_punct("("):
            p.skip_balanced()
        else:
            p.next()
    return comment
