"""TiCDC's large messages undone without Spark (`codecs.large_message`, `core.claim_store`):
decompression, claim-check files read back, and the reason for each record that cannot be.
The records come from `testkit.large_message`, which writes them as TiCDC does."""

from __future__ import annotations

import base64
import json
import os
import random
import string

import pytest

from testkit.encode import EncoderOptions, RowChange, frame
from testkit.large_message import (
    LargeMessageConfig,
    claim_file,
    large_encoder,
    lz4_frame,
    snappy_block,
)
from ticdc_sync.codecs.large_message import Unwrap, claimed, decompress
from ticdc_sync.codecs.open_framing import split_open_protocol
from ticdc_sync.core import claim_store
from ticdc_sync.core.model import Compression
from ticdc_sync.core.upstream import Column, TableSchema

SCHEMA = TableSchema(
    "shop",
    "docs",
    (Column("id", "int", nullable=False), Column("body", "text")),
    primary_key=("id",),
)
# Random letters: a body that stays over max-message-bytes compressed.
BIG = "".join(random.Random(1).choices(string.ascii_letters, k=3000))


def _row(i: int, body: str = BIG, ts: int = 1000) -> RowChange:
    return RowChange(SCHEMA, "I", None, {"id": i, "body": body}, ts + i)


def _encoder(protocol: str, **config):
    cfg = LargeMessageConfig(
        option=config.pop("option", "claim-check"),
        storage_uri=config.pop("storage_uri", "s3://bucket/claims"),
        max_message_bytes=config.pop("max_message_bytes", 1000),
        **config,
    )
    return large_encoder(protocol, EncoderOptions(), cfg)


def _unwrap(enc, claims=None, **kw) -> Unwrap:
    files = enc.claims if claims is None else claims

    def read(name: str) -> bytes:
        if name not in files:
            raise FileNotFoundError("no such file")
        return files[name]

    return Unwrap(
        Compression(enc.config.compression),
        read=read,
        storage_uri=kw.get("storage_uri", "file:///claims"),
        raw_value=enc.config.raw_value,
    )


