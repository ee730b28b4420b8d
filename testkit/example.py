"""Regenerate the example project's Dumpling export, captures and expected tables.

`python -m testkit.example DIR` (DIR = projects_example/shop) plays one seeded history of
the upstream database and writes what a team adopting ticdc-sync on it would have:

- `DIR/dumpling/`: a Dumpling export (CSV, Dumpling's layout and defaults) of the tables
  at the snapshot TSO `SNAPSHOT` (a point in the middle of the history);
- `DIR/captures/<topic>/capture.jsonl` for the topics `shop_canal`, `shop_debezium` and
  `shop_open`: the changefeeds, created with `--start-ts` *before* the snapshot (the
  history's first transactions are not in them; the ones between their start and the
  snapshot are in both the export and the stream, so the example shows the overlap);
- `DIR/expected/<table>.json`: the true tables as of the resolved ts, where a row that did
  not change after the snapshot has `_commit_ts` = the snapshot TSO (it was loaded);
- `DIR/expected/dumpling/`: the same tables as a Dumpling export made at the resolved ts
  (the upstream's final state), for `ticdc-sync verify --export` after a run.

The upstream schemas come from `DIR/schema/shop.sql` (via
`ticdc_sync.ddl.parse_schema_sql`) when it exists, else from the built-in fallback below.
Touches nothing else in DIR; deterministic output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ticdc_sync.core.upstream import Column, TableSchema

from .captures import write_captures
from .dumpling import DumplingFlags, write_export
from .encode import EncoderOptions
from .history import History, HistoryConfig, encode, generate, truth_json

TOPICS = {"shop_canal": "canal-json", "shop_debezium": "debezium", "shop_open": "open-protocol"}
DB = "shop"
OPTIONS = EncoderOptions(enable_tidb_extension=True, time_zone="UTC")
EXPORT = "dumpling"
# The upstream's final state (at the changefeeds' resolved ts), exported as Dumpling would.
FINAL_EXPORT = "expected/dumpling"
EXPORT_FLAGS = DumplingFlags(filetype="csv")


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


def split_points(hist: History) -> tuple[int, int]:
    """(changefeed start ts, snapshot TSO): after 30% and 60% of the transactions."""
    txns = [st.commit_ts for st in hist.steps if st.kind == "txn"]
    return txns[len(txns) * 3 // 10], txns[len(txns) * 6 // 10]


def build(project: Path, seed: int = 36) -> dict[str, int]:
    tables = load_tables(project)
    cfg = HistoryConfig(
        seed=seed,
        tables=tables,
        transactions=12,
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
    start, snapshot = split_points(hist)
    sizes: dict[str, int] = {}
    # The export: every table as of the snapshot.
    rows, schemas = hist.truth(snapshot)
    _export(project, EXPORT, rows, schemas, snapshot, sizes)
    # The changefeeds: TiCDC started with --start-ts `start` sends what commits after it.
    stream = History(
        cfg,
        hist.truth(start)[1],
        [st for st in hist.steps if st.commit_ts > start],
    )
    enc = None
    for topic, protocol in TOPICS.items():
        enc = encode(stream, protocol, topic, OPTIONS, seed=seed)
        cap = project / "captures"
        for f in write_captures(cap, enc.records):
            sizes[str(f.relative_to(project))] = f.stat().st_size
    assert enc is not None and enc.resolved_ts is not None and enc.resolved_ts > snapshot
    truth, final = hist.truth(enc.resolved_ts)
    _export(project, FINAL_EXPORT, truth, final, enc.resolved_ts, sizes)
    exp = project / "expected"
    exp.mkdir(parents=True, exist_ok=True)
    for q, table_rows in sorted(truth.items()):
        schema = final[q]
        # A row last changed at or before the snapshot was loaded from the export.
        loaded = [{**r, "_commit_ts": max(r["_commit_ts"], snapshot)} for r in table_rows]
        doc = {
            "table": q,
            "resolved_ts": enc.resolved_ts,
            "snapshot_ts": snapshot,
            "columns": [c.name for c in schema.columns],
            "rows": truth_json(loaded, schema),
        }
        f = exp / f"{schema.table}.json"
        f.write_text(
            json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8"
        )
        sizes[str(f.relative_to(project))] = f.stat().st_size
    return sizes


def _export(
    project: Path,
    where: str,
    rows: dict[str, list[dict]],
    schemas: dict[str, TableSchema],
    at: int,
    sizes: dict[str, int],
) -> None:
    """A Dumpling export of the tables `rows` as of TSO `at` in `project/where`, replacing
    what the folder held."""
    folder = project / where
    for old in folder.glob("*") if folder.is_dir() else ():
        old.unlink()
    files = write_export(folder, [(schemas[q], rows[q]) for q in sorted(rows)], at, EXPORT_FLAGS)
    for f in files:
        sizes[str(f.relative_to(project))] = f.stat().st_size


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
