"""Envelope decoding in Spark: Kafka records (RECORD_SCHEMA) to staged events (EVENT_SCHEMA).

`decode_records(records, source)` is one lazy DataFrame transformation; nothing is
collected. Canal-JSON and Debezium are parsed by Spark's `from_json` with fixed envelope
schemas; their row images stay the JSON text of their objects (`before_json`/
`after_json`), which apply parses with STRING fields: Spark renders non-string JSON tokens
as their text, so values stay raw as the event conventions in `ticdc_sync.core.events` require.
Open Protocol's images are built here, as MAP<STRING,STRING>.
Open Protocol's binary batch framing (codec facts 2.1) is split by an Arrow-vectorized
`mapInArrow` function into per-event JSON texts, which `from_json` then parses.

Every record yields at least one event row; a record that cannot be decoded becomes a
`bad` event with the reason and its raw key/value. Typed value conversion is not done
here (see `ticdc_sync.codecs`). This module must not apply, order or deduplicate events.
It stays one module: the three protocols' decoders share its column helpers and `_finish`,
which gives every staged event row its one shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ticdc_sync.codecs.large_message import CLAIM_CHECK, HANDLE_KEY_ONLY, Unwrap
from ticdc_sync.codecs.open_framing import split_open_protocol
from ticdc_sync.core import events
from ticdc_sync.core.model import Protocol, Source
from ticdc_sync.core.sqlgen import sql_string
from ticdc_sync.spark.runtime.remote import is_connect
from ticdc_sync.spark.staging.large_messages import unreadable_storage, unwrap_for, unwrapped


def _e(sql: str) -> Column:
    return F.expr(sql)


def _lit_null(typ: str) -> Column:
    return F.lit(None).cast(typ)


def _dup_keys(m: str) -> str:
    """SQL: the map has duplicate keys (JSON objects may repeat a name; Spark keeps both)."""
    return f"({m} IS NOT NULL AND size(map_keys({m})) != size(array_distinct(map_keys({m}))))"


def _dup_keys_text(keys: str) -> str:
    """SQL: the object whose `json_object_keys` are `keys` repeats a name."""
    return f"({keys} IS NOT NULL AND size({keys}) != size(array_distinct({keys})))"


def _finish(df: DataFrame) -> DataFrame:
    """Select exactly EVENT_SCHEMA; keep raw bytes only for bad events; error only for bad."""
    bad = F.col("kind") == events.KIND_BAD
    cols = []
    for name, typ in events.EVENT_FIELDS:
        if name == "raw_key":
            c = F.when(bad, F.col("key"))
        elif name == "raw_value":
            c = F.when(bad, F.col("value"))
        elif name == "kafka_ts":
            c = F.col("timestamp")
        elif name == "error":
            c = F.when(bad, F.col("error"))
        elif name in ("topic", "partition", "offset", "kind", "idx"):
            c = F.col(name)
        else:
            # A bad event keeps only its position and whatever identifies it.
            keep = name in ("commit_ts", "exact_ts", "db", "tbl")
            c = F.col(name) if keep else F.when(~bad, F.col(name))
        cols.append(c.cast(typ).alias(name))
    return df.select(*cols)


def _kind(error: str, kind_sql: str) -> str:
    return f"CASE WHEN ({error}) IS NOT NULL THEN '{events.KIND_BAD}' ELSE {kind_sql} END"


# ---------------------------------------------------------------------------- Canal-JSON

CANAL_SCHEMA = (
    "id BIGINT, database STRING, table STRING, pkNames ARRAY<STRING>, isDdl BOOLEAN, "
    "type STRING, es BIGINT, ts BIGINT, sql STRING, mysqlType MAP<STRING,STRING>, "
    "data ARRAY<STRING>, old ARRAY<STRING>, "
    "_tidb STRUCT<commitTs: BIGINT, watermarkTs: BIGINT, onlyHandleKey: BOOLEAN, "
    "claimCheckLocation: STRING>, _corrupt_record STRING"
)

_JSON_BAD = (
    "CASE WHEN get_json_object(v, '$') IS NULL THEN 'invalid JSON: not a JSON document' "
    "WHEN NOT startswith(ltrim(v), '{{') THEN 'invalid {p}: the value is JSON but not an object' "
    "ELSE 'invalid {p}: a field has the wrong JSON type or the JSON is malformed' END"
)


def _decode_canal(records: DataFrame) -> DataFrame:
    # Trailing whitespace/CRLF tolerated (tiflow #11707): from_json ignores it. `pvalue`:
    # the value with TiCDC's large-message handling undone (`large_messages`).
    df = records.withColumn("v", F.expr("CAST(pvalue AS STRING)")).withColumn(
        "j", F.from_json("v", CANAL_SCHEMA, {"mode": "PERMISSIVE"})
    )
    is_row = "j.type IN ('INSERT', 'UPDATE', 'DELETE') AND NOT coalesce(j.isDdl, false)"
    df = df.withColumn("is_row", _e(f"coalesce({is_row}, false)"))
    # One event per element of `data` (several rows per message in Alibaba Canal, facts 1.1).
    df = df.select(
        "*", F.posexplode_outer(F.when(F.col("is_row"), F.col("j.data"))).alias("idx", "d")
    )
    df = df.withColumn("idx", F.coalesce("idx", F.lit(0)))
    df = df.withColumn("o", _e("try_element_at(j.old, idx + 1)"))
    # Row images stay JSON text (`data`/`old` elements as STRING: Spark copies each
    # object's text instead of building a map). The names of each image, for the checks
    # below; NULL when the element is not a JSON object.
    df = df.withColumn("dk", _e("IF(is_row, json_object_keys(d), NULL)"))
    df = df.withColumn("ok", _e("IF(is_row, json_object_keys(o), NULL)"))
    wm = "j.type = 'TIDB_WATERMARK'"
    ddl = "coalesce(j.isDdl, false)"
    # Without the TiDB extension there is no commitTs (codec facts 1.6): `es` is the commit
    # time in ms. The offset within the partition fills the TSO's 18 logical bits, so events
    # of one partition sharing an `es` keep their offset order and a DDL never shares its
    # position in the order with a row (an approximation; `plan` warns about it).
    commit = "coalesce(j._tidb.commitTs, shiftleft(j.es, 18) + pmod(`offset`, 262144))"
    error = f"""CASE
      WHEN value IS NULL OR length(value) = 0 THEN 'empty Kafka value: not a Canal-JSON message'
      WHEN unwrap_error IS NOT NULL THEN unwrap_error
      WHEN j IS NULL THEN 'blank Kafka value: not a Canal-JSON message'
      WHEN j._corrupt_record IS NOT NULL THEN {_JSON_BAD.format(p="Canal-JSON")}
      WHEN j.type IS NULL THEN 'invalid Canal-JSON: missing field type'
      WHEN coalesce(j._tidb.onlyHandleKey, false)
        THEN concat('{HANDLE_KEY_ONLY} (commit_ts ', coalesce(CAST(j._tidb.commitTs AS STRING), 'unknown'), ')')
      WHEN j._tidb.claimCheckLocation IS NOT NULL
        THEN concat('{CLAIM_CHECK} (location ', j._tidb.claimCheckLocation, ')')
      WHEN {wm} THEN IF(j._tidb.watermarkTs IS NULL,
        'Canal-JSON TIDB_WATERMARK without _tidb.watermarkTs', NULL)
      WHEN {ddl} THEN CASE
        WHEN j.sql IS NULL THEN 'Canal-JSON DDL without sql'
        WHEN {commit} IS NULL THEN 'Canal-JSON DDL without _tidb.commitTs or es' END
      WHEN is_row THEN CASE
        WHEN d IS NULL THEN concat('Canal-JSON ', j.type, ' without data')
        WHEN j.database IS NULL OR j.table IS NULL OR j.table = ''
          THEN 'Canal-JSON row event without database/table'
        WHEN {commit} IS NULL THEN 'Canal-JSON row event without _tidb.commitTs or es'
        WHEN dk IS NULL OR (o IS NOT NULL AND ok IS NULL)
          THEN 'invalid Canal-JSON: an element of data or old is not a JSON object'
        WHEN {_dup_keys_text("dk")} OR {_dup_keys_text("ok")}
          THEN 'Canal-JSON row repeats a column name'
        WHEN j.type = 'UPDATE' AND o IS NULL
          THEN 'Canal-JSON UPDATE without the old row for this data element' END
      ELSE concat('unknown Canal-JSON type ', j.type) END"""
    df = df.withColumn("error", _e(error))
    kind = (
        f"CASE WHEN {wm} THEN '{events.KIND_WATERMARK}' WHEN {ddl} THEN '{events.KIND_DDL}' "
        f"ELSE '{events.KIND_ROW}' END"
    )
    df = df.withColumn("kind", _e(_kind("error", kind)))
    # UPDATE: `old` is staged as sent. A partial `old` (Alibaba Canal,
    # only-output-updated-columns, content-compatible; facts 1.5) is completed from `data`
    # where it is read: apply takes a key's old value from `old`, else from `data`, and
    # `with_row_maps` fills the whole map.
    return _finish(
        df.select(
            "topic",
            "partition",
            "offset",
            "timestamp",
            "key",
            "value",
            "idx",
            "kind",
            "error",
            _e(f"IF({wm}, j._tidb.watermarkTs, {commit})").alias("commit_ts"),
            _e(f"{wm} OR j._tidb.commitTs IS NOT NULL").alias("exact_ts"),
            _e("nullif(j.database, '')").alias("db"),
            _e("nullif(j.table, '')").alias("tbl"),
            _e(
                "CASE j.type WHEN 'INSERT' THEN 'I' WHEN 'UPDATE' THEN 'U' WHEN 'DELETE' THEN 'D' END"
            ).alias("op"),
            _lit_null("MAP<STRING,STRING>").alias("before"),
            _lit_null("MAP<STRING,STRING>").alias("after"),
            _e("IF(is_row, j.mysqlType, NULL)").alias("col_meta"),
            _e("IF(is_row, j.pkNames, NULL)").alias("pk_names"),
            _e(f"IF({ddl}, j.sql, NULL)").alias("ddl_sql"),
            _e(f"IF({ddl}, j.type, NULL)").alias("ddl_hint"),
            _lit_null("STRING").alias("table_changes"),
            _e("CASE j.type WHEN 'UPDATE' THEN o WHEN 'DELETE' THEN d END").alias("before_json"),
            _e("IF(j.type IN ('INSERT', 'UPDATE'), d, NULL)").alias("after_json"),
        ).withColumn("op", _e("IF(kind = 'row', op, NULL)"))
    )


# ---------------------------------------------------------------------------- Debezium

_DBZ_PAYLOAD_FIELDS = (
    # Row images stay JSON text, as for Canal-JSON (`_decode_canal`).
    ("before", "STRING"),
    ("after", "STRING"),
    ("source", "STRUCT<db: STRING, table: STRING, commit_ts: BIGINT, ts_ms: BIGINT>"),
    ("op", "STRING"),
    ("ts_ms", "BIGINT"),
    ("ddl", "STRING"),
    ("databaseName", "STRING"),
    ("tableChanges", "STRING"),
)
_DBZ_PAYLOAD = ", ".join(f"{n}: {t}" for n, t in _DBZ_PAYLOAD_FIELDS)
# With schema: {"schema":..., "payload":...}; without (debezium-disable-schema, plain
# connector with schemas.enable=false): the payload fields at the top level.
DEBEZIUM_SCHEMA = (
    "schema STRUCT<name: STRING, fields: ARRAY<STRUCT<field: STRING, fields: ARRAY<STRING>>>>, "
    f"payload STRUCT<{_DBZ_PAYLOAD}>, "
    + ", ".join(f"{n} {t}" for n, t in _DBZ_PAYLOAD_FIELDS)
    + ", _corrupt_record STRING"
)


def _decode_debezium(records: DataFrame) -> DataFrame:
    # `pkey`/`pvalue`: decompressed (`large_messages`), else the record's own.
    df = records.withColumn("v", F.expr("CAST(pvalue AS STRING)")).withColumn(
        "j", F.from_json("v", DEBEZIUM_SCHEMA, {"mode": "PERMISSIVE"})
    )
    bare = "named_struct(" + ", ".join(f"'{n}', j.{n}" for n, _ in _DBZ_PAYLOAD_FIELDS) + ")"
    df = df.withColumn("p", _e(f"IF(j.payload IS NOT NULL, j.payload, {bare})"))
    # Field schemas of the row image (the "after" or "before" struct) as compact JSON text.
    df = df.withColumn(
        "fs",
        _e(
            "coalesce(filter(j.schema.fields, x -> x.field = 'after')[0].fields, "
            "filter(j.schema.fields, x -> x.field = 'before')[0].fields)"
        ),
    )
    df = df.withColumn("fnames", _e("transform(fs, x -> get_json_object(x, '$.field'))"))
    meta_ok = "fs IS NOT NULL AND NOT exists(fnames, x -> x IS NULL) AND size(array_distinct(fnames)) = size(fnames)"
    df = df.withColumn("col_meta", _e(f"IF({meta_ok}, map_from_arrays(fnames, fs), NULL)"))
    df = df.withColumn("kobj", _e("from_json(CAST(pkey AS STRING), 'MAP<STRING,STRING>')"))
    df = df.withColumn(
        "pk_names",
        _e(
            "IF(map_contains_key(kobj, 'payload'), "
            "map_keys(from_json(kobj['payload'], 'MAP<STRING,STRING>')), map_keys(kobj))"
        ),
    )
    tombstone = "value IS NULL OR length(value) = 0"
    op = "p.op"
    is_row = f"{op} IN ('c', 'r', 'u', 'd')"
    is_ddl = f"{op} IS NULL AND p.ddl IS NOT NULL"
    # Plain Debezium MySQL connector: no commit_ts; its binlog time in ms (events conventions).
    # The plain Debezium MySQL connector has no commit_ts: source.ts_ms plus the offset in
    # the logical bits, as for Canal-JSON without the TiDB extension.
    commit = (
        "coalesce(p.source.commit_ts, "
        "shiftleft(coalesce(p.source.ts_ms, p.ts_ms), 18) + pmod(`offset`, 262144))"
    )
    # The names of each image, for the checks below; NULL when it is not a JSON object.
    df = df.withColumn("bk", _e(f"IF({is_row}, json_object_keys(p.before), NULL)"))
    df = df.withColumn("ak", _e(f"IF({is_row}, json_object_keys(p.after), NULL)"))
    error = f"""CASE
      WHEN {tombstone} THEN NULL
      WHEN unwrap_error IS NOT NULL THEN unwrap_error
      WHEN j IS NULL THEN 'blank Kafka value: not a Debezium message'
      WHEN j._corrupt_record IS NOT NULL THEN {_JSON_BAD.format(p="Debezium JSON")}
      WHEN {op} = 'm' THEN IF(p.source.commit_ts IS NULL,
        'Debezium watermark (op m) without source.commit_ts', NULL)
      WHEN {is_ddl} THEN IF({commit} IS NULL, 'Debezium DDL without source.commit_ts', NULL)
      WHEN {op} IS NULL THEN 'not a Debezium change event: no op and no ddl field'
      WHEN {is_row} THEN CASE
        WHEN {op} IN ('c', 'r', 'u') AND p.after IS NULL
          THEN concat('Debezium op ', {op}, ' without after')
        WHEN {op} = 'd' AND p.before IS NULL THEN 'Debezium op d without before'
        WHEN p.source.db IS NULL OR p.source.table IS NULL OR p.source.table = ''
          THEN 'Debezium row event without source.db/source.table'
        WHEN {commit} IS NULL THEN 'Debezium row event without source.commit_ts or ts_ms'
        WHEN (p.before IS NOT NULL AND bk IS NULL) OR (p.after IS NOT NULL AND ak IS NULL)
          THEN 'invalid Debezium: before or after is not a JSON object'
        WHEN {_dup_keys_text("bk")} OR {_dup_keys_text("ak")}
          THEN 'Debezium row repeats a column name' END
      ELSE concat('unknown Debezium op ', {op}) END"""
    df = df.withColumn("error", _e(error))
    kind = (
        f"CASE WHEN {tombstone} THEN '{events.KIND_EMPTY}' "
        f"WHEN {op} = 'm' THEN '{events.KIND_WATERMARK}' "
        f"WHEN {is_ddl} THEN '{events.KIND_DDL}' ELSE '{events.KIND_ROW}' END"
    )
    df = df.withColumn("kind", _e(_kind("error", kind)))
    row = "kind = 'row'"
    return _finish(
        df.select(
            "topic",
            "partition",
            "offset",
            "timestamp",
            "key",
            "value",
            F.lit(0).alias("idx"),
            "kind",
            "error",
            _e(f"IF(kind = 'watermark', p.source.commit_ts, {commit})").alias("commit_ts"),
            _e("p.source.commit_ts IS NOT NULL").alias("exact_ts"),
            _e("nullif(coalesce(p.source.db, p.databaseName), '')").alias("db"),
            _e("nullif(p.source.table, '')").alias("tbl"),
            _e(
                f"IF({row}, CASE {op} WHEN 'c' THEN 'I' WHEN 'r' THEN 'I' "
                "WHEN 'u' THEN 'U' WHEN 'd' THEN 'D' END, NULL)"
            ).alias("op"),
            _lit_null("MAP<STRING,STRING>").alias("before"),
            _lit_null("MAP<STRING,STRING>").alias("after"),
            _e(f"IF({row}, col_meta, NULL)").alias("col_meta"),
            _e(f"IF({row}, pk_names, NULL)").alias("pk_names"),
            _e("IF(kind = 'ddl', p.ddl, NULL)").alias("ddl_sql"),
            _e("IF(kind = 'ddl', 'debezium', NULL)").alias("ddl_hint"),
            _e("IF(kind = 'ddl', p.tableChanges, NULL)").alias("table_changes"),
            _e(f"IF({row} AND {op} IN ('u', 'd'), p.before, NULL)").alias("before_json"),
            _e(f"IF({row} AND {op} != 'd', p.after, NULL)").alias("after_json"),
        )
    )


# ---------------------------------------------------------------------------- Open Protocol

SPLIT_SCHEMA = (
    "topic STRING, partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY, "
    "idx INT, ev_key STRING, ev_value STRING, frame_error STRING"
)


def _split_batches(batches: Iterator, unwrap: Unwrap | None = None) -> Iterator:
    """mapInArrow body: split every record of each Arrow batch into per-event rows, each
    event's large-message handling undone by `unwrap` (`large_messages`)."""
    import pyarrow as pa

    out_schema = pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("idx", pa.int32()),
            ("ev_key", pa.string()),
            ("ev_value", pa.string()),
            ("frame_error", pa.string()),
        ]
    )
    for rb in batches:
        cols = {
            name: rb.column(name).to_pylist()
            for name in ("topic", "partition", "offset", "timestamp", "key", "value")
        }
        acc: dict[str, list] = {f.name: [] for f in out_schema}
        for r in range(rb.num_rows):
            k, v = cols["key"][r], cols["value"][r]
            try:
                events = split_open_protocol(k, v, unwrap and unwrap.open_event)
            except OSError as e:
                raise unreadable_storage(rb, r, e) from None
            for idx, ek, ev, err in events:
                acc["topic"].append(cols["topic"][r])
                acc["partition"].append(cols["partition"][r])
                acc["offset"].append(cols["offset"][r])
                acc["timestamp"].append(cols["timestamp"][r])
                acc["key"].append(k)
                acc["value"].append(v)
                acc["idx"].append(idx)
                acc["ev_key"].append(ek)
                acc["ev_value"].append(ev)
                acc["frame_error"].append(err)
        yield pa.RecordBatch.from_pydict(acc, schema=out_schema)


