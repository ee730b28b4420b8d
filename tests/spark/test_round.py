"""The round (`spark.apply.rounds`): small `mirror` targets due together get their files from one
Spark job and commit one by one, and each ends exactly as the MERGE would leave it.

- Generated histories of every protocol (every column type the round carries, composite
  keys, key moves, deletes and re-inserts, replays, ADD/DROP COLUMN between segments), run in
  one run and in many: every target equals the truth, and its segments were landed by the
  round (the files it writes are named so).
- A value that does not fit leaves the round for the rewrite, which applies the policy: the
  same error, naming topic/partition/offset, or the same quarantine.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from testkit.history import HistoryConfig, default_tables, encode, generate
from tests.spark.engine_harness import (
    canal_row,
    canal_watermark,
    load,
    make_project,
    read_target,
    write_captures,
)
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.core.datatypes import delta_type
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply.round_arrow import ROUND_FILE
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark


def _round_tables():
    """The history's tables without their BINARY columns (which keep a target on the
    rewrite: `write_path.ROUND_TYPES`)."""
    return tuple(
        replace(t, columns=tuple(c for c in t.columns if delta_type(c) != "BINARY"))
        for t in default_tables()
    )


def _round_files(loc: Path) -> int:
    """How many files the round wrote that the table's log adds."""
    n = 0
    for f in (loc / "_delta_log").glob("*.json"):
        for line in f.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and f"-{ROUND_FILE}." in add["path"]:
                n += 1
    return n


@pytest.mark.parametrize("protocol", ["canal-json", "debezium", "open-protocol"])
def test_the_round_lands_generated_histories_exactly(spark, tmp_path, protocol):
    history = generate(
        HistoryConfig(
            seed=23,
            tables=_round_tables(),
            transactions=60,
            partitions=3,
            dispatch="index-value",
            ddl_count=2,
        )
    )
    enc = encode(history, protocol, "cdc")
    assert enc.replays > 0
    root = make_project(
        tmp_path / "p",
        protocol=protocol,
        topic="cdc",
        schema_sql="".join(schema_sql(s) for s in history.initial.values()),
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    project = load(root)
    chunks = enc.chunks(3)
    write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunks[0]])
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    for chunk in chunks[1:]:
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
    wh = warehouse_path(project)
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"{protocol} {qualified}")
        assert _round_files(Path(target_location(wh, schema.table))) > 0, qualified


SCHEMA = "CREATE TABLE shop.a (id INT PRIMARY KEY, v SMALLINT);\nCREATE TABLE shop.b (id INT PRIMARY KEY, v SMALLINT);\n"
TYPES = {"id": "int", "v": "smallint"}


def _bad_value_project(tmp_path: Path, policy: str) -> Path:
    root = make_project(
        tmp_path / policy,
        protocol="canal-json",
        schema_sql=SCHEMA,
        defaults=f"defaults:\n  on_bad_message: {policy}\n",
    )
    ts = 400_000 << 18
    write_captures(
        root,
        "t",
        [
            (
                0,
                0,
                None,
                canal_row("shop", "a", "INSERT", ts, {"id": "1", "v": "7"}, TYPES, ["id"]),
            ),
            (
                0,
                1,
                None,
                canal_row("shop", "b", "INSERT", ts, {"id": "1", "v": "8"}, TYPES, ["id"]),
            ),
            # 70000 does not fit a SMALLINT.
            (
                0,
                2,
                None,
                canal_row("shop", "b", "INSERT", ts + 1, {"id": "2", "v": "70000"}, TYPES, ["id"]),
            ),
            (0, 3, None, canal_watermark(ts + 10)),
        ],
    )
    return root


def test_a_value_that_does_not_fit_leaves_the_round_for_the_rewrite_s_policy(spark, tmp_path):
    lines: list[str] = []
    project = load(_bad_value_project(tmp_path, "fail"))
    assert runner.run(project, spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    assert "value does not fit its column: v = 70000" in text, text
    assert "t/0/2 table shop.b" in text, text
    # The other target of the round landed.
    assert read_target(spark, project, "a", "id") == [
        {"id": 1, "v": 7, "_commit_ts": 400_000 << 18}
    ]

    project = load(_bad_value_project(tmp_path, "quarantine"))
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert [r["id"] for r in read_target(spark, project, "b", "id")] == [1]
    assert [r["id"] for r in read_target(spark, project, "a", "id")] == [1]
    q = spark.read.format("delta").load(
        str(Path(warehouse_path(project)) / "_ticdc_sync" / "quarantine")
    )
    assert [r["offset"] for r in q.collect()] == [2]
