"""Regenerate the example project's captures and expected tables.

`python -m testkit.example DIR` (DIR = projects_example/shop) writes
`DIR/captures/<topic>/capture.jsonl` for the topics `shop_canal`, `shop_debezium` and
`shop_open` (one seeded history encoded three ways) and `DIR/expected/<table>.json`, the
true tables as of the resolved ts. The upstream schemas come from `DIR/schema/shop.sql`
(via `ticdc_sync.ddl.parse_schema_sql`) when it exists, else from the built-in fallback
below. Touches nothing else in DIR; deterministic output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ticdc_sync.upstream import Column, TableSchema

from .captures import write_captures
from .encode import EncoderOptions
from .history import HistoryConfig, encode, generate, truth_json

TOPICS = {"shop_canal": "canal-json", "shop_debezium": "debezium", "shop_open": "open-protocol"}
DB = "shop"
OPTIONS = EncoderOptions(enable_tidb_extension=True, time_zone="UTC")


def fallback_tables() -> tuple[TableSchema, ...]:
    C = Column
    return (
        TableSchema(
            DB,
            "customers",
            (
                C("id", "int", nullable=False),
                C("name", "varchar", length=64, nullable=False),
                C("email", "varchar", length=128),
                C("created_at", "timestamp", nullable=False),
            ),
            ("id",),
        ),
        TableSchema(
            DB,
            "orders",
            (
                C("id", "bigint", nullable=False),
                C("customer_id", "int", nullable=False),
                C(
                    "status",
                    "enum",
                    members=("pending", "paid", "shipped", "cancelled"),
                    nullable=False,
                    has_default=True,
                    default="pending",
                ),
                C("total", "decimal", precision=10, scale=2, nullable=False),
                C("created_at", "datetime", fsp=3, nullable=False),
                C("note", "text"),
            ),
            ("id",),
        ),
        TableSchema(
            DB,
            "items",
            (
                C("order_id", "bigint", nullable=False),
                C("line_no", "int", nullable=False),
                C("sku", "varchar", length=32, nullable=False),
                C("qty", "int", nullable=False, has_default=True, default="1"),
                C("price", "decimal", precision=10, scale=2, nullable=False),
            ),
            ("order_id", "line_no"),
        ),
    )


def load_tables(project: Path) -> tuple[TableSchema, ...]:
    sql = project / "schema" / "shop.sql"
    if sql.exists():
        from ticdc_sync.ddl import parse_schema_sql

        tables = parse_schema_sql(sql.read_text(encoding="utf-8"), DB, "schema/shop.sql")
        if tables:
            return tuple(tables)
    return fallback_tables()


def build(project: Path, seed: int = 33) -> dict[str, int]:
    tables = load_tables(project)
    cfg = HistoryConfig(
        seed=seed,
        tables=tables,
        transactions=10,
        max_rows_per_txn=3,
        partitions=2,
        dispatch="index-value",
        watermark_every=3,
        max_watermark_delay=2,
        ddl_count=1,
        allow_drop_column=False,
        replay_probability=0.2,
        p_insert=0.65,
        key_space=12,
    )
    hist = generate(cfg)
    sizes: dict[str, int] = {}
    enc = None
    for topic, protocol in TOPICS.items():
        enc = encode(hist, protocol, topic, OPTIONS)
        cap = project / "captures"
        for f in write_captures(cap, enc.records):
            sizes[str(f.relative_to(project))] = f.stat().st_size
    assert enc is not None
    exp = project / "expected"
    exp.mkdir(parents=True, exist_ok=True)
    for q, rows in sorted(enc.truth.items()):
        schema = enc.schemas[q]
        doc = {
            "table": q,
            "resolved_ts": enc.resolved_ts,
            "columns": [c.name for c in schema.columns],
            "rows": truth_json(rows, schema),
        }
        f = exp / f"{schema.table}.json"
        f.write_text(
            json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8"
        )
        sizes[str(f.relative_to(project))] = f.stat().st_size
    return sizes


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m testkit.example PROJECT_DIR", file=sys.stderr)
        return 2
    sizes = build(Path(argv[0]))
    for name, size in sorted(sizes.items()):
        print(f"{name}\t{size}")
    print(f"total\t{sum(sizes.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
