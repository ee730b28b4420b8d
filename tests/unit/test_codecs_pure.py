"""Pure parts of decoding: Open Protocol framing split, col_meta inference, codec dispatch."""

from __future__ import annotations

import struct

from ticdc_sync import codecs
from ticdc_sync.codecs import canal_json, debezium, infer, open_protocol
from ticdc_sync.codecs.open_framing import split_open_protocol
from ticdc_sync.core.model import Protocol, SourceOptions
from ticdc_sync.core.upstream import Column


def _frame(*parts: bytes) -> bytes:
    return b"".join(struct.pack(">Q", len(p)) + p for p in parts)


def test_split_batch_resolved_empty_and_errors():
    key = struct.pack(">Q", 1) + _frame(b'{"ts":1,"t":3}', b'{"ts":2,"t":3}')
    assert split_open_protocol(key, _frame(b"", b"")) == [
        (0, '{"ts":1,"t":3}', "", None),
        (1, '{"ts":2,"t":3}', "", None),
    ]
    assert split_open_protocol(struct.pack(">Q", 1), b"") == [(0, None, None, None)]  # empty batch
    assert "version 2" in split_open_protocol(struct.pack(">Q", 2), b"")[0][3]
    assert "shorter" in split_open_protocol(b"\x00\x01", b"")[0][3]
    assert "without a Kafka key" in split_open_protocol(None, b"")[0][3]
    assert (
        "1 events but the value has 0"
        in split_open_protocol(struct.pack(">Q", 1) + _frame(b"{}"), b"")[0][3]
    )
    truncated = struct.pack(">Q", 1) + struct.pack(">Q", 99) + b"{}"
    assert "claims 99 bytes" in split_open_protocol(truncated, b"")[0][3]
    bad_utf8 = split_open_protocol(struct.pack(">Q", 1) + _frame(b"{}"), _frame(b"\xff"))
    assert "not UTF-8" in bad_utf8[0][3]


def test_infer_canal_open_debezium():
    c = infer.column_from_meta(Protocol.CANAL_JSON, "a", "bigint unsigned")
    assert (c.base, c.unsigned, c.exact) == ("bigint", True, True)
    e = infer.column_from_meta(Protocol.CANAL_JSON, "e", "enum('x','y''z')")
    assert e.members == ("x", "y'z")
    assert not infer.column_from_meta(Protocol.CANAL_JSON, "e", "enum").exact
    d = infer.column_from_meta(Protocol.CANAL_JSON, "d", "decimal")
    assert (d.precision, d.scale, d.exact) == (38, 18, False)
    o = infer.column_from_meta(
        Protocol.OPEN_PROTOCOL, "o", "8,137"
    )  # bigint, unsigned|PK|binary bit
    assert (o.base, o.unsigned, o.binary) == ("bigint", True, False)
    assert infer.column_from_meta(Protocol.OPEN_PROTOCOL, "b", "252,1").base == "blob"
    assert infer.column_from_meta(Protocol.OPEN_PROTOCOL, "t", "252,0").base == "text"
    assert infer.column_from_meta(Protocol.OPEN_PROTOCOL, "v", "15,1").base == "varbinary"
    z = infer.column_from_meta(
        Protocol.DEBEZIUM, "z", '{"type":"int64","tidb_type":"bigint unsigned","optional":false}'
    )
    assert (z.base, z.unsigned, z.nullable) == ("bigint", True, False)
    s = infer.column_from_meta(
        Protocol.DEBEZIUM,
        "s",
        '{"type":"string","name":"io.debezium.data.EnumSet","parameters":{"allowed":"a,b"}}',
    )
    assert (s.base, s.members) == ("set", ("a", "b"))
    t = infer.column_from_meta(
        Protocol.DEBEZIUM, "t", '{"type":"int64","name":"io.debezium.time.MicroTimestamp"}'
    )
    assert (t.base, t.fsp) == ("datetime", 6)
    schema = infer.schema_from_meta("db", "t", {"id": "int", "v": "varchar"}, ["id"])
    assert schema.column_names() == ("id", "v") and schema.primary_key == ("id",) and schema.exact
    assert infer.detect_protocol("3,11") is Protocol.OPEN_PROTOCOL


def test_dispatch_and_sql_text():
    opts = SourceOptions(time_zone="+08:00")
    col = Column("ts", "timestamp")
    assert codecs.module_for("canal-json") is canal_json
    assert codecs.module_for(Protocol.DEBEZIUM) is debezium
    assert codecs.module_for("open-protocol") is open_protocol
    sql = codecs.value_sql(Protocol.CANAL_JSON, col, "after['ts']", opts)
    assert "' +08:00'" in sql and "TIMESTAMP" in sql
    enum = Column("e", "enum", members=("it's",))
    assert "'it\\'s'" in codecs.value_sql("canal-json", enum, "x", opts)
    assert codecs.fits_sql("canal-json", Column("s", "varchar"), "x", opts) == "true"
