"""Column types and column definitions of MySQL/TiDB DDL: `INT UNSIGNED`, `VARCHAR(20) CHARACTER
SET binary`, `DEFAULT ...`, `NOT NULL` and the rest of a column definition, into `Column`s.

Shared by CREATE TABLE (`create_table`), ALTER TABLE (`grammar`) and Debezium's table
descriptions (`debezium`). Pure Python; no pyspark, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.core.datatypes import normalize_base
from ticdc_sync.core.upstream import Column
from ticdc_sync.ddl.tokens import ParseError, Parser

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
    generated: bool = False  # GENERATED ALWAYS AS: computed upstream, never in an export


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
            out.generated = True
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
