"""TiCDC's large-message handling for the workload encoders: compressed messages
(`large-message-handle-compression`) and messages larger than `max-message-bytes` sent as
TiCDC sends them (`large-message-handle-option`: `claim-check`, `handle-key-only`).

`large_encoder(protocol, options, config)` returns an encoder `encode.TopicProducer`
places like any other; the claim-check files it writes are in `.claims` (file name ->
bytes), for a test to put in a folder or an S3 bucket. Pure Python; deterministic (file
names are UUIDs drawn from the message, not random).

What TiCDC does, from its source (the facts `ticdc_sync.codecs.large_message` cites):

* Every message's value is compressed (Debezium: key too), `snappy` in the block format
  (klauspost `snappy.Encode`: varint length, then the stream) and `lz4` in the frame
  format of pierrec/lz4 v4's Writer (its defaults: 4 MB blocks, independent, a content
  checksum, no content size). A resolved Open Protocol event's empty value is not.
* A message is too large when `len(key) + len(value) + 36` (`common.MaxRecordOverhead`,
  sarama's record overhead) exceeds `max-message-bytes`, plus 24 for an Open Protocol
  event's framing (`open_protocol_encoder.go`); the size is of the compressed value.
* `claim-check`: the compressed message goes to `<uuid>.json` as
  `{"key":<base64|null>,"value":<base64>}` (Go's json.Marshal of []byte; with
  `claim-check-raw-value`, the value's bytes), and the record keeps the handle-key columns
  with the location `<storage URI>/<uuid>.json`: Canal-JSON `_tidb.claimCheckLocation`,
  Open Protocol key `ccl` (pingcap/ticdc writes `"ohk":false` before it, tiflow omits it).
  An Open Protocol file holds the one event framed (version, lengths).
* `handle-key-only`: the record keeps the handle-key columns; Canal-JSON says so in
  `_tidb.onlyHandleKey`, tiflow's Open Protocol in the key's `"ohk":true`, pingcap/ticdc's
  Open Protocol nowhere (`open/codec.go`, TestLargeMessageWithHandle).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from .encode import (
    CanalJsonEncoder,
    DdlChange,
    DebeziumEncoder,
    EncoderOptions,
    Message,
    OpenProtocolEncoder,
    Record,
    RowChange,
    frame,
    record_kind,
)

MAX_RECORD_OVERHEAD = 5 * 5 + 10 + 1  # sarama: 5 varint32s, a varint64, an attribute byte
OPEN_FRAMING = 16 + 8  # an event's two lengths and the batch's version


@dataclass(frozen=True)
class LargeMessageConfig:
    """The changefeed's `[sink.kafka-config.large-message-handle]` and max-message-bytes."""

    option: str = "none"  # none | handle-key-only | claim-check
    compression: str = "none"  # none | snappy | lz4
    storage_uri: str = ""  # claim-check-storage-uri, as the locations name it
    raw_value: bool = False  # claim-check-raw-value (canal-json)
    max_message_bytes: int = 10 * 1024 * 1024
    flavour: str = "tiflow"  # "tiflow" or "ticdc" (pingcap/ticdc): Open Protocol key markers


class MessageTooLarge(Exception):
    """TiCDC's ErrMessageTooLarge: the changefeed would stop."""


# ---------------------------------------------------------------------------------------
# Compression


