"""A table's partitioning (`PARTITION BY ...`): parsed, kept as canonical text in the schema
history, and changed by the partition clauses of ALTER TABLE. `partition_rows` turns it
into the rows a partition holds.

Which partition TiDB puts a row in (pingcap/tidb `table/tables/partition.go`,
`locatePartitionCommon`), as `partition_rows` reproduces it:
- RANGE: the first partition whose bound is above the expression's value; a NULL value goes
  to the first partition. RANGE COLUMNS compares the columns as a tuple, NULL below every
  value and MAXVALUE above every value (`getRangeLocateExprs`).
- LIST: the partition whose list holds the value (NULL only where a list names NULL), else
  the DEFAULT partition. LIST COLUMNS: the partition with a tuple equal to the columns.
- HASH: |int64(expr) % n| (Go's remainder keeps the dividend's sign, then TiDB drops it); a
  NULL value goes to partition 0. LINEAR HASH is built as HASH by TiDB (warning 8200).
- KEY: crc32 (IEEE) over each column's hash key (a NULL column is the byte 0), % n
  (`ForKeyPruning.LocateKeyPartition`). A non-string value's hash key is its text
  (`Datum.ToHashKey`); here only integer columns, whose text is their decimal digits, are
  computed. String columns hash under their collation, and COLUMNS partitioning compares
  strings under it: neither is reproduced, and such a DDL blocks with that reason.
Hash partitions without names are `p0`, `p1`, ... by position (`buildHashPartitionDefinitions`).
TiDB builds a table with subpartitions, or KEY partitioning without columns, as a table
without partitioning (`buildTablePartitionInfo`). Pure Python; no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl import partition_expr as px
from ticdc_sync.ddl.partition_expr import Expr, PartitionError
from ticdc_sync.ddl.tokens import ParseError, Parser, Tok, tok_sql, tokenize


@dataclass(frozen=True, slots=True)
class MaxValue:
    pass


MAXVALUE = MaxValue()
Bound = Expr | MaxValue


@dataclass(frozen=True, slots=True)
class PartitionDef:
    """One partition: its name, and its RANGE bound (one per column) or LIST values (tuples,
    one element each for LIST by expression), or the LIST DEFAULT partition."""

    name: str
    less_than: tuple[Bound, ...] = ()
    values: tuple[tuple[Expr, ...], ...] = ()
    default: bool = False


@dataclass(frozen=True, slots=True)
class Partitioning:
    kind: str  # RANGE | LIST | HASH | KEY
    expr: Expr | None  # RANGE / LIST / HASH by an expression
    columns: tuple[str, ...]  # RANGE COLUMNS / LIST COLUMNS / KEY
    defs: tuple[PartitionDef, ...]

    def sql(self) -> str:
        """Canonical text (kept in the schema history): parsing it gives this value back."""
        kind = self.kind + (" COLUMNS" if self.columns and self.kind in ("RANGE", "LIST") else "")
        if self.expr is not None:
            by = px.expr_sql(self.expr)
        else:
            by = ", ".join(_name(c) for c in self.columns)
        defs = ", ".join(_def_sql(self, d) for d in self.defs)
        return f"PARTITION BY {kind} ({by}) ({defs})"

    def names(self) -> list[str]:
        return [d.name for d in self.defs]

    def index(self, name: str) -> int:
        for i, d in enumerate(self.defs):
            if d.name.lower() == name.lower():
                return i
        raise PartitionError(
            f"partition {name!r} is not one of {', '.join(self.names())} (the schema history "
            "is out of step with upstream)"
        )


def _name(n: str) -> str:
    return "`" + n.replace("`", "``") + "`"


def _def_sql(p: Partitioning, d: PartitionDef) -> str:
    out = f"PARTITION {_name(d.name)}"
    if p.kind == "RANGE":
        bounds = ", ".join(
            "MAXVALUE" if isinstance(b, MaxValue) else px.expr_sql(b) for b in d.less_than
        )
        out += f" VALUES LESS THAN ({bounds})"
    elif p.kind == "LIST":
        if d.default:
            out += " DEFAULT"
        else:
            vals = [
                px.expr_sql(v[0])
                if p.expr is not None
                else "(" + ", ".join(px.expr_sql(x) for x in v) + ")"
                for v in d.values
            ]
            out += f" VALUES IN ({', '.join(vals)})"
    return out


# -- parsing ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parsed:
    """A PARTITION BY clause read from DDL: the partitioning (None: TiDB builds the table
    without any) and the text to keep (canonical; the clause as written where it is not
    understood, so that `read` says why)."""

    partitioning: Partitioning | None
    text: str | None


def parse_clause(p: Parser) -> Parsed:
    """`PARTITION BY ...` at the cursor, to the end of the statement (it comes last)."""
    start = p.i
    try:
        part = _partition_by(p)
    except (ParseError, PartitionError):
        p.i = len(p.toks)
        return Parsed(None, " ".join(tok_sql(t) for t in p.toks[start:]))
    if not p.done():
        raw = " ".join(tok_sql(t) for t in p.toks[start:])
        p.i = len(p.toks)
        return Parsed(None, raw)
    return Parsed(part, part.sql() if part is not None else None)


def read(text: str) -> Partitioning:
    """The partitioning a schema history text describes; `PartitionError` with the reason
    where ticdc-sync does not understand it."""
    try:
        toks = tokenize(text)
    except ParseError as e:
        raise PartitionError(f"the table's partitioning is not understood ({e})") from None
    p = Parser(toks)
    try:
        part = _partition_by(p)
    except ParseError as e:
        where = f" near {e.tok.text!r}" if e.tok is not None else ""
        raise PartitionError(f"the table's partitioning is not understood: {e}{where}") from None
    if part is None or not p.done():
        raise PartitionError("the table's partitioning is not understood")
    return part


def read_schema(schema: TableSchema) -> Partitioning:
    """The partitioning of `schema` as the schema history holds it; `PartitionError` when it
    is not known (a schema seeded without its PARTITION BY, or read from protocol metadata)
    or not understood."""
    if schema.partitioning is None:
        raise PartitionError(
            f"the partitioning of {schema.qualified} is not known here (hint: seed the table "
            "from schema/*.sql with its SHOW CREATE TABLE, PARTITION BY clause included, as it "
            "was before this DDL)"
        )
    return read(schema.partitioning)


def _partition_by(p: Parser) -> Partitioning | None:
    p.expect("PARTITION", "BY")
    p.accept("LINEAR")  # TiDB builds LINEAR HASH / LINEAR KEY as HASH / KEY
    kind = p.next().text.upper()
    if kind not in ("RANGE", "LIST", "HASH", "KEY"):
        raise ParseError(f"unknown partitioning type {kind}")
    expr: Expr | None = None
    columns: tuple[str, ...] = ()
    if kind == "KEY":
        if p.accept("ALGORITHM"):
            p.expect("=")
            p.next()
        columns = _name_list(p)
        if not columns:
            p.i = len(p.toks)
            return None  # KEY() without columns: TiDB builds a table without partitioning
    elif kind in ("RANGE", "LIST") and p.accept("COLUMNS"):
        columns = _name_list(p)
    else:
        p.expect("(")
        expr = px.parse_expr(p)
        p.expect(")")
    if p.at("INTERVAL"):
        raise ParseError("INTERVAL partitioning (TiDB generates its partitions)", p.peek())
    count = None
    if p.accept("PARTITIONS"):
        t = p.next()
        if t.kind != "num" or not t.text.isdigit():
            raise ParseError("expected a partition count", t)
        count = int(t.text)
    if p.at("SUBPARTITION"):
        p.i = len(p.toks)
        return None  # TiDB builds a table with subpartitions without partitioning
    defs: list[PartitionDef] = []
    if p.accept("("):
        while True:
            defs.append(_definition(p, kind, expr is not None))
            if not p.accept(","):
                break
        p.expect(")")
    if kind in ("HASH", "KEY"):
        n = count if count is not None else len(defs) or 1
        defs = [*defs, *(PartitionDef(f"p{i}") for i in range(len(defs), n))]
    elif not defs:
        raise ParseError(f"{kind} partitioning without partition definitions")
    if p.accept("UPDATE", "INDEXES"):
        p.skip_balanced()
    return Partitioning(kind, expr, columns, tuple(defs))


def _name_list(p: Parser) -> tuple[str, ...]:
    p.expect("(")
    out: list[str] = []
    while not p.at_punct(")"):
        out.append(p.ident())
        if not p.accept(","):
            break
    p.expect(")")
    return tuple(out)


def _definition(p: Parser, kind: str, by_expr: bool) -> PartitionDef:
    p.expect("PARTITION")
    name = p.ident()
    d = PartitionDef(name)
    if p.accept("VALUES"):
        if p.accept("LESS", "THAN"):
            if kind != "RANGE":
                raise ParseError("VALUES LESS THAN outside RANGE partitioning")
            if p.accept("MAXVALUE"):
                d = replace(d, less_than=(MAXVALUE,))
            else:
                p.expect("(")
                bounds: list[Bound] = []
                while True:
                    bounds.append(MAXVALUE if p.accept("MAXVALUE") else px.parse_expr(p))
                    if not p.accept(","):
                        break
                p.expect(")")
                d = replace(d, less_than=tuple(bounds))
        elif p.accept("IN"):
            if kind != "LIST":
                raise ParseError("VALUES IN outside LIST partitioning")
            p.expect("(")
            if p.accept("DEFAULT"):
                d = replace(d, default=True)
            else:
                values: list[tuple[Expr, ...]] = []
                while True:
                    values.append(_list_value(p, by_expr))
                    if not p.accept(","):
                        break
                d = replace(d, values=tuple(values))
            p.expect(")")
        else:
            raise ParseError("expected LESS THAN or IN after VALUES", p.peek())
    elif p.accept("DEFAULT"):
        d = replace(d, default=True)
    # Partition options (COMMENT, ENGINE, placement, ...) and subpartitions change no row.
    p.skip_until_comma_or_close()
    return d


def _list_value(p: Parser, by_expr: bool) -> tuple[Expr, ...]:
    if p.at_punct("(") and not by_expr:
        # ( v1, v2 ) of LIST COLUMNS; `(1)` of a one-column list is the same tuple.
        p.next()
        out = [px.parse_expr(p)]
        while p.accept(","):
            out.append(px.parse_expr(p))
        p.expect(")")
        return tuple(out)
    return (px.parse_expr(p),)


def parse_definitions(p: Parser, kind: str, by_expr: bool) -> tuple[PartitionDef, ...]:
    """`(PARTITION ..., PARTITION ...)` at the cursor (ADD / REORGANIZE ... INTO)."""
    p.expect("(")
    out = [_definition(p, kind, by_expr)]
    while p.accept(","):
        out.append(_definition(p, kind, by_expr))
    p.expect(")")
    return tuple(out)


def definitions_text(toks: list[Tok]) -> str:
    return " ".join(tok_sql(t) for t in toks)


# -- ALTER TABLE on the partitioning ---------------------------------------------------------


def add(part: Partitioning, defs_text: str | None, count: int | None) -> Partitioning:
    """ADD PARTITION (defs) or ADD PARTITION PARTITIONS n."""
    if defs_text is not None:
        p = Parser(tokenize(defs_text))
        new = parse_definitions(p, part.kind, part.expr is not None)
    else:
        new = ()
    defs = [*part.defs, *new]
    if count is not None and part.kind in ("HASH", "KEY"):
        defs += [PartitionDef(f"p{i}") for i in range(len(defs), len(part.defs) + count)]
    return replace(part, defs=tuple(defs))


def drop(part: Partitioning, names: tuple[str, ...]) -> Partitioning:
    gone = {part.index(n) for n in names}
    return replace(part, defs=tuple(d for i, d in enumerate(part.defs) if i not in gone))


def reorganize(part: Partitioning, names: tuple[str, ...], defs_text: str | None) -> Partitioning:
    """REORGANIZE PARTITION a, b INTO (defs): the named partitions, which are adjacent,
    replaced in place by the new ones. Without names and INTO, HASH/KEY partitions are
    rebuilt as they are."""
    if not names or defs_text is None:
        return part
    p = Parser(tokenize(defs_text))
    new = parse_definitions(p, part.kind, part.expr is not None)
    where = sorted(part.index(n) for n in names)
    defs = [
        *part.defs[: where[0]],
        *new,
        *(d for i, d in enumerate(part.defs) if i > where[0] and i not in where),
    ]
    return replace(part, defs=tuple(defs))


def coalesce(part: Partitioning, count: int) -> Partitioning:
    """COALESCE PARTITION n: the last n HASH/KEY partitions go (their rows are rehashed)."""
    return replace(part, defs=part.defs[: max(1, len(part.defs) - count)])
