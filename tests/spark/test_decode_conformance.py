"""Envelope decoding against third-party corpora (../shared/corpus) and the protocol docs.

Where an origin's expected result is a final table (flink-json, risingwave, seatunnel,
cdcfresh, paimon), the apply engine is needed for it; these tests assert the decoded event
stream instead (ops and before/after values in order), which determines that table.
All records of all origins of one protocol go through decode_records as one DataFrame.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.shared_paths import SHARED, needs_shared
from ticdc_sync.core import events
from ticdc_sync.core.model import Protocol, Source
from ticdc_sync.spark.staging.decode import decode_records, with_row_maps

pytestmark = [pytest.mark.spark, needs_shared]

CORPUS = SHARED / "corpus"


def _lines(path: Path) -> list[bytes]:
    return [ln.rstrip("\n").encode() for ln in path.read_text().splitlines() if ln.startswith("{")]


def _decode(spark, protocol: Protocol, records: list[tuple[str, bytes | None, bytes | None]]):
    rows = [(topic, 0, i, 0, k, v) for i, (topic, k, v) in enumerate(records)]
    df = spark.createDataFrame(rows, events.RECORD_SCHEMA)
    out = with_row_maps(decode_records(df, Source("s", protocol, ("x",)))).collect()
    by_topic: dict[str, list] = {}
    for r in sorted(out, key=lambda r: (r.offset, r.idx)):
        by_topic.setdefault(r.topic, []).append(r)
    return by_topic


def _changelog(rows, cols):
    """Flink-style changelog (+I/-U/+U/-D) of the decoded rows, values as text."""
    out = []
    for r in rows:
        if r.kind != "row":
            continue
        if r.op == "I":
            out.append(("+I", *[r.after[c] for c in cols]))
        elif r.op == "U":
            out.append(("-U", *[r.before[c] for c in cols]))
            out.append(("+U", *[r.after[c] for c in cols]))
        else:
            out.append(("-D", *[r.before[c] for c in cols]))
    return out


def test_canal_corpora(spark):
    recs: list[tuple[str, bytes | None, bytes | None]] = []
    cdc = CORPUS / "cdcfresh-ticdc-canal"
    for f in ["ddl_query", "ddl_create", "insert", "update", "delete"]:
        recs.append(("cdcfresh", None, (cdc / f"{f}.json").read_bytes()))
    for ln in _lines(CORPUS / "flink-json/canal-data.txt"):
        recs.append(("flink", None, ln))
    for ln in _lines(CORPUS / "flink-json/canal-data-filter-table.txt"):
        recs.append(("flinkfilter", None, ln))
    for ln in _lines(CORPUS / "seatunnel-kafka-e2e/canal/canal_data.txt"):
        recs.append(("seatunnel", None, ln))
    for ln in _lines(CORPUS / "risingwave-kafka/cannal_json.1"):
        recs.append(("rw", None, ln))
    for ln in _lines(CORPUS / "risingwave-kafka/canal_json_double_field.1"):
        recs.append(("rw2", None, ln))
    for n in (1, 2, 3):
        for t in (0, 1, 2):
            p = CORPUS / f"paimon-kafka/canal/database/schemaevolution/topic{t}/canal-data-{n}.txt"
            recs.extend(("paimon_db", None, ln) for ln in _lines(p))
    for ln in _lines(CORPUS / "paimon-kafka/canal/table/incomplete/canal-data-1.txt"):
        recs.append(("paimon_incomplete", None, ln))
    # the docs' watermark example, with the v6.5.10 trailing CRLF (tiflow #11707)
    wm = (
        b'{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK",'
        b'"es":1640007049196,"ts":1640007050284,"sql":"","sqlType":null,"mysqlType":null,'
        b'"data":null,"old":null,"_tidb":{"watermarkTs":429918007904436226}}\r\n'
    )
    recs.append(("docs", None, wm))
    got = _decode(spark, Protocol.CANAL_JSON, recs)

    # cdcfresh (live TiCDC v8.5.7, no extension): QUERY + CREATE DDL, then I/U/D of id 1.
    c = got["cdcfresh"]
    assert [(r.kind, r.ddl_hint, r.db, r.tbl) for r in c[:2]] == [
        ("ddl", "QUERY", "demo", None),
        ("ddl", "CREATE", "demo", "readings"),
    ]
    assert _changelog(c, ["id", "device", "value"]) == [
        ("+I", "1", "dev-a", "10"),
        ("-U", "1", "dev-a", "10"),
        ("+U", "1", "dev-a", "11"),
        ("-D", "1", "dev-a", "11"),
    ]
    assert all(
        r.exact_ts is False
        # es in the TSO's physical bits, the partition offset in its logical bits
        and r.commit_ts
        == (json.loads((cdc / "insert.json").read_text())["es"] << 18) + r.offset % 262144
        for r in c[2:3]
    )
    assert c[2].col_meta == {"id": "int", "device": "varchar", "value": "int"}
    assert c[2].pk_names == ["id"]

    expected_flink = [
        ("+I", "101", "scooter", "Small 2-wheel scooter", "3.14"),
        ("+I", "102", "car battery", "12V car battery", "8.1"),
        (
            "+I",
            "103",
            "12-pack drill bits",
            "12-pack of drill bits with sizes ranging from #40 to #3",
            "0.8",
        ),
        ("+I", "104", "hammer", "12oz carpenter's hammer", "0.75"),
        ("+I", "105", "hammer", "14oz carpenter's hammer", "0.875"),
        ("+I", "106", "hammer", None, "1.0"),
        ("+I", "107", "rocks", "box of assorted rocks", "5.3"),
        ("+I", "108", "jacket", "water resistent black wind breaker", "0.1"),
        ("+I", "109", "spare tire", "24 inch spare tire", "22.2"),
        ("-U", "106", "hammer", None, "1.0"),
        ("+U", "106", "hammer", "18oz carpenter hammer", "1.0"),
        ("-U", "107", "rocks", "box of assorted rocks", "5.3"),
        ("+U", "107", "rocks", "box of assorted rocks", "5.1"),
        ("+I", "110", "jacket", "water resistent white wind breaker", "0.2"),
        ("+I", "111", "scooter", "Big 2-wheel scooter ", "5.18"),
        ("-U", "110", "jacket", "water resistent white wind breaker", "0.2"),
        ("+U", "110", "jacket", "new water resistent white wind breaker", "0.5"),
        ("-U", "111", "scooter", "Big 2-wheel scooter ", "5.18"),
        ("+U", "111", "scooter", "Big 2-wheel scooter ", "5.17"),
        ("-D", "111", "scooter", "Big 2-wheel scooter ", "5.17"),
        ("-U", "101", "scooter", "Small 2-wheel scooter", "3.14"),
        ("+U", "101", "scooter", "Small 2-wheel scooter", "5.17"),
        ("-U", "102", "car battery", "12V car battery", "8.1"),
        ("+U", "102", "car battery", "12V car battery", "5.17"),
        ("-D", "102", "car battery", "12V car battery", "5.17"),
        (
            "-D",
            "103",
            "12-pack drill bits",
            "12-pack of drill bits with sizes ranging from #40 to #3",
            "0.8",
        ),
    ]
    cols = ["id", "name", "description", "weight"]
    assert _changelog(got["flink"], cols) == expected_flink
    assert sum(r.kind == "ddl" for r in got["flink"]) == 1
    # Filter file: the same changelog for mydb.product once other tables are filtered out.
    prod = [r for r in got["flinkfilter"] if r.tbl == "product"]
    assert _changelog(prod, cols) == expected_flink
    assert {r.tbl for r in got["flinkfilter"] if r.kind == "ddl"} >= {"orders"}

    # SeaTunnel: 3 DDL, then 9 inserts, 2 updates, 1 delete (final rows 1101..1108).
    st = got["seatunnel"]
    assert [r.ddl_hint for r in st if r.kind == "ddl"] == ["QUERY", "CREATE", "ALTER"]
    log = _changelog(st, ["id", "weight"])
    assert [x[0] for x in log] == ["+I"] * 9 + ["-U", "+U", "-U", "+U", "-D"]
    assert (
        log[10] == ("+U", "1101", "4.56")
        and log[12] == ("+U", "1107", "7.88")
        and log[13] == ("-D", "1109", "5.3")
        or log[13][:2] == ("-D", "1109")
    )

    # RisingWave canal: partial `old` completed from `data`; two rows per message.
    rw = _changelog(got["rw"], ["id", "balance"])
    assert rw[2] == ("-U", "1", "1000.62") and rw[3] == ("+U", "1", "1500.62")
    assert rw[-1][0] == "-D" and rw[-1][1] == "2"
    rw2 = _changelog(got["rw2"], ["v1", "v2"])
    assert [x[0] for x in rw2] == ["+I", "+I", "-U", "+U", "-U", "+U", "-D", "-D"]
    assert [r.idx for r in got["rw2"]] == [0, 1, 0, 1, 0, 1]

    # Paimon database sync: t1 rows after all files (k, v1, v2) incl. 9 -> 9000000000000.
    p = got["paimon_db"]
    t1 = {r.after["k"]: r.after for r in p if r.kind == "row" and r.tbl == "t1" and r.op != "D"}
    assert t1["9"]["v2"] == "9000000000000" and t1["1"]["v1"] == "one"
    assert any(r.kind == "ddl" and "ADD COLUMN v2 INT" in r.ddl_sql for r in p)

    # Paimon "incomplete" messages lack database/table/es: they cannot be routed or ordered.
    inc = got["paimon_incomplete"]
    assert [r.kind for r in inc] == ["bad", "bad"] and "database/table" in inc[0].error
    assert inc[0].raw_value is not None

    d = got["docs"][0]
    assert (d.kind, d.commit_ts, d.exact_ts) == ("watermark", 429918007904436226, True)


def _open_pair(folder: str, name: str) -> tuple[bytes, bytes]:
    return (CORPUS / folder / "key" / name).read_bytes(), (
        CORPUS / folder / "value" / name
    ).read_bytes()


def test_open_protocol_corpora(spark):
    recs = []
    for n in ["ddl_0", "ddl_1", "ddl_2", "row_0", "row_1", "row_2", "rts_0", "rts_1", "rts_2"]:
        k, v = _open_pair("tibigdata-open-protocol", n)
        recs.append(("tibig_" + n, k, v))
    for n in [
        "ddl_key_0",
        "ddl_key_1",
        "ddl_key_2",
        "row_key_0",
        "row_key_1",
        "row_key_2",
        "rts_key_0",
        "rts_key_1",
        "rts_key_2",
    ]:
        vname = n.replace("_key_", "_value_")
        k = (CORPUS / "tiflow/open-protocol-examples/key" / n).read_bytes()
        v = (CORPUS / "tiflow/open-protocol-examples/value" / vname).read_bytes()
        recs.append(("tiflow_" + n, k, v))
    # TiBigData row.json: one row value with 27 type codes, framed here.
    import struct

    row_json = json.dumps(
        json.loads((CORPUS / "tibigdata-open-protocol/row.json").read_text())
    ).encode()
    kj = b'{"ts":1,"scm":"a","tbl":"b","t":1}'
    recs.append(
        (
            "rowjson",
            struct.pack(">QQ", 1, len(kj)) + kj,
            struct.pack(">Q", len(row_json)) + row_json,
        )
    )
    # The docs' DDL + resolved log lines (ticdc-open-protocol docs, Log 1 and 2).
    from tests.spark._encoders import open_frames

    recs.append(
        (
            "docs_ddl",
            *open_frames(
                [
                    (
                        {"ts": 415508856908021766, "scm": "test", "tbl": "t1", "t": 2},
                        {"q": "CREATE TABLE test.t1(id int primary key, val varchar(16))", "t": 3},
                    )
                ]
            ),
        )
    )
    recs.append(("docs_rts", *open_frames([({"ts": 415508856908021766, "t": 3}, None)])))
    got = _decode(spark, Protocol.OPEN_PROTOCOL, recs)

    d1 = got["tibig_ddl_1"]
    assert [(r.kind, r.db, r.tbl, r.ddl_sql, r.ddl_hint) for r in d1] == [
        ("ddl", "a", None, "create database a;", "1"),
        ("ddl", "a", None, "drop database a;", "2"),
        ("ddl", "a", None, "create database a;", "1"),
        ("ddl", "a", "c", "create table c(id int primary key);", "3"),
    ]
    assert d1[0].commit_ts == 423497695015731209 and d1[-1].commit_ts == 423497714284101642
    assert [r.idx for r in d1] == [0, 1, 2, 3]
    for pfx in ("tibig_", "tiflow_"):
        for n in (
            ("ddl_2", "row_2", "rts_2")
            if pfx == "tibig_"
            else ("ddl_key_2", "row_key_2", "rts_key_2")
        ):
            assert [r.kind for r in got[pfx + n]] == ["empty"], pfx + n
    r1 = got["tibig_row_1"]
    assert [(r.kind, r.op, r.db, r.tbl, r.commit_ts) for r in r1] == [
        ("row", "I", "a", "b", 1),
        ("row", "I", "a", "b", 2),
        ("row", "I", "a", "b", 3),
        ("row", "I", "a", "c", 4),
    ]
    assert r1[0].after == {"col1": "aa"} and r1[0].col_meta == {"col1": "1,0"}
    assert [(r.kind, r.commit_ts) for r in got["tibig_rts_1"]] == [
        ("watermark", 1),
        ("watermark", 2),
        ("watermark", 3),
    ]
    assert [r.kind for r in got["tiflow_ddl_key_1"]] == ["ddl", "ddl", "ddl"]
    assert [r.after for r in got["tiflow_row_key_1"]] == [r.after for r in r1]

    rj = got["rowjson"][0]
    assert rj.kind == "row" and len(rj.after) == 27
    assert rj.after["c7"] == "1973-12-30 15:30:00" and rj.after["c18"] == "129012.1230000"
    assert rj.after["c21"] == "5rWL6K+VdGV4dA==" and rj.after["c25"] == "\\x89PNG\\r\\n\\x1a\\n"
    assert rj.col_meta["c25"].split(",")[0] == "254" or rj.col_meta["c25"].startswith("25")
    assert sorted(rj.pk_names) == sorted(rj.after)  # every column has "h": true

    assert got["docs_ddl"][0].ddl_hint == "3" and got["docs_ddl"][0].tbl == "t1"
    assert (got["docs_rts"][0].kind, got["docs_rts"][0].commit_ts) == (
        "watermark",
        415508856908021766,
    )


def test_debezium_corpora(spark):
    recs = []
    tf = CORPUS / "tiflow/debezium-testdata"
    recs.append(
        (
            "tiflow",
            (tf / "datatype.dbz.key.json").read_bytes(),
            (tf / "datatype.dbz.json").read_bytes(),
        )
    )
    for ln in _lines(CORPUS / "risingwave-kafka/debezium_log.1"):
        recs.append(("rw", None, ln))
    for ln in _lines(CORPUS / "risingwave-kafka/debezium_log_no_schema_field.1"):
        recs.append(("rw_noschema", None, ln))
    for ln in _lines(CORPUS / "flink-json/debezium-data-schema-include.txt"):
        recs.append(("flink_inc", None, ln))
    for ln in _lines(CORPUS / "flink-json/debezium-data-schema-exclude.txt"):
        recs.append(("flink_exc", None, ln))
    for ln in _lines(CORPUS / "seatunnel-kafka-e2e/debezium/debezium_data.txt"):
        recs.append(("seatunnel", None, ln))
    fc = json.loads(
        (CORPUS / "flink-cdc-mysql-debezium/file/debezium-data-schema-include.json").read_text()
    )
    for k in ("expected_snapshot", "expected_binlog"):
        recs.append(("flinkcdc", None, json.dumps(fc[k]).encode()))
    recs.append(("tombstone", b'{"id":1}', None))
    got = _decode(spark, Protocol.DEBEZIUM, recs)

    t = got["tiflow"][0]
    assert (t.kind, t.op, t.db, t.tbl, t.exact_ts) == ("row", "I", "test", "foo", False)
    assert t.pk_names == ["pk"]
    assert t.after["col_bigint_unsigned"] == "-1" and t.after["col_d_0000"] is None
    assert t.after["col_bit_1"] == "true" and t.after["col_decimal"] == "12345.12345"
    assert json.loads(t.col_meta["col_set"])["parameters"] == {"allowed": "a,b,c"}

    expected_rw = [
        ("+I", "1001", "Sally"), ("+I", "1002", "George"), ("+I", "1003", "Edward"), ("+I", "1004", "Anne"),
        ("+I", "1005", "add"), ("-U", "1004", "Anne"), ("+U", "1004", "Anne1"), ("+I", "1006", "add1"),
        ("-U", "1005", "add"), ("+U", "1005", "add"), ("-U", "1006", "add1"), ("+U", "1006", "add1"),
        ("-D", "1006", "add1"),
    ]  # fmt: skip
    assert _changelog(got["rw"], ["id", "first_name"]) == expected_rw
    assert _changelog(got["rw_noschema"], ["id", "first_name"]) == expected_rw
    assert all(r.exact_ts is False for r in got["rw"])  # plain connector: ts_ms << 18

    cols = ["id", "name", "description", "weight"]
    inc, exc = _changelog(got["flink_inc"], cols), _changelog(got["flink_exc"], cols)
    # The two files render some doubles differently ("1.0" vs "1"): compare as numbers.
    assert [(*x[:4], float(x[4])) for x in inc] == [(*x[:4], float(x[4])) for x in exc]
    assert len(inc) == 20
    assert inc[9] == ("-U", "106", "hammer", "16oz carpenter's hammer", "1.0")
    # FLOAT column: the file carries binary-float noise (5.170000076293945), which is raw text.
    assert inc[-1][:4] == ("-D", "111", "scooter", "Big 2-wheel scooter ")
    assert round(float(inc[-1][4]), 3) == 5.17

    st = got["seatunnel"]
    assert [(r.kind, r.op) for r in st] == [("row", "I")] * 3
    assert st[0].after["f_json"] == '{"key": "value"}' or "key" in st[0].after["f_json"]

    snap, binlog = got["flinkcdc"]
    assert (snap.op, binlog.op) == ("I", "U")
    assert (
        snap.after["timestamp_c"] == "2020-07-17T18:00:22Z"
        and binlog.after["timestamp_c"] == "2020-07-17T18:33:22Z"
    )
    assert snap.after["big_un_c"] is not None
    assert got["tombstone"][0].kind == "empty"
