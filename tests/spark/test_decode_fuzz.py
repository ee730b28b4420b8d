"""Adversarial input through decode_records: no crash, every record kept, bad ones explained.

Per protocol, >= 1,000 malformed messages (truncations, random bytes, byte flips, wrong JSON
types, huge numbers, wrong nesting, invalid UTF-8, empty values, null keys, corrupted
Open Protocol lengths) plus valid seeds, in one DataFrame per protocol. Seeded: repeatable.
"""

from __future__ import annotations

import json
import random
import struct

import pytest

from tests.spark._encoders import canal, debezium, open_frames
from ticdc_sync.core import events
from ticdc_sync.core.model import Protocol, Source
from ticdc_sync.spark.staging.decode import decode_records

pytestmark = pytest.mark.spark

N = 1200
WEIRD = [
    None,
    True,
    1,
    -1,
    18446744073709551616,
    1e308,
    "x",
    [],
    [1, [2]],
    {},
    {"a": {"b": []}},
    "\ud800".encode("utf-8", "surrogatepass").decode("latin-1"),
]


def _mutate_json(rng: random.Random, doc: object) -> object:
    """Replace one random node of a JSON document with a weird value."""
    if isinstance(doc, dict) and doc and rng.random() < 0.8:
        k = rng.choice(list(doc))
        return {**doc, k: _mutate_json(rng, doc[k])}
    if isinstance(doc, list) and doc and rng.random() < 0.8:
        i = rng.randrange(len(doc))
        return doc[:i] + [_mutate_json(rng, doc[i])] + doc[i + 1 :]
    return rng.choice(WEIRD)


def _mutate_bytes(rng: random.Random, b: bytes) -> bytes:
    r = rng.random()
    if r < 0.25:
        return b[: rng.randrange(len(b) + 1)]
    if r < 0.45:
        ba = bytearray(b)
        for _ in range(rng.randint(1, 4)):
            if ba:
                ba[rng.randrange(len(ba))] = rng.randrange(256)
        return bytes(ba)
    if r < 0.55:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    if r < 0.65:
        i = rng.randrange(len(b) + 1)
        return b[:i] + b"\xff\xfe\xc3" + b[i:]  # invalid UTF-8
    if r < 0.7:
        return b""
    if r < 0.8:
        return b"[" + b + b"]"  # wrong nesting
    return b + b"\r\n" if r < 0.85 else b'{"x":' * 50 + b"1" + b"}" * 50


def _messages(protocol: Protocol, rng: random.Random) -> list[tuple[bytes | None, bytes | None]]:
    if protocol is Protocol.CANAL_JSON:
        seeds = [
            canal([{"id": "1", "v": "a"}], {"id": "int", "v": "varchar"}),
            canal(
                [{"id": "1", "v": "b"}],
                {"id": "int", "v": "varchar"},
                typ="UPDATE",
                old=[{"v": "a"}],
            ),
            canal([{"id": "1"}], {"id": "int"}, extra_tidb={"onlyHandleKey": True}),
        ]
    elif protocol is Protocol.DEBEZIUM:
        seeds = [
            debezium(
                {"id": 1, "v": "a"},
                fields=[{"field": "id", "type": "int32"}, {"field": "v", "type": "string"}],
            ),
            debezium({"id": 1}, before={"id": 0}, op="u", with_schema=False),
        ]
    else:
        seeds = []
    out: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(N):
        if protocol is Protocol.OPEN_PROTOCOL:
            evs = [
                (
                    {"ts": 10 + j, "scm": "db", "tbl": "t", "t": 1},
                    {"u": {"id": {"t": 3, "f": 11, "v": j}}},
                )
                for j in range(rng.randint(1, 3))
            ]
            if rng.random() < 0.3:
                evs = [(_mutate_json(rng, k), _mutate_json(rng, v)) for k, v in evs]
            k, v = open_frames(evs)
            r = rng.random()
            if r < 0.3:
                k = _mutate_bytes(rng, k)
            elif r < 0.6:
                v = _mutate_bytes(rng, v)
            elif r < 0.7:  # a length field claiming too much or too little
                pos = 8
                k = k[:pos] + struct.pack(">Q", rng.choice([0, 1, 2**63, 2**64 - 1])) + k[pos + 8 :]
            elif r < 0.75:
                k = None
            elif r < 0.8:
                k, v = k + k[8:], v  # key/value count mismatch
            out.append((k, v))
            continue
        doc = json.loads(rng.choice(seeds))
        if rng.random() < 0.5:
            doc = _mutate_json(rng, doc)
        b = json.dumps(doc).encode()
        if rng.random() < 0.6:
            b = _mutate_bytes(rng, b)
        key = None if rng.random() < 0.5 else _mutate_bytes(rng, b'{"payload":{"id":1}}')
        out.append((key, b if rng.random() > 0.02 else None))
    return out


@pytest.mark.parametrize("protocol", list(Protocol))
def test_fuzz(spark, protocol):
    rng = random.Random(f"fuzz-{protocol}")
    msgs = _messages(protocol, rng)
    rows = [("fz", i % 3, i, 0, k, v) for i, (k, v) in enumerate(msgs)]
    df = spark.createDataFrame(rows, events.RECORD_SCHEMA)
    out = decode_records(df, Source("s", protocol, ("fz",)))
    got = out.selectExpr("partition", "offset", "kind", "error", "raw_key", "raw_value").collect()
    seen = {(r.partition, r.offset) for r in got}
    assert seen == {(i % 3, i) for i in range(len(msgs))}
    kinds = {r.kind for r in got}
    assert kinds <= {
        events.KIND_ROW,
        events.KIND_DDL,
        events.KIND_WATERMARK,
        events.KIND_BAD,
        events.KIND_EMPTY,
    }
    bad = [r for r in got if r.kind == events.KIND_BAD]
    assert len(bad) >= 300, len(bad)  # the mutations mostly break messages
    for r in bad:
        assert r.error, r
        orig_k, orig_v = msgs[r.offset]
        assert r.raw_value == orig_v and r.raw_key == orig_k
    assert all(r.error is None for r in got if r.kind != events.KIND_BAD)
