"""The canal-ddl-meta oracle: replay each test_N.sql, compare with MySQL's mysql_N.sql result."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.shared_paths import SHARED, needs_shared
from ticdc_sync.core.model import Defaults, Output, Project
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl import parse_ddl, parse_schema_sql
from ticdc_sync.ddl.statements import Unknown
from ticdc_sync.ddl.timeline import replay_script
from ticdc_sync.ddl.tokens import split_statements

pytestmark = needs_shared

CORPUS = SHARED / "corpus/canal-ddl-meta"
EMPTY = Project("p", Path("."), Output("dev"), Defaults(), (), ())
INT_TYPES = ("tinyint", "smallint", "mediumint", "int", "bigint")

# Cases we do not reproduce, each with its reason. The test fails if one starts passing.
UNSUPPORTED = {
    # MySQL 5.7 with explicit_defaults_for_timestamp=OFF makes a TIMESTAMP column without an
    # explicit NULL into NOT NULL. TiDB behaves as explicit_defaults_for_timestamp=ON, which
    # is what ticdc-sync follows, so the column stays nullable here.
    "alter/3": "legacy TIMESTAMP NOT NULL (explicit_defaults_for_timestamp=OFF)",
    "alter/22": "legacy TIMESTAMP NOT NULL (explicit_defaults_for_timestamp=OFF)",
    "alter/35": "legacy TIMESTAMP NOT NULL (explicit_defaults_for_timestamp=OFF)",
    "alter/62": "legacy TIMESTAMP NOT NULL (explicit_defaults_for_timestamp=OFF)",
    "alter/65": "legacy TIMESTAMP NOT NULL (explicit_defaults_for_timestamp=OFF)",
}


def _cases() -> list[str]:
    out = []
    for folder in ("alter", "table"):
        for f in (CORPUS / folder).glob("test_*.sql"):
            num = re.findall(r"\d+", f.name)[0]
            out.append(f"{folder}/{num}")
    return sorted(out, key=lambda c: (c.split("/")[0], int(c.split("/")[1])))


def _shape(t: TableSchema) -> tuple:
    # Integer display widths are not compared: MySQL 8 drops them and Delta ignores them.
    cols = [
        (
            c.name.lower(),
            c.base + (" unsigned" if c.unsigned else "") if c.base in INT_TYPES else c.type_sql(),
            c.nullable,
        )
        for c in t.columns
    ]
    pk = tuple(n.lower() for n in t.primary_key)
    uks = sorted(tuple(n.lower() for n in u) for u in t.unique_keys)
    return cols, pk, uks


def _first_block(text: str) -> str:
    """The `table/` scripts repeat one block of statements three times, while mysql_N.sql is
    the result of a single pass (the repeats fail in MySQL: the tables already exist), so
    only the first block is replayed. Scripts without repetition are replayed whole."""
    raw = [r.text for r in split_statements(text)]
    n = len(raw)
    per = next((p for p in range(1, n + 1) if n % p == 0 and raw == raw[:p] * (n // p)), n)
    return ";\n".join(raw[:per])


def _replay(case: str) -> str | None:
    folder, n = case.split("/")
    script = (CORPUS / folder / f"test_{n}.sql").read_text()
    expected_file = CORPUS / folder / f"mysql_{n}.sql"
    expected = {
        (t.db.lower(), t.table.lower()): t
        for t in parse_schema_sql(expected_file.read_text(), "test", str(expected_file))
    }
    for stmt in parse_ddl(_first_block(script), "test", None):
        if isinstance(stmt, Unknown):
            return f"unknown statement: {stmt.reason}: {stmt.sql[:80]}"
    tables = replay_script(EMPTY, _first_block(script), "test")
    if set(tables) != set(expected):
        return f"tables differ: {sorted(set(tables) ^ set(expected))}"
    for key, exp in expected.items():
        got = _shape(tables[key])
        if got != _shape(exp):
            return f"{key}: {got} != {_shape(exp)}"
    return None


@pytest.mark.parametrize("case", _cases())
def test_canal_ddl_meta(case: str) -> None:
    problem = _replay(case)
    if case in UNSUPPORTED:
        assert problem is not None, f"{case} now passes: remove it from UNSUPPORTED"
    else:
        assert problem is None, problem


def test_corpus_is_complete() -> None:
    assert len(_cases()) == 119
