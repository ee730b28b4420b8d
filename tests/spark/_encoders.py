"""Tiny TiCDC message encoders for tests (not the workload encoders): just enough framing.

Canal-JSON and Debezium envelopes as JSON bytes, Open Protocol batch framing (codec facts
2.1), and Go `strconv.Quote` for Open Protocol binary strings (facts 2.4).
"""

from __future__ import annotations

import json
import struct
import unicodedata
from typing import Any


def canal(
    rows: list[dict[str, str | None]],
    mysql_type: dict[str, str],
    *,
    typ: str = "INSERT",
    old: list[dict[str, str | None]] | None = None,
    commit_ts: int | None = 445566778899001122,
    db: str = "db",
    table: str = "t",
    pk: list[str] | None = None,
    extra_tidb: dict[str, Any] | None = None,
) -> bytes:
    msg: dict[str, Any] = {
        "id": 0,
        "database": db,
        "table": table,
        "pkNames": pk if pk is not None else ["id"],
        "isDdl": False,
        "type": typ,
        "es": (commit_ts or 0) >> 18,
        "ts": 1700000000000,
        "sql": "",
        "sqlType": {k: 12 for k in mysql_type},
        "mysqlType": mysql_type,
        "data": rows,
        "old": old,
    }
    if commit_ts is not None or extra_tidb:
        msg["_tidb"] = {
            **({"commitTs": commit_ts} if commit_ts is not None else {}),
            **(extra_tidb or {}),
        }
    return json.dumps(msg).encode()


def open_frames(events: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> tuple[bytes, bytes]:
    """[(key dict, value dict or None for resolved)] -> (Kafka key, Kafka value)."""
    key = struct.pack(">Q", 1)
    value = b""
    for k, v in events:
        kb = json.dumps(k).encode()
        vb = b"" if v is None else json.dumps(v).encode()
        key += struct.pack(">Q", len(kb)) + kb
        value += struct.pack(">Q", len(vb)) + vb
    return key, value


def go_quote(data: bytes) -> str:
    """Go strconv.Quote(string(data)) without the outer quotes."""
    out: list[str] = []
    i = 0
    named = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}
    while i < len(data):
        b = data[i]
        # decode one UTF-8 rune, or an invalid byte
        for width in (1, 2, 3, 4):
            try:
                ch = data[i : i + width].decode("utf-8")
                if len(ch) == 1:
                    break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"\\x{b:02x}")
            i += 1
            continue
        r = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif r in named:
            out.append(named[r])
        elif r < 0x20 or r == 0x7F:
            out.append(f"\\x{r:02x}")
        elif ch.isprintable() or unicodedata.category(ch) == "Zs" and ch == " ":
            out.append(ch)
        elif r < 0x10000:
            out.append(f"\\u{r:04x}")
        else:
            out.append(f"\\U{r:08x}")
        i += width
    return "".join(out)


def debezium(
    after: dict[str, Any] | None,
    *,
    before: dict[str, Any] | None = None,
    op: str = "c",
    fields: list[dict[str, Any]] | None = None,
    commit_ts: int | None = 445566778899001122,
    db: str = "db",
    table: str = "t",
    with_schema: bool = True,
) -> bytes:
    source: dict[str, Any] = {
        "version": "2.4.0.Final",
        "connector": "TiCDC",
        "name": "default",
        "ts_ms": 1700000000000,
        "db": db,
        "table": table,
    }
    if commit_ts is not None:
        source["commit_ts"] = commit_ts
    payload = {
        "before": before,
        "after": after,
        "source": source,
        "op": op,
        "ts_ms": 1700000000001,
        "transaction": None,
    }
    if not with_schema:
        return json.dumps(payload).encode()
    value_struct = {
        "type": "struct",
        "optional": True,
        "name": f"default.{db}.{table}.Value",
        "fields": fields or [],
    }
    schema = {
        "type": "struct",
        "name": f"default.{db}.{table}.Envelope",
        "optional": False,
        "fields": [{**value_struct, "field": "before"}, {**value_struct, "field": "after"}],
    }
    return json.dumps({"payload": payload, "schema": schema}).encode()