def snappy_block(data: bytes) -> bytes:
    """The snappy block format (length varint, then the stream), as klauspost writes it."""
    import pyarrow as pa

    return pa.compress(data, codec="snappy", asbytes=True)


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, the LZ4 frame format's checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while i + 16 <= n:
            for j in range(4):
                lane = int.from_bytes(data[i + 4 * j : i + 4 * j + 4], "little")
                v[j] = (rotl((v[j] + lane * p2) & mask, 13) * p1) & mask
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        h = (rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    return h ^ (h >> 16)


def lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame as pierrec/lz4 v4's Writer writes it by default: FLG version 1, blocks
    independent, content checksum; BD 4 MB; each block LZ4-compressed, or stored when that
    is no smaller; an end mark and the content's xxHash32."""
    import pyarrow as pa

    descriptor = bytes([0x64, 0x70])
    out = bytearray(b"\x04\x22\x4d\x18") + descriptor
    out.append((_xxh32(descriptor) >> 8) & 0xFF)
    size = 4 << 20
    for start in range(0, len(data), size):
        block = data[start : start + size]
        packed = pa.compress(block, codec="lz4_raw", asbytes=True)
        if len(packed) < len(block):
            out += len(packed).to_bytes(4, "little") + packed
        else:
            out += (len(block) | 0x80000000).to_bytes(4, "little") + block
    out += b"\x00\x00\x00\x00" + _xxh32(data).to_bytes(4, "little")
    return bytes(out)


def _decompress(data: bytes, codec: str) -> bytes:
    """What `compress` did, undone (for the encoders' own bookkeeping only)."""
    import pyarrow as pa

    if codec == "snappy":
        size = shift = i = 0
        while True:
            size |= (data[i] & 0x7F) << shift
            shift, i = shift + 7, i + 1
            if not data[i - 1] & 0x80:
                break
        return pa.decompress(data, decompressed_size=size, codec="snappy", asbytes=True)
    if codec == "lz4":
        with pa.CompressedInputStream(pa.BufferReader(data), "lz4") as f:
            return f.read()
    return data


def compress(data: bytes, codec: str) -> bytes:
    if codec == "snappy":
        return snappy_block(data)
    if codec == "lz4":
        return lz4_frame(data)
    return data


# ---------------------------------------------------------------------------------------
# Claim-check files


def claim_file_name(seed: str) -> str:
    """`<uuid v4>.json` (claimcheck.NewFileName), the UUID drawn from `seed`."""
    return str(uuid.UUID(bytes=hashlib.md5(seed.encode()).digest(), version=4)) + ".json"


def claim_file(key: bytes | None, value: bytes, raw_value: bool) -> bytes:
    """A claim-check file's bytes (claim_check.go `WriteMessage`)."""
    if raw_value:
        return value

    def b64(b: bytes | None) -> str | None:
        return None if b is None else base64.b64encode(b).decode()

    return json.dumps({"key": b64(key), "value": b64(value)}, separators=(",", ":")).encode()


class _Large:
    """What the three encoders share: the config, the claims written, sizes."""

    config: LargeMessageConfig
    claims: dict[str, bytes]

    def _setup(self, config: LargeMessageConfig) -> None:
        self.config = config
        self.claims = {}

    def _c(self, data: bytes | None) -> bytes | None:
        return None if data is None else compress(data, self.config.compression)

    def _too_large(self, key: bytes | None, value: bytes | None, extra: int = 0) -> bool:
        n = len(key or b"") + len(value or b"") + MAX_RECORD_OVERHEAD + extra
        return n > self.config.max_message_bytes

    def record_kind(self, r: Record) -> str:
        """`encode.record_kind` of a record this encoder wrote (compressed)."""
        plain = r.value
        if plain and not isinstance(self, OpenProtocolEncoder):
            plain = _decompress(plain, self.config.compression)
        protocol = self.protocol  # type: ignore[attr-defined]
        return record_kind(protocol, Record(r.topic, r.partition, r.offset, 0, r.key, plain))

    def _claim(self, key: bytes | None, value: bytes, seed: str) -> str:
        """Write a claim-check file; the location the record names."""
        name = claim_file_name(f"{seed}/{len(self.claims)}")
        self.claims[name] = claim_file(key, value, self.config.raw_value)
        return self.config.storage_uri.rstrip("/") + "/" + name


class LargeCanalJson(_Large, CanalJsonEncoder):
    def __init__(self, options: EncoderOptions | None, config: LargeMessageConfig) -> None:
        CanalJsonEncoder.__init__(self, options)
        self._setup(config)

    def encode_row(self, ch: RowChange, key_only: bool = False, tidb_extra=None) -> Message:
        full = super().encode_row(ch)
        value = self._c(full.value)
        if not self._too_large(None, value):
            return Message(None, value, full.timestamp_ms)
        option = self.config.option
        if option == "handle-key-only":
            m = super().encode_row(ch, key_only=True, tidb_extra={"onlyHandleKey": True})
        elif option == "claim-check":
            assert value is not None
            location = self._claim(None, value, f"{ch.schema.qualified}/{ch.commit_ts}")
            m = super().encode_row(ch, key_only=True, tidb_extra={"claimCheckLocation": location})
        else:
            raise MessageTooLarge(f"{ch.schema.qualified} at {ch.commit_ts}")
        value = self._c(m.value)
        if self._too_large(None, value):
            raise MessageTooLarge(f"{ch.schema.qualified} at {ch.commit_ts}, even key only")
        return Message(None, value, m.timestamp_ms)

    def encode_ddl(self, d: DdlChange) -> Message:
        m = super().encode_ddl(d)
        return Message(m.key, self._c(m.value), m.timestamp_ms)

    def encode_watermark(self, ts: int) -> Message | None:
        m = super().encode_watermark(ts)
        return None if m is None else Message(m.key, self._c(m.value), m.timestamp_ms)


class LargeOpenProtocol(_Large, OpenProtocolEncoder):
    def __init__(self, options: EncoderOptions | None, config: LargeMessageConfig) -> None:
        OpenProtocolEncoder.__init__(self, options)
        self._setup(config)

    def row_event(self, ch: RowChange, key_only: bool = False, key_extra=None):
        key, plain = super().row_event(ch)
        value = self._c(plain)
        assert value is not None
        if not self._too_large(key, value, OPEN_FRAMING):
            return key, value
        option, ticdc = self.config.option, self.config.flavour == "ticdc"
        if option == "claim-check":
            location = self._claim(
                frame(True, [key]), frame(False, [value]), f"{ch.schema.qualified}/{ch.commit_ts}"
            )
            extra: dict[str, Any] = {"ohk": False, "ccl": location} if ticdc else {"ccl": location}
            key, plain = super().row_event(ch, key_only=True, key_extra=extra)
        elif option == "handle-key-only":
            key, plain = super().row_event(
                ch, key_only=True, key_extra=None if ticdc else {"ohk": True}
            )
        else:
            raise MessageTooLarge(f"{ch.schema.qualified} at {ch.commit_ts}")
        value = self._c(plain)
        if self._too_large(key, value, OPEN_FRAMING):
            raise MessageTooLarge(f"{ch.schema.qualified} at {ch.commit_ts}, even key only")
        assert value is not None
        return key, value

    def ddl_event(self, d: DdlChange) -> tuple[bytes, bytes]:
        key, value = super().ddl_event(d)
        return key, compress(value, self.config.compression)


class CompressedDebezium(_Large, DebeziumEncoder):
    """Debezium compresses key and value; TiCDC refuses its large-message options."""

    def __init__(self, options: EncoderOptions | None, config: LargeMessageConfig) -> None:
        DebeziumEncoder.__init__(self, options)
        assert config.option == "none", "TiCDC handles no large Debezium message"
        self._setup(config)

    def _both(self, m: Message | None) -> Message | None:
        return None if m is None else Message(self._c(m.key), self._c(m.value), m.timestamp_ms)

    def encode_row(self, ch: RowChange) -> Message:
        m = self._both(super().encode_row(ch))
        assert m is not None
        return m

    def encode_ddl(self, d: DdlChange) -> Message | None:
        return self._both(super().encode_ddl(d))

    def encode_watermark(self, ts: int) -> Message | None:
        return self._both(super().encode_watermark(ts))


def large_encoder(
    protocol: str, options: EncoderOptions | None, config: LargeMessageConfig
) -> LargeCanalJson | LargeOpenProtocol | CompressedDebezium:
    cls = {
        "canal-json": LargeCanalJson,
        "open-protocol": LargeOpenProtocol,
        "debezium": CompressedDebezium,
    }[protocol]
    return cls(options, config)
