"""`capture` writes DESIGN.md §1 capture files from a real topic, appending only new records."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest

from tests.kafka.helpers import produce, transport
from ticdc_sync.core.model import Defaults, Output, Project, Protocol, Source
from ticdc_sync.spark.capture import capture, captured_next
from ticdc_sync.spark.transports.sources import read_capture_records

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _project(root: Path, bootstrap: str, *topics: str) -> Project:
    return Project(
        name="p",
        root=root,
        output=Output(name="dev", transport=transport(bootstrap)),
        defaults=Defaults(),
        sources=(Source("s", Protocol.CANAL_JSON, topics),),
        tables=(),
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_capture_writes_sorted_lines_per_partition_and_appends_only_new(
    spark, kafka_broker, tmp_path
):
    topic = f"cap-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=3)
    produce(
        spark,
        kafka_broker.bootstrap,
        topic,
        [
            (0, b'{"id":1}', '{"v":"é"}'.encode()),
            (2, None, b"tombstone-less"),
            (0, b"k", None),
            (1, b"\x00\xff", b"\x01binary"),
        ],
    )
    project = _project(tmp_path, kafka_broker.bootstrap, topic)
    said: list[str] = []
    assert capture(project, out=said.append, spark=spark) == 0
    folder = tmp_path / "captures" / topic
    assert sorted(p.name for p in folder.iterdir()) == [
        "part-0.jsonl",
        "part-1.jsonl",
        "part-2.jsonl",
    ]
    text0 = (folder / "part-0.jsonl").read_text(encoding="utf-8").splitlines()
    # Sorted keys, DESIGN.md's field names, UTF-8 text kept as text.
    assert text0[0].startswith('{"key": "{\\"id\\":1}", "offset": 0, "partition": 0, "timestamp": ')
    assert text0[0].endswith(', "value": "{\\"v\\":\\"é\\"}"}')
    p0 = _lines(folder / "part-0.jsonl")
    assert [(r["offset"], r["key"], r["value"]) for r in p0] == [
        (0, '{"id":1}', '{"v":"é"}'),
        (1, "k", None),
    ]
    assert all("encoding" not in r for r in p0)
    (p1,) = _lines(folder / "part-1.jsonl")
    assert p1["encoding"] == "base64"
    assert base64.b64decode(p1["key"]) == b"\x00\xff"
    assert base64.b64decode(p1["value"]) == b"\x01binary"
    (p2,) = _lines(folder / "part-2.jsonl")
    assert (p2["key"], p2["value"], p2["partition"], p2["offset"]) == (
        None,
        "tombstone-less",
        2,
        0,
    )
    assert said == [f"{topic}: 4 new record(s) -> {folder} (next offsets 0:2, 1:1, 2:1)"]

    # Again with nothing new: files unchanged.
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    capture(project, out=said.append, spark=spark)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

    # New records are appended after what the files hold; nothing is repeated.
    produce(spark, kafka_broker.bootstrap, topic, [(2, b"a", b"x"), (0, b"b", b"y")])
    capture(project, out=said.append, spark=spark)
    assert [(r["offset"], r["value"]) for r in _lines(folder / "part-0.jsonl")] == [
        (0, '{"v":"é"}'),
        (1, None),
        (2, "y"),
    ]
    assert [r["offset"] for r in _lines(folder / "part-2.jsonl")] == [0, 1]
    assert captured_next(folder) == {0: 3, 1: 1, 2: 2}

    # The files transport reads back exactly what Kafka has.
    back = read_capture_records(spark, tmp_path / "captures", [topic], {})
    kafka_rows = sorted(
        (r.partition, r.offset, r.key, r.value)
        for r in spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", topic)
        .load()
        .collect()
    )
    assert sorted((r.partition, r.offset, r.key, r.value) for r in back.collect()) == kafka_rows


def test_capture_max_records_and_explicit_topics_and_out_dir(spark, kafka_broker, tmp_path):
    topic = f"capmax-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    produce(
        spark,
        kafka_broker.bootstrap,
        topic,
        [(0, b"k", str(i).encode()) for i in range(3)] + [(1, b"k", b"p1")],
    )
    project = _project(tmp_path, kafka_broker.bootstrap, "not-this-one")
    out = tmp_path / "elsewhere"
    capture(project, topics=[topic], out_dir=out, max_records=2, out=lambda s: None, spark=spark)
    assert captured_next(out / topic) == {0: 2}
    capture(project, topics=[topic], out_dir=out, max_records=2, out=lambda s: None, spark=spark)
    assert captured_next(out / topic) == {0: 3, 1: 1}
    assert not (tmp_path / "captures").exists()


def test_interrupted_last_line_is_dropped_and_recaptured(spark, kafka_broker, tmp_path):
    topic = f"capcut-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=1)
    produce(spark, kafka_broker.bootstrap, topic, [(0, b"k", b"a"), (0, b"k", b"b")])
    project = _project(tmp_path, kafka_broker.bootstrap, topic)
    capture(project, out=lambda s: None, spark=spark)
    f = tmp_path / "captures" / topic / "part-0.jsonl"
    whole = f.read_bytes()
    f.write_bytes(whole[: len(whole) - 10])  # a capture killed mid-line
    capture(project, out=lambda s: None, spark=spark)
    assert f.read_bytes() == whole
