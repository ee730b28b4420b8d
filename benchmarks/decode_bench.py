"""Decode benchmark: decode_records vs Spark's plain from_json, per protocol, msgs/s.

Usage: python benchmarks/decode_bench.py [-n 200000] [--master local[2]] [--repeat 3]

Generates N capture-like records per protocol (a 6-column table, TiCDC-shaped messages;
Open Protocol batches of 16 events), caches them, then times (best of --repeat) a full
evaluation (`write.format("noop")`) of decode_records next to a plain `from_json` of the
same values with a MAP<STRING,STRING> schema. Not a test; prints a table. `ratio` is
from_json time / decode time for the same records (1.0 = as fast as a bare from_json).
"""

from __future__ import annotations

import argparse
import json
import struct
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core import events
from ticdc_sync.core.model import Protocol, Source
from ticdc_sync.spark.staging.decode import decode_records

BATCH = 16


def _canal(i: int) -> bytes:
    return json.dumps(
        {
            "id": 0,
            "database": "shop",
            "table": "orders",
            "pkNames": ["id"],
            "isDdl": False,
            "type": "UPDATE" if i % 3 else "INSERT",
            "es": 1700000000000 + i,
            "ts": 1700000000000,
            "sql": "",
            "sqlType": {"id": -5, "qty": 4, "price": 3, "note": 12, "ts": 93, "flag": -7},
            "mysqlType": {
                "id": "bigint",
                "qty": "int",
                "price": "decimal",
                "note": "varchar",
                "ts": "timestamp",
                "flag": "bit",
            },
            "data": [
                {
                    "id": str(i),
                    "qty": str(i % 100),
                    "price": "12.50",
                    "note": f"note {i}",
                    "ts": "2023-11-30 12:34:56",
                    "flag": "1",
                }
            ],
            "old": [
                {
                    "id": str(i),
                    "qty": "0",
                    "price": "12.50",
                    "note": f"note {i}",
                    "ts": "2023-11-30 12:34:56",
                    "flag": "0",
                }
            ]
            if i % 3
            else None,
            "_tidb": {"commitTs": 445566778899001122 + i},
        }  # fmt: skip
    ).encode()


def _debezium(i: int) -> bytes:
    fields = [
        {"type": t, "optional": True, "field": f}
        for f, t in [
            ("id", "int64"),
            ("qty", "int32"),
            ("price", "double"),
            ("note", "string"),
            ("ts", "string"),
            ("flag", "boolean"),
        ]
    ]
    row = {
        "id": i,
        "qty": i % 100,
        "price": 12.5,
        "note": f"note {i}",
        "ts": "2023-11-30T12:34:56Z",
        "flag": True,
    }
    payload = {
        "before": None, "after": row, "op": "c", "ts_ms": 1700000000000,
        "source": {"version": "2.4.0.Final", "connector": "TiCDC", "name": "default", "ts_ms": 1700000000000, "db": "shop", "table": "orders", "commit_ts": 445566778899001122 + i},
    }  # fmt: skip
    vs = {"type": "struct", "optional": True, "fields": fields}
    schema = {
        "type": "struct",
        "name": "default.shop.orders.Envelope",
        "fields": [{**vs, "field": "before"}, {**vs, "field": "after"}],
    }
    return json.dumps({"payload": payload, "schema": schema}).encode()


def _open(i: int) -> tuple[bytes, bytes]:
    key, value = struct.pack(">Q", 1), b""
    for j in range(BATCH):
        n = i * BATCH + j
        k = json.dumps(
            {"ts": 445566778899001122 + n, "scm": "shop", "tbl": "orders", "t": 1}
        ).encode()
        v = json.dumps({"u": {"id": {"t": 8, "f": 11, "v": n}, "qty": {"t": 3, "f": 65, "v": n % 100}, "price": {"t": 246, "f": 65, "v": "12.50"}, "note": {"t": 15, "f": 64, "v": f"note {n}"}, "ts": {"t": 7, "f": 64, "v": "2023-11-30 12:34:56"}, "flag": {"t": 16, "f": 64, "v": 1}}}).encode()  # fmt: skip
        key += struct.pack(">Q", len(k)) + k
        value += struct.pack(">Q", len(v)) + v
    return key, value


def _records(spark: SparkSession, protocol: Protocol, n: int):
    def gen(part):
        for i in part:
            if protocol is Protocol.OPEN_PROTOCOL:
                k, v = _open(i)
            else:
                k, v = None, (_canal(i) if protocol is Protocol.CANAL_JSON else _debezium(i))
            yield ("bench", i % 4, i, 1700000000000, k, v)

    rdd = spark.sparkContext.parallelize(range(n), 8).mapPartitions(gen)
    df = spark.createDataFrame(rdd, events.RECORD_SCHEMA).cache()
    df.count()
    return df


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200_000, help="records per protocol")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    spark = (
        SparkSession.builder.master(a.master).appName("decode-bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    print(
        f"{'protocol':<14} {'records':>9} {'events':>9} {'decode ev/s':>12} {'from_json rec/s':>16} {'ratio':>6}"
    )
    for protocol in Protocol:
        recs = _records(spark, protocol, a.n)
        n_events = a.n * (BATCH if protocol is Protocol.OPEN_PROTOCOL else 1)
        src = Source("bench", protocol, ("bench",))
        dec = decode_records(recs, src)
        t_dec = _best(dec.write.format("noop").mode("overwrite").save, a.repeat)
        # Plain from_json of the same values (for Open Protocol: of the binary value as text,
        # which Spark cannot parse; it measures the cost of reading the same bytes).
        plain = recs.select(
            F.from_json(F.col("value").cast("string"), "MAP<STRING,STRING>").alias("j")
        )
        t_js = _best(plain.write.format("noop").mode("overwrite").save, a.repeat)
        print(
            f"{protocol.value:<14} {a.n:>9} {n_events:>9} {n_events / t_dec:>12,.0f} "
            f"{a.n / t_js:>16,.0f} {t_js / t_dec:>6.2f}"
        )
        recs.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
