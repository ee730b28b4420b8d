"""Open Protocol batch framing (codec facts 2.1): one Kafka record -> per-event JSON texts.

Pure Python, used inside Spark by `ticdc_sync.spark.staging.decode` (Arrow `mapInArrow`) and by
tests. Never raises on bad input: framing problems come back as an error string so the
record becomes a `bad` event. Must not parse the event JSON (Spark's from_json does).
"""

from __future__ import annotations

from collections.abc import Callable

_U64 = 8


def _frames(buf: bytes, start: int, what: str) -> tuple[list[bytes], str | None]:
    """Length-prefixed frames ([uint64 BE length][bytes]) from `start` (codec facts 2.1)."""
    out: list[bytes] = []
    pos, n = start, len(buf)
    while pos < n:
        if n - pos < _U64:
            return (
                out,
                f"truncated Open Protocol {what}: {n - pos} bytes left where an 8-byte length was expected at byte {pos}",
            )
        length = int.from_bytes(buf[pos : pos + _U64], "big")
        pos += _U64
        if length > n - pos:
            return out, (
                f"truncated Open Protocol {what}: frame {len(out)} claims {length} bytes "
                f"but only {n - pos} remain"
            )
        out.append(buf[pos : pos + length])
        pos += length
    return out, None


Unwrap = Callable[[bytes, bytes], tuple[bytes, bytes | None, str | None]]


def split_open_protocol(
    key: bytes | None, value: bytes | None, unwrap: Unwrap | None = None
) -> list[tuple[int, str | None, str | None, str | None]]:
    """One Kafka record -> [(idx, event key JSON, event value JSON, error)], never empty.

    An empty batch yields one row with no key and no error (kind `empty`). A framing error
    yields one row carrying the error for the whole record. `unwrap` undoes each event's
    large-message handling first (`codecs.large_message.Unwrap.open_event`): its error is
    the event's, with the event's key kept so that the bad event names its table.
    """
    if key is None:
        return [
            (
                0,
                None,
                None,
                "Open Protocol record without a Kafka key (the key carries the version and event keys)",
            )
        ]
    if len(key) < _U64:
        return [
            (
                0,
                None,
                None,
                f"Open Protocol key is {len(key)} bytes, shorter than the 8-byte version header",
            )
        ]
    version = int.from_bytes(key[:_U64], "big")
    if version != 1:
        return [(0, None, None, f"unsupported Open Protocol batch version {version} (expected 1)")]
    keys, kerr = _frames(key, _U64, "key")
    if kerr:
        return [(0, None, None, kerr)]
    values, verr = _frames(value or b"", 0, "value")
    if verr:
        return [(0, None, None, verr)]
    if len(keys) != len(values):
        return [
            (
                0,
                None,
                None,
                f"Open Protocol key has {len(keys)} events but the value has {len(values)}",
            )
        ]
    if not keys:
        return [(0, None, None, None)]
    out: list[tuple[int, str | None, str | None, str | None]] = []
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        err = None
        if unwrap is not None:
            k, v, err = unwrap(k, v)
        try:
            ks = k.decode("utf-8")
        except UnicodeDecodeError:
            out.append((i, None, None, err or f"Open Protocol event {i}: key is not UTF-8 JSON"))
            continue
        if err is not None:
            out.append((i, ks, None, f"Open Protocol event {i}: {err}"))
            continue
        try:
            vs = (v or b"").decode("utf-8")
        except UnicodeDecodeError:
            out.append(
                (
                    i,
                    ks,
                    None,
                    f"Open Protocol event {i}: value is not UTF-8 JSON (compressed? "
                    "large-message-handle-compression on the source must be the changefeed's)",
                )
            )
            continue
        out.append((i, ks, vs, None))
    return out
