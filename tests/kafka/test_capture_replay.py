"""`capture` then `run` on the captures lands the same tables as `run` on the topic.

One generated Open Protocol history (binary framing: the captures hold base64 lines) is
produced into a 3-partition topic. Project K runs on the topic; project F captures the
topic and runs on the capture files. Both must equal the truth, hence each other.
"""

from __future__ import annotations

import uuid

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.kafka.helpers import kafka_project, produce_records
from tests.kafka.test_e2e_protocols import check_targets
from tests.spark.engine_harness import load, make_project, read_target
from tests.spark.truth import schema_sql
from ticdc_sync.spark import runner
from ticdc_sync.spark.capture import capture

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_capture_then_run_equals_run_on_the_topic(spark, kafka_broker, tmp_path):
    protocol = "open-protocol"
    topic = f"replay-{uuid.uuid4().hex[:6]}"
    history = generate(
        HistoryConfig(seed=31, transactions=30, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, protocol, topic)
    kafka_broker.create_topic(topic, partitions=3)
    produce_records(spark, kafka_broker.bootstrap, topic, enc.records)
    sql = "".join(schema_sql(s) for s in history.initial.values())
    quiet = lambda s: None  # noqa: E731

    on_topic = load(
        kafka_project(
            tmp_path / "k", kafka_broker.bootstrap, protocol=protocol, topic=topic, schema_sql=sql
        )
    )
    assert runner.run(on_topic, spark=spark, out=quiet) == 0

    # Capture with the Kafka project, replay with a files project over the same folder.
    files_root = make_project(
        tmp_path / "f",
        protocol=protocol,
        topic=topic,
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    assert capture(on_topic, out_dir=files_root / "captures", out=quiet, spark=spark) == 0
    on_files = load(files_root)
    assert runner.run(on_files, spark=spark, out=quiet) == 0

    check_targets(spark, on_topic, enc.truth, enc.schemas, "run on the topic")
    check_targets(spark, on_files, enc.truth, enc.schemas, "run on the captures")
    for qualified, schema in enc.schemas.items():
        key = ",".join(schema.handle_key())
        assert read_target(spark, on_files, schema.table, key) == read_target(
            spark, on_topic, schema.table, key
        ), qualified
