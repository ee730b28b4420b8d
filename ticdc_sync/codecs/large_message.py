"""TiCDC's large-message handling undone, one record (Open Protocol: one event) at a time:
values decompressed (`large-message-handle-compression`) and claim-check records replaced by
the message TiCDC wrote to its claim-check storage.

Pure Python (pyarrow's codecs), used inside Spark tasks (`spark.staging.large_messages`)
and by tests; the storage is read through the `read` function it is given (file name ->
bytes, `core.claim_store.ClaimStore.read`). Never raises on bad input: a problem comes back
as the reason the record is a bad message, naming the claim-check location and file. A
storage that cannot be read at all (any OSError of `read` but FileNotFoundError, such as
`claim_store.StorageError`) is not bad input: it propagates, and the batch is not staged.
Must not parse rows (Spark's `from_json` does) nor decide what a bad record becomes. It
also holds the reasons the decoders give for a handle-key-only message and for a
claim-check one on a source that does not read them (`HANDLE_KEY_ONLY`, `CLAIM_CHECK`).

Facts, from TiCDC's source (tiflow and pingcap/ticdc):

* Compression (`pkg/compression/compress.go`): `snappy` is the snappy block format
  (`klauspost/compress/snappy.Encode`: a varint of the decompressed length, then the
  stream), `lz4` the LZ4 frame format (`pierrec/lz4/v4` Writer). Canal-JSON compresses
  every message's value, DDL and watermarks included (`canal_json_row_event_encoder.go`,
  ticdc `canal_json_encoder.go`); Open Protocol each event's value, not the key nor the
  8-byte lengths, and not a resolved event's empty value (`open_protocol_encoder.go`,
  ticdc `open/codec.go`); Debezium the key and the value (`debezium/encoder.go`).
* Claim-check (`pkg/sink/kafka/claimcheck/claim_check.go` `WriteMessage`): the file holds
  Go's `json.Marshal` of `ClaimCheckMessage{Key []byte "key"; Value []byte "value"}`
  (`pkg/sink/codec/common/message.go`): `{"key":<base64 or null>,"value":<base64>}`; with
  `claim-check-raw-value` (canal-json only) the value's bytes alone. The value is the
  message as it would have been sent, compressed.
  - Canal-JSON: the key is null; the record left in Kafka carries the handle-key columns and
    `_tidb.claimCheckLocation` (`newClaimCheckLocationMessage`); the file's value is the
    whole message.
  - Open Protocol: the record's event key carries `ccl` (tiflow omits `ohk`, pingcap/ticdc
    writes `"ohk":false` beside it), its value the handle-key columns; the file's key is
    the framed one-event key (8-byte version 1, 8-byte length, key JSON) and its value the
    framed event value (8-byte length, value), as `open/decoder.go`
    `assembleEventFromClaimCheckStorage` reads them back.
* The location's file part names the file (`core.claim_store.file_name`).

ticdc-sync also checks that the claimed message is the record's own (same table and
commit_ts): a file read from the wrong storage would otherwise land silently.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass

from ticdc_sync.core.claim_store import file_name, shown
from ticdc_sync.core.model import Compression

Read = Callable[[str], bytes]

OPTION_HINT = "TiCDC large-message-handle-option=claim-check"
RECONFIGURE = (
    "update the changefeed with large-message-handle-option=claim-check and set it and "
    "claim-check-storage-uri on the source (docs/kafka.md, Large messages), then re-sync the "
    "table"
)
# A message TiCDC cut down to its handle-key columns (`_tidb.onlyHandleKey`, Open Protocol
# key `ohk`, codec facts 0.7): TiCDC's consumer re-reads the row from TiDB at its commit_ts
# (tiflow canal_json_decoder.go `assembleHandleKeyOnlyRowChangedEvent`); ticdc-sync has no
# TiDB to read from, so it is a bad message, never a row with NULL columns.
HANDLE_KEY_ONLY = (
    "message carries only the handle-key columns (TiCDC large-message-handle-option="
    "handle-key-only): the row would have to be re-read from TiDB at its commit_ts, which "
    "ticdc-sync cannot do; " + RECONFIGURE
)
# The decoders' reasons (`spark.staging.decode`). A claim-check record reaches a decoder
# only from a source without claim-check set (it is replaced by the claimed message
# otherwise).
CLAIM_CHECK = (
    "claim-check message (TiCDC large-message-handle-option=claim-check) on a source that "
    "does not set large-message-handle-option: claim-check; set it and "
    "claim-check-storage-uri on the source as the changefeed has them"
)

# Snappy's densest copy (a 2-byte op for up to 11 bytes, 3 bytes for 64) expands a stream
# less than 32 times: a larger length in its header is not a snappy block.
_SNAPPY_MAX_RATIO = 32


def _varint(data: bytes) -> tuple[int, int]:
    """A little-endian base-128 varint at the start of `data`: (value, bytes used)."""
    n = shift = 0
    for i, b in enumerate(data[:10]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, i + 1
        shift += 7
    raise ValueError("no snappy length header")


def decompress(data: bytes, codec: Compression) -> bytes:
    """`data` decompressed by `codec`; ValueError saying why it cannot be."""
    if codec is Compression.NONE:
        return data
    import pyarrow as pa

    try:
        if codec is Compression.SNAPPY:
            size, used = _varint(data)
            if size > _SNAPPY_MAX_RATIO * (len(data) - used) + 64:
                raise ValueError(f"its header claims {size} bytes")
            return pa.decompress(data, decompressed_size=size, codec="snappy", asbytes=True)
        with pa.CompressedInputStream(pa.BufferReader(data), "lz4") as s:
            return s.read()
    except Exception as e:  # noqa: BLE001 - pyarrow's codec errors, as a reason
        what = "a snappy block" if codec is Compression.SNAPPY else "an lz4 frame"
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"not {what} ({reason})") from None


def claimed(content: bytes, raw_value: bool) -> tuple[bytes | None, bytes]:
    """The (key, value) TiCDC claimed in a claim-check file; ValueError when the file is not
    one."""
    if raw_value:
        return None, content
    try:
        obj = json.loads(content)
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested too deep
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("value"), str):
        raise ValueError('not TiCDC\'s claim-check JSON {"key": ..., "value": <base64>}')
    key = obj.get("key")
    if key is not None and not isinstance(key, str):
        raise ValueError("its key is neither base64 text nor null")
    try:
        return (
            None if key is None else base64.b64decode(key, validate=True),
            base64.b64decode(obj["value"], validate=True),
        )
    except binascii.Error as e:
        raise ValueError(f"its key or value is not base64 ({e})") from None


def _object(text: bytes | None) -> dict | None:
    try:
        obj = json.loads(text) if text else None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep
        return None
    return obj if isinstance(obj, dict) else None


def _unframe(key: bytes | None, value: bytes) -> tuple[bytes, bytes]:
    """An Open Protocol one-event batch (codec facts 2.1) -> the event's key and value."""
    if key is None or len(key) < 16 or int.from_bytes(key[:8], "big") != 1:
        raise ValueError("its key is not an Open Protocol batch key of version 1")
    klen = int.from_bytes(key[8:16], "big")
    vlen = int.from_bytes(value[:8], "big") if len(value) >= 8 else -1
    if len(key) != 16 + klen or len(value) != 8 + vlen:
        raise ValueError("it does not hold exactly one framed Open Protocol event")
    return key[16:], value[8:]


