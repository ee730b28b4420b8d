"""Each protocol end to end over the real broker: produce -> `run` -> Delta equals the truth.

A generated TiCDC history (keys and partitions as TiCDC's index-value dispatcher picks
them, at-least-once replays, watermarks arriving late per partition) is produced into a
3-partition topic in two pieces. After the first piece the targets must equal the history
as of the resolved ts the run reached; after the second, the final truth; and the staged
events must hold each Kafka record once (nothing read or applied twice). A third run with
no new messages stages and applies nothing.
"""

from __future__ import annotations

import json
import uuid

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.kafka.helpers import kafka_project, produce_records
from tests.spark.engine_harness import load, read_target
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.spark import runner
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PROTOCOLS = ["canal-json", "debezium", "open-protocol"]


def check_targets(spark, project, truth, schemas, what: str) -> None:
    for qualified, rows in truth.items():
        schema = schemas[qualified]
        got = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(got, rows, schema, f"{what} {qualified}")


def run_results(project) -> dict:
    return json.loads((project.root / "target" / "run_results.json").read_text())


def last_offsets(records) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[f"{r.topic}/{r.partition}"] = max(out.get(f"{r.topic}/{r.partition}", -1), r.offset)
    return out


def assert_each_record_staged_once(spark, project, records) -> None:
    """Every produced record is staged, and no (topic, partition, offset, idx) twice."""
    from pyspark.sql import functions as F

    ev = Staging(spark, warehouse_path(project)).events()
    dup = ev.groupBy("topic", "partition", "offset", "idx").count().where(F.col("count") > 1)
    assert dup.limit(5).collect() == []
    staged = {
        (r.topic, r.partition, r.offset)
        for r in ev.select("topic", "partition", "offset").distinct().collect()
    }
    produced = {(r.topic, r.partition, r.offset) for r in records}
    assert staged == produced


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_protocol_over_kafka_then_only_new_messages(spark, kafka_broker, tmp_path, protocol):
    topic = f"e2e-{protocol}-{uuid.uuid4().hex[:6]}"
    history = generate(
        HistoryConfig(seed=11, transactions=40, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, protocol, topic)
    assert enc.resolved_ts is not None and enc.replays > 0
    first, second = enc.chunks(2)
    kafka_broker.create_topic(topic, partitions=3)
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = kafka_project(
        tmp_path / "p", kafka_broker.bootstrap, protocol=protocol, topic=topic, schema_sql=sql
    )
    project = load(root)
    quiet = lambda s: None  # noqa: E731

    # First piece: the targets equal the history as of the ts this run resolved.
    produce_records(spark, kafka_broker.bootstrap, topic, first)
    assert runner.run(project, spark=spark, out=quiet) == 0
    res1 = run_results(project)
    src1 = res1["sources"]["src"]
    assert src1["partitions"] == last_offsets(first)
    resolved1 = src1["resolved_ts"]
    assert 0 < resolved1 < enc.resolved_ts
    truth1, schemas1 = history.truth(resolved1)
    check_targets(spark, project, truth1, schemas1, f"{protocol} after piece 1")
    assert_each_record_staged_once(spark, project, first)

    # Second piece: only the new records are read; the targets reach the final truth.
    produce_records(spark, kafka_broker.bootstrap, topic, second)
    assert runner.run(project, spark=spark, out=quiet) == 0
    src2 = run_results(project)["sources"]["src"]
    assert src2["partitions"] == last_offsets(enc.records)
    assert src2["resolved_ts"] == enc.resolved_ts
    check_targets(spark, project, enc.truth, enc.schemas, f"{protocol} after piece 2")
    assert_each_record_staged_once(spark, project, enc.records)

    # Nothing new: nothing staged, nothing merged.
    assert runner.run(project, spark=spark, out=quiet) == 0
    res3 = run_results(project)
    assert res3["sources"]["src"]["staged_events"] == 0
    assert res3["targets"], "the run saw no targets"
    for name, t in res3["targets"].items():
        assert (t["inserted"], t["updated"], t["deleted"], t["merges"]) == (0, 0, 0, 0), name
        assert t["applied_ts"] == enc.resolved_ts