OPEN_KEY_SCHEMA = (
    "ts BIGINT, scm STRING, tbl STRING, rid BIGINT, ptn BIGINT, t INT, ohk BOOLEAN, "
    "ccl STRING, _corrupt_record STRING"
)
_OPEN_COL = "MAP<STRING, STRUCT<t: INT, h: BOOLEAN, f: BIGINT, v: STRING>>"
OPEN_VALUE_SCHEMA = (
    f"u {_OPEN_COL}, p {_OPEN_COL}, d {_OPEN_COL}, q STRING, t INT, _corrupt_record STRING"
)


def _decode_open(records: DataFrame, unwrap: Unwrap) -> DataFrame:
    split = partial(_split_batches, unwrap=unwrap) if unwrap.active else _split_batches
    df = records.select("topic", "partition", "offset", "timestamp", "key", "value").mapInArrow(
        split, SPLIT_SCHEMA
    )
    df = df.withColumn("k", F.from_json("ev_key", OPEN_KEY_SCHEMA, {"mode": "PERMISSIVE"}))
    df = df.withColumn(
        "w",
        _e(
            f"IF(k.t IN (1, 2), from_json(ev_value, '{OPEN_VALUE_SCHEMA}', map('mode', 'PERMISSIVE')), NULL)"
        ),
    )
    empty = "ev_key IS NULL AND frame_error IS NULL"
    img = "coalesce(w.u, w.d)"
    error = f"""CASE
      WHEN frame_error IS NOT NULL THEN frame_error
      WHEN {empty} THEN NULL
      WHEN k IS NULL OR k._corrupt_record IS NOT NULL
        THEN concat('Open Protocol event ', idx, ': key is not a valid JSON object')
      WHEN k.t IS NULL THEN concat('Open Protocol event ', idx, ': key without t (message type)')
      WHEN coalesce(k.ohk, false)
        THEN concat('{HANDLE_KEY_ONLY} (commit_ts ', coalesce(CAST(k.ts AS STRING), 'unknown'), ')')
      WHEN k.ccl IS NOT NULL THEN concat('{CLAIM_CHECK} (location ', k.ccl, ')')
      WHEN k.t = 3 THEN IF(k.ts IS NULL, 'Open Protocol resolved event without ts', NULL)
      WHEN k.t NOT IN (1, 2) THEN concat('unknown Open Protocol message type t=', k.t)
      WHEN w IS NULL OR w._corrupt_record IS NOT NULL
        THEN concat('Open Protocol event ', idx, ': value is not a valid JSON object of the expected shape')
      WHEN k.ts IS NULL THEN concat('Open Protocol event ', idx, ': key without ts')
      WHEN k.t = 2 THEN IF(w.q IS NULL, 'Open Protocol DDL event without q', NULL)
      WHEN {img} IS NULL THEN 'Open Protocol row event without u or d'
      WHEN w.u IS NOT NULL AND w.d IS NOT NULL THEN 'Open Protocol row event with both u and d'
      WHEN k.scm IS NULL OR k.tbl IS NULL OR k.tbl = '' THEN 'Open Protocol row event without scm/tbl'
      WHEN {_dup_keys("w.u")} OR {_dup_keys("w.p")} OR {_dup_keys("w.d")}
        THEN 'Open Protocol row repeats a column name' END"""
    df = df.withColumn("error", _e(error))
    kind = (
        f"CASE WHEN {empty} THEN '{events.KIND_EMPTY}' WHEN k.t = 3 THEN '{events.KIND_WATERMARK}' "
        f"WHEN k.t = 2 THEN '{events.KIND_DDL}' ELSE '{events.KIND_ROW}' END"
    )
    df = df.withColumn("kind", _e(_kind("error", kind)))
    row = "kind = 'row'"
    vals = "transform_values({m}, (c, x) -> x.v)"
    # UPDATE with only-output-updated-columns: `p` holds changed columns only (facts 2.3).
    before_u = "transform_values(w.u, (c, x) -> IF(map_contains_key(w.p, c), w.p[c].v, x.v))"
    pk = f"map_keys(map_filter({img}, (c, x) -> (coalesce(x.f, 0) & 8) != 0))"
    hk = f"map_keys(map_filter({img}, (c, x) -> coalesce(x.h, false) OR (coalesce(x.f, 0) & 2) != 0))"
    return _finish(
        df.select(
            "topic",
            "partition",
            "offset",
            "timestamp",
            "key",
            "value",
            "idx",
            "kind",
            "error",
            _e("k.ts").alias("commit_ts"),
            _e("k.ts IS NOT NULL").alias("exact_ts"),
            _e("nullif(k.scm, '')").alias("db"),
            _e("nullif(k.tbl, '')").alias("tbl"),
            _e(
                f"IF({row}, CASE WHEN w.d IS NOT NULL THEN 'D' WHEN w.p IS NOT NULL THEN 'U' ELSE 'I' END, NULL)"
            ).alias("op"),
            _e(
                f"IF({row}, CASE WHEN w.d IS NOT NULL THEN {vals.format(m='w.d')} "
                f"WHEN w.p IS NOT NULL THEN {before_u} END, NULL)"
            ).alias("before"),
            _e(f"IF({row}, {vals.format(m='w.u')}, NULL)").alias("after"),
            _e(
                f"IF({row}, transform_values({img}, (c, x) -> concat(x.t, ',', coalesce(x.f, 0))), NULL)"
            ).alias("col_meta"),
            _e(f"IF({row}, IF(size({pk}) > 0, {pk}, {hk}), NULL)").alias("pk_names"),
            _e("IF(kind = 'ddl', w.q, NULL)").alias("ddl_sql"),
            _e("IF(kind = 'ddl', CAST(w.t AS STRING), NULL)").alias("ddl_hint"),
            _lit_null("STRING").alias("table_changes"),
            _lit_null("STRING").alias("before_json"),
            _lit_null("STRING").alias("after_json"),
        )
    )


