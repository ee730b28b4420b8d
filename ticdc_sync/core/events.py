"""The event model shared by all protocols: Kafka records in, staged events out.

Every protocol decoder (in Spark: `ticdc_sync.spark.staging.decode`) turns Kafka records of
`RECORD_SCHEMA` into rows of `EVENT_SCHEMA`. Those rows are what the engine stages in
Delta, orders, collapses and applies. The schemas are Spark SQL DDL strings so that this
module stays pure Python (`plan` prints them) while the Spark package parses them.

Conventions every decoder follows:

* Position of an event = (commit_ts, partition, offset, idx); `idx` is the index of the
  event inside its Kafka message (Open Protocol batches, Canal `data` arrays).
* `kind` is one of `KIND_*`. Every Kafka record yields at least one event row, so the
  consumed offset of each partition can always be recovered from the staged events.
* `before` / `after` hold each column's value as *raw text*, exactly as the protocol
  carried it, with JSON string quoting removed (a JSON number is its literal text, a JSON
  string its contents, JSON null is SQL NULL, an object/array its JSON text). Typed
  conversion happens later, per target and per schema version (`ticdc_sync.codecs.*`
  build the Spark SQL expressions for it), because only then is the right schema known.
* A decoder may instead stage a row image as the JSON text of its object, in
  `before_json` / `after_json` (then `before` / `after` are NULL). Canal-JSON and
  Debezium do, so that no map is built at decode and staging writes one string instead
  of a map (benchmarks/README.md). Parsed with `MAP<STRING,STRING>`, the text gives
  exactly the map above (`spark.decode.with_row_maps`). A Canal UPDATE's `before_json`
  is TiCDC's `old` as sent: columns missing from a partial `old` are not filled in from
  `after`.
* `col_meta` holds each column's protocol metadata as text, for when no DDL history
  exists: Canal `mysqlType` (e.g. `int unsigned`, or `decimal(10,4)` with
  content-compatible); Open Protocol `"<type code>,<flags>"` (e.g. `"8,137"`); Debezium the
  compact JSON of the field's schema (`{"type":..,"name":..,"tidb_type":..,"parameters":..}`).
* `commit_ts` is the TiDB TSO. Protocols without one (Canal-JSON without the TiDB
  extension, the plain Debezium MySQL connector) put `ts_ms << 18` there and set
  `exact_ts` false: order then falls back to (that, partition, offset).
* `op` is `I`, `U` or `D` (Debezium `r` snapshot reads are `I`).
* `error` is set only for `KIND_BAD`; `raw_key`/`raw_value` are kept only for bad events.
"""

from __future__ import annotations

KIND_ROW = "row"
KIND_DDL = "ddl"
KIND_WATERMARK = "watermark"
KIND_BAD = "bad"
KIND_EMPTY = "empty"  # a record that carried no event (empty Open Protocol batch)

OP_INSERT = "I"
OP_UPDATE = "U"
OP_DELETE = "D"

# One Kafka record, from either transport (capture files or Kafka).
RECORD_SCHEMA = (
    "topic STRING, partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY"
)

# One decoded event: (name, Spark SQL type) in column order.
EVENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("topic", "STRING"),
    ("partition", "INT"),
    ("offset", "BIGINT"),
    ("idx", "INT"),
    ("kind", "STRING"),
    ("commit_ts", "BIGINT"),
    ("exact_ts", "BOOLEAN"),
    ("db", "STRING"),
    ("tbl", "STRING"),
    ("op", "STRING"),
    ("before", "MAP<STRING, STRING>"),
    ("after", "MAP<STRING, STRING>"),
    ("col_meta", "MAP<STRING, STRING>"),
    ("pk_names", "ARRAY<STRING>"),
    ("ddl_sql", "STRING"),
    ("ddl_hint", "STRING"),  # Canal `type`, Open Protocol DDL action code, "debezium"
    ("table_changes", "STRING"),  # Debezium `tableChanges` JSON text
    ("error", "STRING"),
    ("raw_key", "BINARY"),
    ("raw_value", "BINARY"),
    ("kafka_ts", "BIGINT"),
    # Last, so that a staging table created before they existed gains them at its end.
    ("before_json", "STRING"),
    ("after_json", "STRING"),
)

EVENT_SCHEMA = ", ".join(f"`{name}` {typ}" for name, typ in EVENT_FIELDS)
EVENT_COLUMNS = tuple(name for name, _ in EVENT_FIELDS)
