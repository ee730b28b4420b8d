"""Third-party schema-evolution streams (../shared/corpus) through the real runner.

Alibaba-Canal-flavoured Canal-JSON without the TiDB extension (`enable-tidb-extension:
false`): non-zero ids, `old` with the changed columns only, no commit_ts (order from
offsets and `es`), no CREATE TABLE for Paimon's tables (schemas inferred from `mysqlType`).
Expected tables are the upstream projects' test assertions, transcribed in the corpus READMEs.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from tests.shared_paths import SHARED, needs_shared
from tests.spark.engine_harness import (
    load,
    make_project,
    read_target,
    target_schema,
    write_captures,
)
from ticdc_sync.spark import runner

pytestmark = [pytest.mark.spark, needs_shared]

CORPUS = SHARED / "corpus"
NO_EXT = "      enable-tidb-extension: false\n"


def _messages(path: Path) -> list[bytes]:
    return [ln.encode() for ln in path.read_text("utf-8").splitlines() if ln.startswith("{")]


def _feed(root: Path, files: list[Path], start: int) -> int:
    msgs = [m for f in files for m in _messages(f)]
    write_captures(root, "t", [(0, start + i, None, m) for i, m in enumerate(msgs)])
    return start + len(msgs)


def _rows(spark, project, name: str, order: str) -> list[tuple]:
    return [
        tuple(v for k, v in r.items() if k != "_commit_ts")
        for r in read_target(spark, project, name, order)
    ]


def test_seatunnel_canal_ddl_then_dml(spark, tmp_path):
    """CREATE DATABASE, CREATE TABLE (embedded newlines, DEFAULT), ALTER AUTO_INCREMENT, DML."""
    root = make_project(
        tmp_path / "st",
        protocol="canal-json",
        options=NO_EXT,
        tables='  - upstream: "canal_hvygfc.*"\n    name: "{table}"\n',
    )
    _feed(root, [CORPUS / "seatunnel-kafka-e2e" / "canal" / "canal_data.txt"], 0)
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert [c for c, _ in target_schema(spark, project, "products")] == [
        "id",
        "name",
        "description",
        "weight",
        "_commit_ts",
    ]
    assert _rows(spark, project, "products", "id") == [
        (1101, "scooter", "Small 2-wheel scooter", "4.56"),
        (1102, "car battery", "12V car battery", "8.1"),
        (
            1103,
            "12-pack drill bits",
            "12-pack of drill bits with sizes ranging from #40 to #3",
            "0.8",
        ),
        (1104, "hammer", "12oz carpenter's hammer", "0.75"),
        (1105, "hammer", "14oz carpenter's hammer", "0.875"),
        (1106, "hammer", "16oz carpenter's hammer", "1.0"),
        (1107, "rocks", "box of assorted rocks", "7.88"),
        (1108, "jacket", "water resistent black wind breaker", "0.1"),
    ]


def test_paimon_database_schemaevolution(spark, tmp_path):
    """Per-table ADD COLUMN / MODIFY widening on t1 (PK k) and t2 (PK k1,k2), one topic.

    t3 has only Alibaba RDS's hidden key column; Paimon does not assert it, neither do we.
    """
    base = CORPUS / "paimon-kafka" / "canal" / "database" / "schemaevolution"
    root = make_project(
        tmp_path / "pdb",
        protocol="canal-json",
        options=NO_EXT,
        tables='  - upstream: "paimon_sync_database.t[12]"\n    name: "{table}"\n',
    )
    files = [base / f"topic{t}" / f"canal-data-{n}.txt" for n in (1, 2, 3) for t in (0, 1, 2)]
    _feed(root, [f for f in files if f.exists()], 0)
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert target_schema(spark, project, "t1") == [
        ("k", "int"),
        ("v1", "string"),
        ("v2", "bigint"),
        ("_commit_ts", "bigint"),
    ]
    assert _rows(spark, project, "t1", "k") == [
        (1, "one", None),
        (3, "three", None),
        (5, "five", 50),
        (7, "seven", 70),
        (9, "nine", 9000000000000),
    ]
    assert _rows(spark, project, "t2", "k1") == [
        (2, "two", 20, 200, None),
        (4, "four", 40, 400, None),
        (6, "six", 60, 600, "string_6"),
        (8, "eight", 80, 800, "string_8"),
        (10, "ten", 100, 1000, "long_long_string_10"),
    ]


def test_paimon_table_schemaevolution_two_shards_one_target(spark, tmp_path):
    """schema_evolution_1 and _2 merged into one target (Paimon's table sync), 5 files."""
    base = CORPUS / "paimon-kafka" / "canal" / "table" / "schemaevolution"
    root = make_project(
        tmp_path / "ptb",
        protocol="canal-json",
        options=NO_EXT,
        tables=(
            '  - upstream: "paimon_sync_table.schema_evolution_*"\n    name: "se"\n'
            "    keys: [_id]\n"
        ),
    )
    _feed(root, [base / f"canal-data-{n}.txt" for n in (1, 2, 3, 4, 5)], 0)
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert target_schema(spark, project, "se") == [
        ("pt", "int"),
        ("_id", "int"),
        ("v1", "string"),
        ("v2", "bigint"),
        ("v3", "decimal(8,3)"),
        ("v4", "binary"),
        ("v5", "double"),
        ("_commit_ts", "bigint"),
    ]
    rows = _rows(spark, project, "se", "_id")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (1, 1, "one", None),
        (1, 2, "second", None),
        (2, 3, "three", 30000000000),
        (2, 4, "four", None),
        (1, 6, "six", 60),
        (2, 7, "seven", 70000000000),
        (2, 8, "very long string", 80000000000),
        (1, 9, "nine", 90000000000),
    ]
    assert rows[3][4:] == (None, b"four.bin.long", 4.00000000004)
    assert rows[7][4:] == (Decimal("99999.999"), b"nine.bin.long", 9.00000000009)