@pytest.mark.parametrize("codec", [Compression.SNAPPY, Compression.LZ4])
@pytest.mark.parametrize("size", [0, 1, 100, 70_000, 5 << 20])
def test_decompress_undoes_ticdc_s_formats(codec, size):
    data = (os.urandom(size // 2) + b"{" * (size - size // 2))[:size]
    packed = snappy_block(data) if codec is Compression.SNAPPY else lz4_frame(data)
    assert decompress(packed, codec) == data


def test_lz4_frames_carry_pierrec_s_header_and_a_checked_content_checksum():
    frame_ = lz4_frame(b'{"a":1}' * 100)
    assert frame_[:7] == b"\x04\x22\x4d\x18\x64\x70" + frame_[6:7]
    broken = frame_[:-1] + bytes([frame_[-1] ^ 1])
    with pytest.raises(ValueError, match="not an lz4 frame .*contentChecksum"):
        decompress(broken, Compression.LZ4)


@pytest.mark.parametrize("codec", [Compression.SNAPPY, Compression.LZ4])
def test_what_is_not_compressed_is_refused(codec):
    with pytest.raises(ValueError, match="not (a snappy block|an lz4 frame)"):
        decompress(b'{"id":1}', codec)


def test_a_snappy_header_claiming_too_much_is_refused_before_allocating():
    with pytest.raises(ValueError, match="its header claims 2147483648 bytes"):
        decompress(b"\x80\x80\x80\x80\x08" + b"\x00" * 10, Compression.SNAPPY)


def test_claim_files_are_go_json_of_key_and_value_or_the_raw_value():
    assert claim_file(None, b"v", False) == b'{"key":null,"value":"dg=="}'
    assert claimed(b'{"key":null,"value":"dg=="}', False) == (None, b"v")
    assert claimed(b'{"key":"aw==","value":"dg=="}', False) == (b"k", b"v")
    assert claimed(b"anything", True) == (None, b"anything")
    for bad, why in [
        (b"{oops", "not JSON"),
        (b'{"key":null}', "not TiCDC's claim-check JSON"),
        (b'{"key":1,"value":"dg=="}', "neither base64 text nor null"),
        (b'{"key":null,"value":"not base64!"}', "not base64"),
    ]:
        with pytest.raises(ValueError, match=why):
            claimed(bad, False)


@pytest.mark.parametrize("codec", ["none", "snappy", "lz4"])
@pytest.mark.parametrize("raw", [False, True])
def test_canal_claim_check_records_are_replaced_by_the_claimed_message(codec, raw):
    enc = _encoder("canal-json", compression=codec, raw_value=raw)
    small, big = enc.encode_row(_row(1, "short")), enc.encode_row(_row(2))
    assert len(enc.claims) == 1
    (name,) = enc.claims
    outer = json.loads(_plain(big.value, codec))
    assert outer["_tidb"] == {"commitTs": 1002, "claimCheckLocation": f"s3://bucket/claims/{name}"}
    assert outer["data"] == [{"id": "2"}] and outer["mysqlType"] == {"id": "int"}
    u = _unwrap(enc)
    value, err = u.canal(big.value)
    assert err is None
    message = json.loads(value)
    assert message["data"] == [{"id": "2", "body": BIG}] and "claimCheckLocation" not in message
    assert u.canal(small.value) == (_plain(small.value, codec), None)


def _plain(value: bytes, codec: str) -> bytes:
    return decompress(value, Compression(codec))


@pytest.mark.parametrize("flavour", ["tiflow", "ticdc"])
@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_open_claim_check_events_are_replaced_by_the_claimed_event(flavour, codec):
    enc = _encoder("open-protocol", compression=codec, flavour=flavour)
    events = [enc.row_event(_row(1, "short")), enc.row_event(_row(2)), enc.row_event(_row(3, "s"))]
    key = json.loads(events[1][0])
    marker = {"ohk": False} if flavour == "ticdc" else {}
    (name,) = enc.claims
    assert key == {"ts": 1002, "scm": "shop", "tbl": "docs", "t": 1, **marker,
                   "ccl": f"s3://bucket/claims/{name}"}  # fmt: skip
    stored = json.loads(enc.claims[name])
    assert base64.b64decode(stored["key"])[:8] == (1).to_bytes(8, "big")
    k, v = frame(True, [e[0] for e in events]), frame(False, [e[1] for e in events])
    out = split_open_protocol(k, v, _unwrap(enc).open_event)
    assert [e[3] for e in out] == [None, None, None]
    assert json.loads(out[1][1]) == {"ts": 1002, "scm": "shop", "tbl": "docs", "t": 1}
    assert json.loads(out[1][2])["u"]["body"]["v"] == base64.b64encode(BIG.encode()).decode()


def test_a_missing_claim_file_names_the_file_and_the_location():
    enc = _encoder("canal-json")
    big = enc.encode_row(_row(2))
    (name,) = enc.claims
    value, err = _unwrap(enc, claims={}).canal(big.value)
    assert json.loads(value)["_tidb"]["claimCheckLocation"].endswith(name)
    assert err == (
        f"claim-check file file:///claims/{name} cannot be read: no such file (the record's "
        f"location is s3://bucket/claims/{name}; TiCDC "
        "large-message-handle-option=claim-check: claim-check-storage-uri must name the "
        "storage the changefeed writes to, and its files must be kept as long as the topic's "
        "records)"
    )


def test_a_location_in_the_storage_read_is_not_repeated():
    enc = _encoder("open-protocol", storage_uri="s3://bucket/claims")
    key, value = enc.row_event(_row(2))
    (name,) = enc.claims
    _, _, err = _unwrap(enc, claims={}, storage_uri="s3://bucket/claims").open_event(key, value)
    assert err.startswith(
        f"claim-check file s3://bucket/claims/{name} cannot be read: no such file (TiCDC "
        "large-message-handle-option=claim-check: claim-check-storage-uri must name"
    )


def test_a_claimed_message_of_another_row_is_refused():
    enc = _encoder("canal-json")
    enc.encode_row(_row(2))
    enc.encode_row(_row(3))
    first, second = enc.claims
    big = enc.encode_row(_row(4))
    third = next(n for n in enc.claims if n not in (first, second))
    swapped = {third: enc.claims[first]}
    _, err = _unwrap(enc, claims=swapped).canal(big.value)
    assert (
        err is not None
        and (
            f"holds the message of shop.docs at commit_ts 1002, but the record (location "
            f"s3://bucket/claims/{third}) is shop.docs at commit_ts 1004"
        )
        in err
    )


def test_raw_values_read_as_claim_json_and_the_reverse_are_refused():
    raw = _encoder("canal-json", raw_value=True)
    big = raw.encode_row(_row(2))
    u = Unwrap(read=lambda n: raw.claims[n], storage_uri="/c", raw_value=False)
    _, err = u.canal(big.value)
    assert "is not a claimed message: not TiCDC's claim-check JSON" in err
    assert "read without claim-check-raw-value, which must be the changefeed's" in err
    wrapped = _encoder("canal-json")
    big = wrapped.encode_row(_row(2))
    u = Unwrap(read=lambda n: wrapped.claims[n], storage_uri="/c", raw_value=True)
    _, err = u.canal(big.value)
    assert "does not hold a message of the protocol naming its table and commit_ts" in err


def test_compression_that_is_not_the_changefeed_s_is_named():
    enc = _encoder("canal-json", compression="lz4")
    small = enc.encode_row(_row(1, "short"))
    value, err = Unwrap(Compression.SNAPPY).canal(small.value)
    assert value is None
    assert err.startswith("the value cannot be decompressed as snappy: not a snappy block")
    assert "large-message-handle-compression: snappy on the source must be the changefeed's" in err


def test_debezium_keys_and_values_are_decompressed():
    enc = _encoder("debezium", option="none", compression="snappy")
    m = enc.encode_row(_row(1, "short"))
    key, value, err = Unwrap(Compression.SNAPPY).debezium(m.key, m.value)
    assert err is None
    assert json.loads(key)["payload"] == {"id": 1}
    assert json.loads(value)["payload"]["after"]["body"] == "short"


@pytest.mark.parametrize("flavour", ["tiflow", "ticdc"])
def test_handle_key_only_open_events_are_marked_by_tiflow_only(flavour):
    enc = _encoder("open-protocol", option="handle-key-only", flavour=flavour)
    key, value = enc.row_event(_row(2))
    assert json.loads(value) == {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 2}}}
    marker = {"ohk": True} if flavour == "tiflow" else {}
    assert json.loads(key) == {"ts": 1002, "scm": "shop", "tbl": "docs", "t": 1, **marker}