# ---------------------------------------------------------------------------- entry point


def decode_records(
    records: DataFrame,
    source: Source,
    floors: dict[tuple[str, int], int] | None = None,
    seeded: Iterable[tuple[str, str]] = (),
) -> DataFrame:
    """Decode Kafka records (events.RECORD_SCHEMA) of `source` into events.EVENT_SCHEMA rows.

    Lazy: returns a DataFrame plan; the caller decides when to evaluate or stage it.
    `floors`: for sources without commit_ts, the highest approximate ts already staged per
    (topic, partition), so order keeps rising across batches (see `_monotonic_inexact`).
    `seeded`: upstream (db, tbl) with a declared schema (schema/*.sql); their rows get no
    `col_meta` (see `_drop_seeded_meta`).
    """
    out = _decode(records, source)
    if not source.has_commit_ts:
        out = _monotonic_inexact(out, floors or {})
    return _drop_seeded_meta(out, seeded)


def with_row_maps(df: DataFrame) -> DataFrame:
    """Staged or decoded events with every row image as a map in `before` / `after`,
    whichever way the decoder staged it (`events`: maps, or JSON text in `before_json` /
    `after_json`); without the text columns. An UPDATE's partial `before` (a partial
    Canal `old`, codec facts 1.5: a key present with null means "changed from NULL") is
    completed from `after`, as Canal decoding did before it staged text (a Debezium
    `before` was staged as sent); a complete one, TiCDC's default, is returned as it is.
    For tests and inspection: the engine reads the text directly."""
    m = "MAP<STRING,STRING>"
    old = f"from_json(before_json, '{m}')"
    new = f"from_json(after_json, '{m}')"
    filled = (
        f"IF(size(array_except(map_keys({new}), map_keys({old}))) = 0, {old}, "
        f"transform_values({new}, (k, x) -> IF(map_contains_key({old}, k), {old}[k], x)))"
    )
    before = (
        f"CASE WHEN before_json IS NULL THEN before "
        f"WHEN after_json IS NULL THEN {old} ELSE {filled} END"
    )
    cols = []
    for c in df.columns:
        if c == "before":
            cols.append(F.expr(before).alias(c))
        elif c == "after":
            cols.append(F.expr(f"coalesce(after, {new})").alias(c))
        elif c not in ("before_json", "after_json"):
            cols.append(F.col(f"`{c}`"))
    return df.select(*cols)


