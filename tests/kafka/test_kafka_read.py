"""The local broker, and bounded Kafka reads from explicit positions on a real broker."""

from __future__ import annotations

import uuid

import pytest

from tests.kafka.helpers import broker_module, produce, transport
from ticdc_sync.core.errors import UserError
from ticdc_sync.spark.transports.kafka import latest_offsets, list_partitions, read_kafka_records

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _rows(df) -> list[tuple]:
    return sorted((r.topic, r.partition, r.offset, r.key, r.value) for r in df.collect())


def test_broker_stop_and_restart_on_same_port_keeps_topics(spark, tmp_path):
    km = broker_module()
    broker = km.KafkaBroker(tmp_path / "kafka", die_with_parent=True)
    try:
        bootstrap = broker.start()
        assert bootstrap == f"127.0.0.1:{broker.port}"
        broker.create_topic("kept", partitions=2)
        produce(spark, bootstrap, "kept", [(1, b"k", b"v")])
        broker.stop()
        assert not broker.running
        assert not km._api_versions_ok(broker.port, timeout=1)
        assert broker.restart() == bootstrap
        t = transport(bootstrap)
        assert list_partitions(spark, t, ("kept",)) == {"kept": [0, 1]}
        assert latest_offsets(spark, t, {"kept": [0, 1]}) == {("kept", 0): 0, ("kept", 1): 1}
    finally:
        broker.close()
    assert not broker.running
    assert (tmp_path / "kafka").exists()  # a data dir given by the caller is kept


def test_read_exactly_the_records_then_only_new_ones(spark, kafka_broker):
    topic = _topic("orders")
    kafka_broker.create_topic(topic, partitions=3)
    first = [
        (0, b"k0", b"a"),
        (1, b"k1", b"b"),
        (2, None, b"c"),
        (0, b"k0", b"d"),
        (2, b"k2", b"\xff\x00binary"),
        (1, b"k1", None),
    ]
    produce(spark, kafka_broker.bootstrap, topic, first)
    t = transport(kafka_broker.bootstrap)

    df, ends = read_kafka_records(spark, t, (topic,), None, {})
    assert df.schema.simpleString() == (
        "struct<topic:string,partition:int,offset:bigint,timestamp:bigint,key:binary,value:binary>"
    )
    assert _rows(df) == [
        (topic, 0, 0, b"k0", b"a"),
        (topic, 0, 1, b"k0", b"d"),
        (topic, 1, 0, b"k1", b"b"),
        (topic, 1, 1, b"k1", None),
        (topic, 2, 0, None, b"c"),
        (topic, 2, 1, b"k2", b"\xff\x00binary"),
    ]
    assert all(r.timestamp > 1_600_000_000_000 for r in df.collect())  # epoch milliseconds
    assert ends == {(topic, 0): 2, (topic, 1): 2, (topic, 2): 2}

    # Nothing new: an empty frame and the same positions.
    df2, ends2 = read_kafka_records(spark, t, (topic,), None, ends)
    assert df2.count() == 0 and ends2 == ends

    produce(spark, kafka_broker.bootstrap, topic, [(1, b"k1", b"e"), (1, b"k1", b"f")])
    df3, ends3 = read_kafka_records(spark, t, (topic,), None, ends)
    assert _rows(df3) == [(topic, 1, 2, b"k1", b"e"), (topic, 1, 3, b"k1", b"f")]
    assert ends3 == {(topic, 0): 2, (topic, 1): 4, (topic, 2): 2}

    # The frame is bounded by the offsets fetched at call time: later records stay out.
    produce(spark, kafka_broker.bootstrap, topic, [(0, b"k0", b"late")])
    assert _rows(df3) == [(topic, 1, 2, b"k1", b"e"), (topic, 1, 3, b"k1", b"f")]

    # A partial start: only partition 0 known; the others begin at starting_offsets.
    df4, _ = read_kafka_records(spark, t, (topic,), None, {(topic, 0): 2})
    assert [(r.partition, r.offset) for r in df4.orderBy("partition", "offset").collect()] == [
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 0),
        (2, 1),
    ]