@dataclass(frozen=True)
class Unwrap:
    """How one source's records are undone: its compression, and whether (and from where)
    claim-check records are read. `read` is None when the source does not use claim-check."""

    compression: Compression = Compression.NONE
    read: Read | None = None
    storage_uri: str = ""
    raw_value: bool = False

    @property
    def active(self) -> bool:
        return self.compression is not Compression.NONE or self.read is not None

    def _decompress(self, data: bytes | None, what: str) -> bytes | None:
        if not data or self.compression is Compression.NONE:
            return data
        try:
            return decompress(data, self.compression)
        except ValueError as e:
            raise _Bad(
                f"the {what} cannot be decompressed as {self.compression.value}: {e} "
                f"(large-message-handle-compression: {self.compression.value} on the source "
                "must be the changefeed's)"
            ) from None

    def _fetch(self, location: object) -> tuple[bytes | None, bytes, str]:
        """The claimed (key, value) named by `location`, and where it was read from."""
        if not isinstance(location, str) or not location:
            raise _Bad(f"claim-check location {location!r} is not a file location")
        name = file_name(location)
        where = shown(self.storage_uri, name)
        assert self.read is not None
        try:
            content = self.read(name)
        except FileNotFoundError as e:
            named = "" if location == where else f"the record's location is {location}; "
            raise _Bad(
                f"claim-check file {where} cannot be read: {e} ({named}{OPTION_HINT}: "
                "claim-check-storage-uri must name the storage the changefeed writes to, and "
                "its files must be kept as long as the topic's records)"
            ) from None
        try:
            key, value = claimed(content, self.raw_value)
        except ValueError as e:
            raise _Bad(
                f"claim-check file {where} (location {location}) is not a claimed message: "
                f"{e} (read without claim-check-raw-value, which must be the changefeed's)"
            ) from None
        return key, value, where

    def canal(self, value: bytes | None) -> tuple[bytes | None, str | None]:
        """A Canal-JSON record's value undone: (value, None), or (what could be read of
        it, the reason it is bad)."""
        try:
            plain = self._decompress(value, "value")
        except _Bad as e:
            return None, str(e)
        if self.read is None or not plain or b'"claimCheckLocation"' not in plain:
            return plain, None
        outer = _object(plain)
        tidb = (outer or {}).get("_tidb")
        location = tidb.get("claimCheckLocation") if isinstance(tidb, dict) else None
        if location is None:
            return plain, None
        try:
            _, stored, where = self._fetch(location)
            inner = self._decompress(stored, f"message in claim-check file {where}")
        except _Bad as e:
            return plain, str(e)
        ours, theirs = _canal_identity(outer), _canal_identity(_object(inner))
        if theirs != ours:
            return plain, self._mismatch(where, location, ours, theirs)
        return inner, None

    def debezium(
        self, key: bytes | None, value: bytes | None
    ) -> tuple[bytes | None, bytes | None, str | None]:
        """A Debezium record's key and value decompressed, or the reason it is bad."""
        try:
            return self._decompress(key, "key"), self._decompress(value, "value"), None
        except _Bad as e:
            return None, None, str(e)

    def open_event(self, key: bytes, value: bytes) -> tuple[bytes, bytes | None, str | None]:
        """One Open Protocol event's key and value undone: (key, value, None), or (the
        record's key, what could be read of the value, the reason it is bad)."""
        try:
            plain = self._decompress(value, "event value")
        except _Bad as e:
            return key, None, str(e)
        if self.read is None or b'"ccl"' not in key:
            return key, plain, None
        outer = _object(key)
        location = (outer or {}).get("ccl")
        if location is None:
            return key, plain, None
        try:
            fkey, fvalue, where = self._fetch(location)
            try:
                inner_key, inner_value = _unframe(fkey, fvalue)
            except ValueError as e:
                raise _Bad(
                    f"claim-check file {where} (location {location}) is not a claimed Open "
                    f"Protocol message: {e}"
                ) from None
            inner_value = self._decompress(inner_value, f"event value in claim-check file {where}")
        except _Bad as e:
            return key, plain, str(e)
        ours, theirs = _open_identity(outer), _open_identity(_object(inner_key))
        if theirs != ours:
            return key, plain, self._mismatch(where, location, ours, theirs)
        return inner_key, inner_value, None

    def _mismatch(self, where: str, location: str, ours: tuple, theirs: tuple) -> str:
        """Why a claimed message is not the record's own."""
        if None in theirs:
            raw = "" if self.raw_value else "out"
            return (
                f"claim-check file {where} (location {location}) does not hold a message of "
                f"the protocol naming its table and commit_ts (read with{raw} "
                "claim-check-raw-value, which must be the changefeed's)"
            )
        return (
            f"claim-check file {where} holds the message of {_named(theirs)}, but the record "
            f"(location {location}) is {_named(ours)}: claim-check-storage-uri names another "
            "changefeed's storage, or the file was replaced"
        )


class _Bad(Exception):
    """A record that cannot be undone; its text is the reason."""


def _canal_identity(obj: dict | None) -> tuple:
    obj = obj or {}
    tidb = obj.get("_tidb") if isinstance(obj.get("_tidb"), dict) else {}
    return obj.get("database"), obj.get("table"), tidb.get("commitTs")


def _open_identity(obj: dict | None) -> tuple:
    obj = obj or {}
    return obj.get("scm"), obj.get("tbl"), obj.get("ts")


def _named(t: tuple) -> str:
    return f"{t[0]}.{t[1]} at commit_ts {t[2]}"
