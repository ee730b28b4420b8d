"""The engine against generated TiCDC histories: every protocol, one run and many small runs.

Histories (testkit.history) have many transactions over several tables and
partitions, key moves, deletes and re-inserts, at-least-once replays after watermarks and
watermarks arriving at different times per partition; their truth is each table as of the
resolved ts. The Delta targets must equal it exactly.
"""

from __future__ import annotations

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

PROTOCOLS = ["canal-json", "debezium", "open-protocol"]


def _project(tmp_path, protocol, enc, history):
    sql = "".join(schema_sql(s) for s in history.initial.values())
    return make_project(
        tmp_path / protocol,
        protocol=protocol,
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )


def _check(spark, project, enc):
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"{enc.protocol} {qualified}")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_history_one_run_then_many_small_runs(spark, tmp_path, protocol):
    history = generate(
        HistoryConfig(seed=7, transactions=60, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, protocol, "cdc")
    assert enc.replays > 0
    # One run over everything.
    root = _project(tmp_path / "one", protocol, enc, history)
    write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in enc.records])
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    _check(spark, project, enc)
    # The same stream in three pieces, one run after each.
    root = _project(tmp_path / "many", protocol, enc, history)
    project = load(root)
    for chunk in enc.chunks(3):
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
    _check(spark, project, enc)