def test_topic_pattern_and_latest_starting_offsets(spark, kafka_broker):
    tag = uuid.uuid4().hex[:6]
    a, b, other = f"cdc-{tag}-a", f"cdc-{tag}-b", f"x-cdc-{tag}-c"
    for name in (a, b, other):
        kafka_broker.create_topic(name, partitions=1)
        produce(spark, kafka_broker.bootstrap, name, [(0, b"k", name.encode())])
    t = transport(kafka_broker.bootstrap)
    df, ends = read_kafka_records(spark, t, None, f"cdc-{tag}-.*", {})
    assert sorted(r.value for r in df.collect()) == [a.encode(), b.encode()]
    assert ends == {(a, 0): 1, (b, 0): 1}

    latest = transport(kafka_broker.bootstrap)
    latest = type(latest)(
        latest.kind, bootstrap_servers=latest.bootstrap_servers, starting_offsets="latest"
    )
    df2, ends2 = read_kafka_records(spark, latest, (a,), None, {})
    assert df2.count() == 0 and ends2 == {(a, 0): 1}


def test_missing_topic_is_a_user_error(spark, kafka_broker):
    with pytest.raises(UserError, match="has no topic"):
        read_kafka_records(spark, transport(kafka_broker.bootstrap), ("no-such-topic",), None, {})


def test_retention_gap_is_an_error_naming_it(spark, kafka_broker):
    topic = _topic("gap")
    kafka_broker.create_topic(topic, partitions=2)
    produce(spark, kafka_broker.bootstrap, topic, [(0, b"k", str(i).encode()) for i in range(5)])
    kafka_broker.delete_records(topic, {0: 3})
    t = transport(kafka_broker.bootstrap)

    with pytest.raises(UserError) as err:
        read_kafka_records(spark, t, (topic,), None, {(topic, 0): 1, (topic, 1): 0})
    msg = str(err.value)
    assert f"topic {topic} partition 0" in msg
    assert "next offset to read is 1" in msg
    assert "earliest offset Kafka still has is 3" in msg
    assert "2 record(s) gone" in msg
    assert "retention.ms" in msg and "hint" in msg
    assert f"{topic} partition 1" not in msg

    # At or after the log start is fine; a new reader starts at what is left.
    df, ends = read_kafka_records(spark, t, (topic,), None, {(topic, 0): 3})
    assert [r.value for r in df.orderBy("offset").collect()] == [b"3", b"4"]
    assert ends == {(topic, 0): 5, (topic, 1): 0}
    df2, _ = read_kafka_records(spark, t, (topic,), None, {})
    assert [r.offset for r in df2.orderBy("offset").collect()] == [3, 4]


def test_position_beyond_the_log_end_is_an_error(spark, kafka_broker):
    topic = _topic("ahead")
    kafka_broker.create_topic(topic, partitions=1)
    with pytest.raises(UserError, match="fewer records than ticdc-sync already consumed"):
        read_kafka_records(
            spark, transport(kafka_broker.bootstrap), (topic,), None, {(topic, 0): 7}
        )


def test_unreachable_broker_error_does_not_leak_secrets(spark):
    km = broker_module()
    t = transport(
        f"127.0.0.1:{km.free_port()}",
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u" password="hunter2-secret";',
            "request.timeout.ms": "2000",
            "default.api.timeout.ms": "3000",
        },
    )
    with pytest.raises(UserError) as err:
        read_kafka_records(spark, t, ("x",), None, {})
    msg = str(err.value)
    assert "hunter2" not in msg
    assert "'sasl.jaas.config': '****'" in msg
    assert "'security.protocol': 'SASL_PLAINTEXT'" in msg
