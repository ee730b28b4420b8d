"""MySQL/TiDB DDL text into tokens and statements, and the cursor the grammar reads them with.

Tokens come from sqlglot's MySQL tokenizer (it handles backticks, string escapes, `b'..'`,
`x'..'` and comments, including TiDB's `/*T![clustered_index] CLUSTERED */`, which it drops as
comments). The grammar on top (`columns`, `create_table`, `grammar`) is our own small
recursive-descent parser, because sqlglot 30 falls back to an unparsed `exp.Command` for most
MySQL DDL (ALTER TABLE with column positions, `text(N)`, `CHARACTER SET binary`, partition
clauses, RENAME TABLE, ...). sqlglot is imported nowhere else in the project. Pure Python; no
pyspark, no I/O; knows no statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

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
            parts.append(tok_sql(t))
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


def tok_sql(t: Tok) -> str:
    """A token as SQL text again (strings and names quoted)."""
    if t.kind == "str":
        return "'" + t.text.replace("'", "''") + "'"
    if t.kind == "ident":
        return "`" + t.text.replace("`", "``") + "`"
    if t.kind == "bits":
        return f"b'{t.text}'"
    if t.kind == "hex":
        return f"x'{t.text}'"
    return t.text