def test_handle_key_only_canal_messages_say_so():
    enc = _encoder("canal-json", option="handle-key-only")
    msg = json.loads(enc.encode_row(_row(2)).value)
    assert msg["_tidb"] == {"commitTs": 1002, "onlyHandleKey": True}
    assert msg["data"] == [{"id": "2"}] and msg["sqlType"] == {"id": 4}


def test_claim_store_reads_a_local_folder_by_file_name(tmp_path):
    (tmp_path / "a.json").write_bytes(b"{}")
    store = claim_store.ClaimStore(f"file://{tmp_path}", {})
    assert store.read("a.json") == b"{}"
    with pytest.raises(FileNotFoundError, match="no such file"):
        store.read("b.json")
    with pytest.raises(FileNotFoundError, match="is not a file name"):
        store.read("../a.json")


def test_a_location_names_its_file_by_its_last_segment():
    """Older tiflow joined the storage URI and the name with filepath.Join (`s3:/b/p/x`);
    TiCDC's consumer reads the base name from its own storage either way."""
    for location in ["s3://b/p/x.json", "s3:/b/p/x.json", "file:///tmp/c/x.json", "x.json"]:
        assert claim_store.file_name(location) == "x.json"


def test_a_storage_that_cannot_be_read_makes_no_bad_message():
    """An unreachable or refusing storage propagates (the batch is not staged): only a file
    that is not there, or not a claimed message, makes a record bad."""
    canal = _encoder("canal-json")
    big = canal.encode_row(_row(2))
    opened = _encoder("open-protocol")
    key, value = opened.row_event(_row(2))

    def read(name: str) -> bytes:
        raise claim_store.StorageError(f"s3://b/c/{name}: 503 Slow Down")

    u = Unwrap(read=read, storage_uri="s3://b/c")
    with pytest.raises(claim_store.StorageError, match="503 Slow Down"):
        u.canal(big.value)
    with pytest.raises(claim_store.StorageError, match="503 Slow Down"):
        split_open_protocol(frame(True, [key]), frame(False, [value]), u.open_event)


@pytest.mark.parametrize("codec", list(Compression))
def test_no_input_makes_unwrap_raise(codec):
    """Random, truncated and mutated records and claim files: every one is undone or gets a
    reason, none raises."""
    rng = random.Random(f"fuzz/{codec.value}")
    enc = _encoder("canal-json", compression=codec.value)
    good = [enc.encode_row(_row(i, BIG if i % 2 else "s")).value for i in range(4)]
    files = dict(enc.claims)
    deep = b'{"_tidb":{"claimCheckLocation":"x.json"},"a":' + b"[" * 100_000
    junk = [b"", b"{", b'{"key":null,"value":""}', os.urandom(64), b"\x80" * 12, deep]

    def read(name: str) -> bytes:
        if rng.random() < 0.3:
            raise FileNotFoundError("no such file")
        data = files.get(name) or rng.choice(junk)
        return data if rng.random() < 0.5 else data[: rng.randrange(len(data) + 1)]

    u = Unwrap(codec, read=read, storage_uri="/c")
    for _ in range(300):
        v = rng.choice(good + junk)
        if v and rng.random() < 0.5:
            i = rng.randrange(len(v))
            v = v[:i] + bytes([rng.randrange(256)]) + v[i + 1 :]
        value, err = u.canal(v)
        assert err is None or isinstance(err, str)
        _, _, err = u.open_event(b'{"ts":1,"ccl":"/c/x.json"}', v)
        assert err is None or isinstance(err, str)
        _, _, err = u.debezium(v, v)
        assert err is None or isinstance(err, str)