def _drop_seeded_meta(df: DataFrame, seeded: Iterable[tuple[str, str]]) -> DataFrame:
    """NULL `col_meta` for rows of tables with a declared schema.

    Column metadata is read only to infer a schema for a table that has none
    (the plan infers only for a table with no seed, no recorded version and no replayable
    DDL, and a seed covers every commit_ts). It is the widest column staged, a sizeable
    share of the staging write for seeded tables (benchmarks/README.md). Names compare
    case-insensitively, as the seeds are looked up; identifiers cannot hold U+0000.
    """
    names = sorted({f"{db.lower()}\u0000{tbl.lower()}" for db, tbl in seeded})
    if not names:
        return df
    key = F.concat(F.lower("db"), F.lit("\u0000"), F.lower("tbl"))
    meta = F.when(key.isin(names), F.lit(None).cast("MAP<STRING, STRING>")).otherwise(
        F.col("col_meta")
    )
    return df.withColumn("col_meta", meta)


def _monotonic_inexact(df: DataFrame, floors: dict[tuple[str, int], int]) -> DataFrame:
    """Without commit_ts (Canal-JSON without the TiDB extension, codec facts 1.6) the order
    within a partition is its offsets: `es` can run backwards across messages. The ms part
    of the approximate ts becomes the running maximum of `es` in offset order (starting at
    what earlier batches staged), the logical bits keep the offset, so ts rises with offset.
    """
    ms = "shiftright(commit_ts, 18)"
    floor = "CAST(NULL AS BIGINT)"
    if floors:
        whens = " ".join(
            f"WHEN topic = {sql_string(t)} AND `partition` = {p} THEN {int(v) >> 18}"
            for (t, p), v in sorted(floors.items())
        )
        floor = f"CASE {whens} END"
    running = (
        f"max(IF(exact_ts, NULL, {ms})) OVER (PARTITION BY topic, `partition` "
        "ORDER BY `offset`, idx ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    )
    fixed = f"shiftleft(greatest({running}, {floor}), 18) + pmod(`offset`, 262144)"
    cols = [
        F.expr(f"IF(exact_ts OR commit_ts IS NULL, commit_ts, {fixed})").alias("commit_ts")
        if c == "commit_ts"
        else F.col(f"`{c}`")
        for c in df.columns
    ]
    return df.select(*cols)


def _decode(records: DataFrame, source: Source) -> DataFrame:
    missing = {"topic", "partition", "offset", "timestamp", "key", "value"} - set(records.columns)
    if missing:
        raise ValueError(f"records lack columns {sorted(missing)}; expected {events.RECORD_SCHEMA}")
    recs = records.select(
        F.col("topic").cast("STRING"),
        F.col("partition").cast("INT"),
        F.col("offset").cast("BIGINT"),
        F.col("timestamp").cast("BIGINT"),
        F.col("key").cast("BINARY"),
        F.col("value").cast("BINARY"),
    )
    unwrap = unwrap_for(source, is_connect(records))
    if source.protocol is Protocol.CANAL_JSON:
        return _decode_canal(unwrapped(recs, source, unwrap))
    if source.protocol is Protocol.DEBEZIUM:
        return _decode_debezium(unwrapped(recs, source, unwrap))
    if source.protocol is Protocol.OPEN_PROTOCOL:
        return _decode_open(recs, unwrap)
    raise ValueError(f"unknown protocol {source.protocol!r}")
