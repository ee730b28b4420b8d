"""Seeded TiCDC-like change histories with their true final tables.

`generate(HistoryConfig)` builds a logical history: transactions of 1-N row changes over
several tables (inserts, updates, deletes, key moves, delete then re-insert of a key),
optional ADD/DROP COLUMN DDL, and per-partition watermarks that arrive at different times.
`Scripted` writes a history by hand instead: tables created, altered (columns added, dropped,
renamed), renamed and dropped, row changes, watermarks, in the order a test needs.
`encode(history, protocol, topic, options, since=...)` turns it into Kafka records exactly as
TiCDC would place them (`encode.TopicProducer`), from the changefeed's first commit `since`
on, adds at-least-once replays, and returns the records with the truth: each table as of the
resolved ts (the minimum over partitions of the last watermark each received), which is
what a correct consumer must produce. `History.truth(upto)` is also the upstream as a
Dumpling export at snapshot `upto` sees it.

Values are logical Python values (see `values`). The generator never puts NULL in a column
that has a non-NULL DEFAULT, because Debezium would show the default instead (codec facts
3.2 surprise 1) and the truths of the protocols would differ. Pure Python; no pyspark.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ticdc_sync.core.upstream import Column, TableSchema

from . import values as V
from .encode import (
    OP_D,
    OP_I,
    OP_U,
    DdlChange,
    EncoderOptions,
    Record,
    RowChange,
    TopicProducer,
    index_value_partition,
    make_encoder,
    make_tso,
    table_partition,
    transaction_events,
)
from .large_message import LargeMessageConfig, large_encoder
from .partitions import Layout, Part


def default_tables(db: str = "app") -> tuple[TableSchema, ...]:
    """Three tables: a wide all-types table, a composite-key table, a small blob table."""
    C = Column
    accounts = TableSchema(
        db,
        "accounts",
        (
            C("id", "bigint", nullable=False),
            C("name", "varchar", length=32, nullable=False),
            C("email", "varchar", length=64),
            C(
                "balance",
                "decimal",
                precision=12,
                scale=2,
                nullable=False,
                has_default=True,
                default="0.00",
            ),
            C(
                "status",
                "enum",
                members=("new", "active", "closed"),
                nullable=False,
                has_default=True,
                default="new",
            ),
            C("tags", "set", members=("a", "b", "c")),
            C("score", "double"),
            C("ratio", "float"),
            C("born", "date"),
            C("created", "datetime", fsp=3, nullable=False),
            C("updated", "timestamp", fsp=6),
            C("dur", "time", fsp=3),
            C("flags", "bit", length=8),
            C("active", "bit", length=1),
            C("yr", "year"),
            C("avatar", "varbinary", length=16, binary=True),
            C("bio", "text"),
            C("doc", "json"),
            C("big", "bigint", unsigned=True),
            C("tiny", "tinyint"),
            C("small", "smallint", unsigned=True),
            C("med", "mediumint"),
        ),
        primary_key=("id",),
    )
    lines = TableSchema(
        db,
        "order_lines",
        (
            C("order_id", "int", nullable=False),
            C("line_no", "smallint", nullable=False),
            C("sku", "char", length=8, nullable=False),
            C("qty", "int", unsigned=True, nullable=False, has_default=True, default="1"),
            C("price", "decimal", precision=10, scale=2),
            C("note", "varchar", length=64),
        ),
        primary_key=("order_id", "line_no"),
    )
    events = TableSchema(
        db,
        "events",
        (
            C("id", "int", unsigned=True, nullable=False),
            C("kind", "varchar", length=16, nullable=False),
            C("payload", "blob", binary=True),
            C("at", "timestamp"),
        ),
        primary_key=("id",),
    )
    return (accounts, lines, events)


@dataclass(frozen=True)
class HistoryConfig:
    seed: int = 0
    tables: tuple[TableSchema, ...] | None = None  # None: `default_tables()`
    transactions: int = 120
    max_rows_per_txn: int = 10
    partitions: int = 3
    dispatch: str = "table"  # "table" (TiCDC default) or "index-value" (codec facts 0.5)
    watermark_every: int = 4  # transactions between checkpoint ticks
    max_watermark_delay: int = 3  # a partition's watermark may arrive this many txns late
    ddl_count: int = 2  # ADD/DROP COLUMN events (0: none)
    replay_probability: float = 0.15  # after a watermark, re-send earlier records
    start_ms: int = 1_700_000_000_000
    key_space: int = 40  # small: keys are deleted and re-inserted often
    allow_drop_column: bool = True
    p_insert: float = 0.45  # share of row changes that insert (rest: update/delete/key move)  # DDL may drop a column added earlier


@dataclass(frozen=True)
class RowsMoved:
    """What a partition DDL does to rows, with no row events: the rows of `table` with keys
    `gone` leave it (TRUNCATE/DROP PARTITION: gone; EXCHANGE PARTITION: to `other`, whose
    every row comes into `table` in exchange)."""

    table: str
    gone: tuple[tuple, ...]
    other: str | None = None


@dataclass(frozen=True)
class Step:
    """One logical step: a transaction, a DDL, or a watermark reaching one partition."""

    kind: str  # "txn" | "ddl" | "watermark"
    commit_ts: int
    events: tuple[tuple[RowChange, int], ...] = ()  # (change, partition), split and sorted
    ddl: DdlChange | None = None
    partition: int | None = None
    # Columns an ALTER renames (old, new): upstream keeps their values under the new name.
    renamed: tuple[tuple[str, str], ...] = ()
    moved: RowsMoved | None = None  # rows a partition DDL removes or swaps


@dataclass
class History:
    config: HistoryConfig
    initial: dict[str, TableSchema]
    steps: list[Step]

    def resolved_ts(self) -> int | None:
        """Min over partitions of the last watermark received; None if some got none."""
        last: dict[int, int] = {}
        for s in self.steps:
            if s.kind == "watermark":
                assert s.partition is not None
                last[s.partition] = max(last.get(s.partition, 0), s.commit_ts)
        if len(last) < self.config.partitions:
            return None
        return min(last.values())

    def truth(
        self, upto: int | None = None
    ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, TableSchema]]:
        """Tables (rows sorted by key, each with `_commit_ts`) and schemas as of `upto`
        (None: everything)."""
        schemas = dict(self.initial)
        rows: dict[str, dict[tuple, dict[str, Any]]] = {q: {} for q in schemas}
        for s in self.steps:
            if upto is not None and s.commit_ts > upto:
                continue
            if s.kind == "txn":
                for ch, _ in s.events:
                    q = ch.schema.qualified
                    hk = ch.schema.handle_key()
                    if ch.op == OP_D:
                        rows[q].pop(tuple((ch.before or {})[k] for k in hk), None)
                    else:
                        after = dict(ch.after or {})
                        after["_commit_ts"] = ch.commit_ts
                        rows[q][tuple(after[k] for k in hk)] = after
            elif s.kind == "ddl":
                d = s.ddl
                assert d is not None
                if s.moved is not None:
                    m = s.moved
                    leaving = {k: rows[m.table].pop(k) for k in m.gone}
                    if m.other is not None:
                        rows[m.table].update(rows[m.other])
                        rows[m.other] = leaving
                    if d.schema is not None:
                        schemas[d.schema.qualified] = d.schema
                    continue
                if d.old_table is not None:  # RENAME TABLE: the rows go with the table
                    q_old = f"{d.old_db or d.db}.{d.old_table}"
                    moved = schemas.pop(q_old)
                    new_schema = d.schema or moved.with_(db=d.db, table=d.table)
                    schemas[new_schema.qualified] = new_schema
                    rows[new_schema.qualified] = rows.pop(q_old)
                    continue
                if d.schema is None:  # DROP TABLE (or schema-level DDL: no table)
                    schemas.pop(f"{d.db}.{d.table}", None)
                    rows.pop(f"{d.db}.{d.table}", None)
                    continue
                q = d.schema.qualified
                if q not in schemas:  # CREATE TABLE
                    schemas[q] = d.schema
                    rows[q] = {}
                    continue
                old = schemas[q]
                for r in rows[q].values():
                    for a, b in s.renamed:
                        r[b] = r.pop(a)
                old_names = {c.name for c in old.columns}
                old_names = (old_names - {a for a, _ in s.renamed}) | {b for _, b in s.renamed}
                new_cols = {c.name for c in d.schema.columns} - old_names
                gone = old_names - {c.name for c in d.schema.columns}
                for r in rows[q].values():
                    for c in d.schema.columns:
                        if c.name in new_cols:
                            r[c.name] = V.default_value(c)  # existing rows get the default
                    for g in gone:
                        r.pop(g, None)
                schemas[q] = d.schema
        out = {}
        for q, tbl in rows.items():
            names = [*schemas[q].column_names(), "_commit_ts"]
            out[q] = [
                {n: r.get(n) for n in names}
                for _, r in sorted(tbl.items(), key=lambda kv: _sort_key(kv[0]))
            ]
        return out, schemas


def _sort_key(k: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, (int, float, Decimal)) else (1, str(v)) for v in k)


# ---------------------------------------------------------------------------------------
# Value generation

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "δέλτα",
    "ünï",
    "<b>&amp;",
    'quo"te',
    "back\\slash",
    "tab\tnl\n",
    "emoji😀",
    "中文",
]


def gen_value(col: Column, rng: random.Random, allow_null: bool = True) -> Any:
    """A random logical value that every protocol carries exactly (no zero dates, floats
    exact in float32, decimals within double precision, years >= 1970)."""
    if (
        allow_null
        and col.nullable
        and not (col.has_default and col.default is not None)
        and rng.random() < 0.15
    ):
        return None
    b = V.base_of(col)
    if b in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        bits = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}[b]
        if col.unsigned:
            return rng.choice([0, 1, (1 << bits) - 1, rng.randrange(1 << bits)])
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return rng.choice(
            [lo, hi, 0, rng.randint(lo, hi), rng.randint(max(lo, -1000), min(hi, 1000))]
        )
    if b == "decimal":
        p, s = col.precision or 10, col.scale or 0
        digits = min(p, 15)
        n = rng.randrange(10**digits) * rng.choice([1, -1])
        return Decimal(n).scaleb(-s)
    if b == "float":
        return rng.randint(-(1 << 20), 1 << 20) / 8.0
    if b == "double":
        return rng.choice([rng.uniform(-1e6, 1e6), 0.1, 1e-7, 1e21, rng.random()])
    if b in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext") and not V.is_binary(
        col
    ):
        n = min(col.length or 24, 24)
        s = rng.choice(_WORDS) + str(rng.randrange(1000))
        return s[:n].rstrip(" ")
    if V.is_binary(col):
        n = min(col.length or 24, 24)
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, n)))
    if b == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(0, 30000))
    if b in ("datetime", "timestamp"):
        base = dt.datetime(1971, 1, 1) if b == "timestamp" else dt.datetime(1970, 1, 1)
        v = base + dt.timedelta(
            seconds=rng.randint(0, 2_000_000_000), microseconds=rng.randrange(1_000_000)
        )
        return V.round_datetime(v, V.fsp_of(col))
    if b == "time":
        micro = rng.randint(-838 * 3600 * 10**6 + 10**6, 838 * 3600 * 10**6 - 10**6)
        return V.fmt_time(dt.timedelta(microseconds=micro), V.fsp_of(col))
    if b == "year":
        return rng.randint(1970, 2155)
    if b == "enum":
        return rng.choice(col.members)
    if b == "set":
        return ",".join(m for m in col.members if rng.random() < 0.5)
    if b == "bit":
        return rng.randrange(1 << min(col.length or 1, 63))
    if b == "json":
        return rng.choice(['{"a": 1}', "[1, 2]", '{"k": "v<>&"}', "null", '"s"'])
    return str(rng.randrange(10**6))


_UNIQUE = [0]


def _unique_value(col: Column, rng: random.Random) -> Any:
    """A fresh value for a unique-key column (unique keys must stay unique upstream)."""
    _UNIQUE[0] += 1
    n = _UNIQUE[0]
    b = V.base_of(col)
    if b in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        return n
    if V.is_binary(col):
        return n.to_bytes(4, "big")
    return f"u{n}-{rng.randrange(1000)}"


def _col_value(schema: TableSchema, col: Column, rng: random.Random) -> Any:
    hk = schema.handle_key()
    if col.name not in hk and any(col.name in uk for uk in schema.unique_keys):
        return _unique_value(col, rng)
    return gen_value(col, rng)


def _new_row(schema: TableSchema, rng: random.Random, key: tuple) -> dict[str, Any]:
    hk = schema.handle_key()
    row = {c.name: _col_value(schema, c, rng) for c in schema.columns}
    row.update(dict(zip(hk, key, strict=True)))
    return row


def _gen_key(schema: TableSchema, rng: random.Random, space: int) -> tuple:
    out = []
    for k in schema.handle_key():
        c = schema.column(k)
        assert c is not None
        b = V.base_of(c)
        if b in ("tinyint", "smallint", "mediumint", "int", "bigint"):
            out.append(
                rng.randint(1, space if len(schema.handle_key()) == 1 else max(2, space // 5))
            )
        else:
            out.append(gen_value(c.with_(nullable=False), rng))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# History


def generate(config: HistoryConfig | None = None) -> History:
    cfg = config or HistoryConfig()
    rng = random.Random(cfg.seed)
    _UNIQUE[0] = 0  # deterministic per call
    tables = list(cfg.tables or default_tables())
    schemas = {t.qualified: t for t in tables}
    initial = dict(schemas)
    live: dict[str, dict[tuple, dict[str, Any]]] = {q: {} for q in schemas}
    deleted: dict[str, list[tuple]] = {q: [] for q in schemas}
    steps: list[Step] = []
    ms = cfg.start_ms
    last_ts = 0
    due: list[tuple[int, int, int]] = []  # (txn index, partition, watermark)
    last_due = dict.fromkeys(range(cfg.partitions), 0)
    ddl_at = sorted(
        rng.sample(
            range(cfg.transactions // 4, cfg.transactions),
            k=min(cfg.ddl_count, cfg.transactions // 2),
        )
    )
    added = 0

    def partition_of(ch: RowChange) -> int:
        if cfg.dispatch == "index-value":
            return index_value_partition(ch, cfg.partitions)
        return table_partition(ch.schema.db, ch.schema.table, cfg.partitions)

    for i in range(cfg.transactions):
        for item in [d for d in due if d[0] <= i]:
            due.remove(item)
            steps.append(Step("watermark", item[2], partition=item[1]))
        ms += rng.randint(1, 40)
        ts = make_tso(ms, rng.randrange(1 << 18))
        if i in ddl_at:
            q = rng.choice(sorted(schemas))
            s = schemas[q]
            droppable = [
                c
                for c in s.columns
                if c.nullable and c.name not in s.handle_key() and c.name.startswith("c_added")
            ]
            if droppable and cfg.allow_drop_column and rng.random() < 0.5:
                c = droppable[0]
                new = s.with_(columns=tuple(x for x in s.columns if x.name != c.name))
                sql = f"ALTER TABLE `{s.db}`.`{s.table}` DROP COLUMN `{c.name}`"
                action = 6
            else:
                added += 1
                c = Column(
                    f"c_added{added}",
                    "varchar",
                    length=20,
                    nullable=True,
                    has_default=True,
                    default=f"d{added}",
                )
                new = s.with_(columns=(*s.columns, c))
                sql = f"ALTER TABLE `{s.db}`.`{s.table}` ADD COLUMN `{c.name}` varchar(20) DEFAULT 'd{added}'"
                action = 5
            schemas[q] = new
            for r in live[q].values():
                for col in new.columns:
                    r.setdefault(col.name, V.default_value(col))
                for gone in set(r) - set(new.column_names()):
                    r.pop(gone)
            steps.append(Step("ddl", ts, ddl=DdlChange(s.db, s.table, sql, action, ts, new)))
            last_ts = ts
            ms += 1
            ts = make_tso(ms, rng.randrange(1 << 18))
        changes: list[RowChange] = []
        touched: set[tuple[str, tuple]] = set()
        for _ in range(rng.randint(1, cfg.max_rows_per_txn)):
            q = rng.choice(sorted(schemas))
            s = schemas[q]
            rows = live[q]
            r = rng.random()
            free_keys = [k for k in rows if (q, k) not in touched]
            rest = (
                (r - cfg.p_insert) / (1 - cfg.p_insert) * 0.55 + 0.45 if r >= cfg.p_insert else 0.0
            )
            if r < cfg.p_insert or not free_keys:
                # insert: sometimes re-insert a deleted key
                if deleted[q] and rng.random() < 0.4:
                    key = deleted[q].pop(rng.randrange(len(deleted[q])))
                else:
                    key = _gen_key(s, rng, cfg.key_space)
                if key in rows or (q, key) in touched:
                    continue
                row = _new_row(s, rng, key)
                rows[key] = row
                touched.add((q, key))
                changes.append(RowChange(s, OP_I, None, dict(row), ts))
            elif rest < 0.75:
                key = rng.choice(free_keys)
                old = rows[key]
                new = dict(old)
                hk = s.handle_key()
                for c in s.columns:
                    if c.name not in hk and rng.random() < 0.4:
                        new[c.name] = _col_value(s, c, rng)
                rows[key] = new
                touched.add((q, key))
                changes.append(RowChange(s, OP_U, dict(old), dict(new), ts))
            elif rest < 0.9:
                key = rng.choice(free_keys)
                old = rows.pop(key)
                deleted[q].append(key)
                touched.add((q, key))
                changes.append(RowChange(s, OP_D, dict(old), None, ts))
            else:
                # key move: an UPDATE of the primary key (TiCDC splits it, codec facts 0.4)
                key = rng.choice(free_keys)
                new_key = _gen_key(s, rng, cfg.key_space * 2)
                if new_key in rows or (q, new_key) in touched:
                    continue
                old = rows.pop(key)
                new = dict(old)
                new.update(dict(zip(s.handle_key(), new_key, strict=True)))
                rows[new_key] = new
                deleted[q].append(key)
                touched.update({(q, key), (q, new_key)})
                changes.append(RowChange(s, OP_U, dict(old), dict(new), ts))
        if not changes:
            continue
        evs = tuple((ch, partition_of(ch)) for ch in transaction_events(changes))
        steps.append(Step("txn", ts, events=evs))
        last_ts = ts
        if (i + 1) % cfg.watermark_every == 0:
            for p in range(cfg.partitions):
                at = max(i + 1 + rng.randint(0, cfg.max_watermark_delay), last_due[p])
                last_due[p] = at
                due.append((at, p, last_ts))
    # watermarks still "in flight" at the end never arrive: some partitions lag behind
    return History(cfg, initial, steps)


class Scripted:
    """A history written step by step (tests that need a given shape of DDL): `create`,
    `alter` (with the schema after it and the columns it renames), `rename`, `drop`, row
    changes (`insert`, `update`, `delete`, one transaction each), `watermark` (on every
    partition). Each step commits 1 s after the one before; each method returns its
    commit_ts. Rows are dicts of logical values (`values`); a column a row leaves out takes
    its DEFAULT. `history()` is the `History` to `encode` and to take truths from."""

    def __init__(
        self,
        db: str = "shop",
        *,
        partitions: int = 2,
        start_ms: int = 1_700_000_000_000,
        seed: int = 0,
        replay_probability: float = 0.15,
    ) -> None:
        self.db = db
        self.partitions = partitions
        self.ms = start_ms
        self.seed = seed
        self.replay_probability = replay_probability
        self.steps: list[Step] = []
        self.schemas: dict[str, TableSchema] = {}
        self.rows: dict[str, dict[tuple, dict[str, Any]]] = {}
        self.layouts: dict[str, Layout] = {}  # partitioned tables (`testkit.partitions`)

    def _ts(self) -> int:
        self.ms += 1000
        return make_tso(self.ms)

    def schema(self, table: str) -> TableSchema:
        return self.schemas[f"{self.db}.{table}"]

    def _ddl(self, d: DdlChange, renamed: tuple[tuple[str, str], ...] = ()) -> int:
        self.steps.append(Step("ddl", d.commit_ts, ddl=d, renamed=renamed))
        return d.commit_ts

    def create(self, schema: TableSchema, layout: Layout | None = None) -> int:
        """CREATE TABLE, partitioned by `layout` when given."""
        from .dumpling import create_table_sql

        q = schema.qualified
        assert q not in self.schemas, q
        self.schemas[q] = schema
        self.rows[q] = {}
        sql = create_table_sql(schema)
        if layout is not None:
            self.layouts[q] = layout
            sql += "\n" + layout.sql()
        return self._ddl(DdlChange(schema.db, schema.table, sql, 3, self._ts(), schema))

    # -- partition DDL (TiDB's semantics: `testkit.partitions`) ------------------------------

    def _partition_ddl(
        self,
        table: str,
        clause: str,
        action: int,
        layout: Layout | None,
        leaving: tuple[str, ...] = (),
        exchange: str | None = None,
    ) -> int:
        """A partition DDL: the rows the partitions `leaving` hold under the layout in force
        before it go (to `exchange`, whose rows come in), then `layout` is in force."""
        q = f"{self.db}.{table}"
        before = self.layouts[q]
        gone = tuple(k for k, r in self.rows[q].items() if before.locate(r) in leaving)
        moved = None
        sql = f"ALTER TABLE `{table}` {clause}"
        extra = None
        if exchange is not None:
            other = f"{self.db}.{exchange}"
            for r in self.rows[other].values():  # WITH VALIDATION
                assert before.locate(r) == leaving[0], ("row outside the partition", r)
            out = {k: self.rows[q].pop(k) for k in gone}
            self.rows[q].update(self.rows[other])
            self.rows[other] = out
            moved = RowsMoved(q, gone, other)
            extra = (self.db, exchange)
            # tiflow rebuilds the query (codec facts 0.3).
            sql = (
                f"ALTER TABLE `{self.db}`.`{table}` EXCHANGE PARTITION `{leaving[0]}` WITH "
                f"TABLE `{self.db}`.`{exchange}`"
            )
        elif leaving:
            for k in gone:
                del self.rows[q][k]
            moved = RowsMoved(q, gone)
        if layout is None:
            del self.layouts[q]
        else:
            self.layouts[q] = layout
            for r in self.rows[q].values():
                layout.locate(r)  # TiDB refuses a layout with no partition for a row
        d = DdlChange(self.db, table, sql, action, self._ts(), self.schemas[q], extra=extra)
        self.steps.append(Step("ddl", d.commit_ts, ddl=d, moved=moved))
        return d.commit_ts

    def truncate_partition(self, table: str, *names: str) -> int:
        """TRUNCATE PARTITION a, b (ALL: every partition)."""
        lay = self.layouts[f"{self.db}.{table}"]
        which = ", ".join(f"`{n}`" for n in names) if names != ("ALL",) else "ALL"
        leaving = tuple(lay.names()) if names == ("ALL",) else names
        return self._partition_ddl(table, f"TRUNCATE PARTITION {which}", 23, lay, leaving)

    def drop_partition(self, table: str, *names: str) -> int:
        lay = self.layouts[f"{self.db}.{table}"]
        after = lay.with_parts([p for p in lay.parts if p.name not in names])
        which = ", ".join(f"`{n}`" for n in names)
        return self._partition_ddl(table, f"DROP PARTITION {which}", 20, after, names)

    def add_partition(self, table: str, *parts: Part) -> int:
        """ADD PARTITION (RANGE / LIST)."""
        lay = self.layouts[f"{self.db}.{table}"]
        defs = ", ".join(p.sql(lay.kind) for p in parts)
        after = lay.with_parts([*lay.parts, *parts])
        return self._partition_ddl(table, f"ADD PARTITION ({defs})", 19, after)

    def add_partitions(self, table: str, n: int) -> int:
        """ADD PARTITION PARTITIONS n (HASH / KEY: TiDB names them p<position>)."""
        lay = self.layouts[f"{self.db}.{table}"]
        have = len(lay.parts)
        after = lay.with_parts([*lay.parts, *(Part(f"p{i}") for i in range(have, have + n))])
        return self._partition_ddl(table, f"ADD PARTITION PARTITIONS {n}", 64, after)

    def coalesce_partition(self, table: str, n: int) -> int:
        lay = self.layouts[f"{self.db}.{table}"]
        after = lay.with_parts(lay.parts[:-n])
        return self._partition_ddl(table, f"COALESCE PARTITION {n}", 64, after)

    def reorganize_partition(self, table: str, names: tuple[str, ...], *parts: Part) -> int:
        lay = self.layouts[f"{self.db}.{table}"]
        first = min(i for i, p in enumerate(lay.parts) if p.name in names)
        kept = [p for p in lay.parts if p.name not in names]
        after = lay.with_parts([*kept[:first], *parts, *kept[first:]])
        which = ", ".join(f"`{n}`" for n in names)
        defs = ", ".join(p.sql(lay.kind) for p in parts)
        clause = f"REORGANIZE PARTITION {which} INTO ({defs})"
        return self._partition_ddl(table, clause, 64, after)

    def partition_by(self, table: str, layout: Layout) -> int:
        """ALTER TABLE ... PARTITION BY (a partitioned table repartitioned, or a plain one
        partitioned: its rows stay)."""
        q = f"{self.db}.{table}"
        if q not in self.layouts:
            self.layouts[q] = layout  # the rows are located under the new layout only
        return self._partition_ddl(table, layout.sql(), 71, layout)

    def remove_partitioning(self, table: str) -> int:
        return self._partition_ddl(table, "REMOVE PARTITIONING", 72, None)

    def exchange_partition(self, table: str, name: str, other: str) -> int:
        """EXCHANGE PARTITION `name` WITH TABLE `other` (WITH VALIDATION)."""
        lay = self.layouts[f"{self.db}.{table}"]
        return self._partition_ddl(table, "", 42, lay, (name,), exchange=other)

    def alter(
        self,
        table: str,
        sql: str,
        schema: TableSchema,
        action: int,
        renamed: tuple[tuple[str, str], ...] = (),
    ) -> int:
        """An ALTER TABLE (`action`: TiDB's ActionType, codec facts 0.3) leaving `schema`."""
        q = f"{self.db}.{table}"
        old = self.schemas[q]
        names = {c.name for c in old.columns} - {a for a, _ in renamed}
        names |= {b for _, b in renamed}
        for r in self.rows[q].values():
            for a, b in renamed:
                r[b] = r.pop(a)
            for c in schema.columns:
                if c.name not in names:
                    r[c.name] = V.default_value(c)
            for gone in set(r) - set(schema.column_names()):
                r.pop(gone)
        self.schemas[q] = schema
        return self._ddl(DdlChange(self.db, table, sql, action, self._ts(), schema), renamed)

    def rename(self, old: str, new: str) -> int:
        schema = self.schemas.pop(f"{self.db}.{old}").with_(table=new)
        self.schemas[schema.qualified] = schema
        self.rows[schema.qualified] = self.rows.pop(f"{self.db}.{old}")
        sql = f"RENAME TABLE `{old}` TO `{new}`"
        return self._ddl(DdlChange(self.db, new, sql, 14, self._ts(), schema, self.db, old))

    def drop(self, table: str) -> int:
        del self.schemas[f"{self.db}.{table}"]
        del self.rows[f"{self.db}.{table}"]
        return self._ddl(DdlChange(self.db, table, f"DROP TABLE `{table}`", 4, self._ts()))

    def _txn(self, changes: list[RowChange]) -> int:
        evs = tuple(
            (ch, table_partition(ch.schema.db, ch.schema.table, self.partitions))
            for ch in transaction_events(changes)
        )
        self.steps.append(Step("txn", changes[0].commit_ts, events=evs))
        return changes[0].commit_ts

    def _key(self, schema: TableSchema, row: dict[str, Any]) -> tuple:
        return tuple(row[k] for k in schema.handle_key())

    def _fits(self, s: TableSchema, row: dict[str, Any]) -> None:
        lay = self.layouts.get(s.qualified)
        if lay is not None:
            lay.locate(row)  # TiDB refuses a row no partition takes

    def insert(self, table: str, *rows: dict[str, Any]) -> int:
        s, ts = self.schema(table), self._ts()
        out = []
        for given in rows:
            row = {c.name: given.get(c.name, V.default_value(c)) for c in s.columns}
            assert set(given) <= set(row), set(given) - set(row)
            self._fits(s, row)
            self.rows[s.qualified][self._key(s, row)] = row
            out.append(RowChange(s, OP_I, None, dict(row), ts))
        return self._txn(out)

    def update(self, table: str, key: Any, **values: Any) -> int:
        s, ts = self.schema(table), self._ts()
        k = key if isinstance(key, tuple) else (key,)
        before = self.rows[s.qualified][k]
        after = {**before, **values}
        assert self._key(s, after) == k, "a key move: use `move`"
        self._fits(s, after)
        self.rows[s.qualified][k] = after
        return self._txn([RowChange(s, OP_U, dict(before), dict(after), ts)])

    def move(self, table: str, key: Any, **values: Any) -> int:
        """An UPDATE that changes the row's key (TiCDC splits it, codec facts 0.4): in a
        partitioned table, one that moves the row to another partition."""
        s, ts = self.schema(table), self._ts()
        k = key if isinstance(key, tuple) else (key,)
        before = self.rows[s.qualified].pop(k)
        after = {**before, **values}
        self._fits(s, after)
        self.rows[s.qualified][self._key(s, after)] = after
        return self._txn([RowChange(s, OP_U, dict(before), dict(after), ts)])

    def txn(self, table: str, *ops: tuple[str, Any]) -> int:
        """One transaction of several changes to `table`: ("insert", row), ("update", (key,
        values)), ("delete", key)."""
        s, ts = self.schema(table), self._ts()
        out = []
        for op, arg in ops:
            if op == "insert":
                row = {c.name: arg.get(c.name, V.default_value(c)) for c in s.columns}
                self._fits(s, row)
                self.rows[s.qualified][self._key(s, row)] = row
                out.append(RowChange(s, OP_I, None, dict(row), ts))
            elif op == "update":
                key, values = arg
                k = key if isinstance(key, tuple) else (key,)
                before = self.rows[s.qualified].pop(k)
                after = {**before, **values}
                self._fits(s, after)
                self.rows[s.qualified][self._key(s, after)] = after
                out.append(RowChange(s, OP_U, dict(before), dict(after), ts))
            else:
                k = arg if isinstance(arg, tuple) else (arg,)
                out.append(RowChange(s, OP_D, self.rows[s.qualified].pop(k), None, ts))
        return self._txn(out)

    def delete(self, table: str, *keys: Any) -> int:
        s, ts = self.schema(table), self._ts()
        out = []
        for key in keys:
            k = key if isinstance(key, tuple) else (key,)
            out.append(RowChange(s, OP_D, self.rows[s.qualified].pop(k), None, ts))
        return self._txn(out)

    def watermark(self) -> int:
        ts = self._ts()
        for p in range(self.partitions):
            self.steps.append(Step("watermark", ts, partition=p))
        return ts

    def history(self) -> History:
        cfg = HistoryConfig(
            seed=self.seed,
            tables=(),
            partitions=self.partitions,
            replay_probability=self.replay_probability,
        )
        return History(cfg, {}, list(self.steps))


@dataclass
class EncodedHistory:
    protocol: str
    topic: str
    partitions: int
    records: list[Record]  # emission order; offsets rise per partition
    resolved_ts: int | None  # None: no watermarks (Canal-JSON without the TiDB extension)
    truth: dict[str, list[dict[str, Any]]]
    schemas: dict[str, TableSchema]
    replays: int = 0
    options: EncoderOptions = field(default_factory=EncoderOptions)
    # Claim-check files TiCDC wrote (`large_message`): file name -> bytes.
    claims: dict[str, bytes] = field(default_factory=dict)

    def by_partition(self) -> dict[int, list[Record]]:
        out: dict[int, list[Record]] = {p: [] for p in range(self.partitions)}
        for r in self.records:
            out[r.partition].append(r)
        return out

    def chunks(self, n: int) -> list[list[Record]]:
        """The stream cut into `n` consecutive pieces (for many-small-runs tests)."""
        size = max(1, -(-len(self.records) // n))
        return [self.records[i : i + size] for i in range(0, len(self.records), size)]


def encode(
    history: History,
    protocol: str,
    topic: str,
    options: EncoderOptions | None = None,
    seed: int | None = None,
    since: int | None = None,
    large: LargeMessageConfig | None = None,
) -> EncodedHistory:
    """Encode a history for one protocol, with at-least-once replays after watermarks.
    `since`: the commit_ts of the changefeed's first event (steps before it happened before
    the changefeed started: in the truth, never in the records). `large`: the changefeed's
    large-message settings (compression, claim-check, ...)."""
    opts = options or EncoderOptions()
    cfg = history.config
    rng = random.Random(f"{cfg.seed if seed is None else seed}/{protocol}/replay")
    enc = large_encoder(protocol, opts, large) if large else make_encoder(protocol, opts)
    prod = TopicProducer(topic, cfg.partitions, enc)
    replays = 0
    for s in history.steps:
        if since is not None and s.commit_ts < since:
            continue
        if s.kind == "txn":
            for ch, p in s.events:
                prod.send_row(ch, p)
        elif s.kind == "ddl":
            assert s.ddl is not None
            prod.send_ddl(s.ddl)
        else:
            assert s.partition is not None
            prod.send_watermark(s.commit_ts, [s.partition])
            nxt = prod.next_offset(s.partition)
            if nxt > 2 and rng.random() < cfg.replay_probability:
                first = rng.randint(max(0, nxt - 8), nxt - 2)
                last = rng.randint(first, nxt - 1)
                replays += prod.replay(s.partition, first, last, kinds={"row", "watermark"})
    prod.flush()
    has_wm = protocol == "open-protocol" or opts.enable_tidb_extension
    resolved = history.resolved_ts() if has_wm else None
    truth, schemas = history.truth(resolved)
    return EncodedHistory(
        protocol,
        topic,
        cfg.partitions,
        prod.records,
        resolved,
        truth,
        schemas,
        replays,
        opts,
        dict(getattr(enc, "claims", {})),
    )


# ---------------------------------------------------------------------------------------
# Truth as JSON (for expected/*.json files)


def json_value(col: Column | None, v: Any) -> Any:
    """A logical value as the JSON the engine's final table should hold (DESIGN §2 Types):
    decimals as strings, dates ISO, DATETIME `YYYY-MM-DD HH:MM:SS[.ffffff]`, TIMESTAMP as a
    UTC instant `...Z`, binary as base64, SET as names in definition order, BIT(1) bool."""
    import base64

    if v is None or col is None:
        return v
    b = V.base_of(col)
    if isinstance(v, Decimal):
        return V.fmt_decimal(v, int(col.scale or 0))
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if b == "timestamp" and isinstance(v, dt.datetime):
        u = v if v.tzinfo is None else v.astimezone(V.UTC).replace(tzinfo=None)
        return u.isoformat(timespec="microseconds") + "Z"
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ", timespec="microseconds")
    if isinstance(v, dt.date):
        return v.isoformat()
    if b == "set":
        names = {n.lower() for n in V.set_names(v)}
        return ",".join(m for m in col.members if m.lower() in names)
    if b == "bit" and (col.length or 1) == 1:
        return bool(v)
    if isinstance(v, dt.timedelta):
        return V.fmt_time(v, 6)
    return v


def truth_json(rows: list[dict[str, Any]], schema: TableSchema) -> list[dict[str, Any]]:
    return [
        {k: json_value(schema.column(k), v) if k != "_commit_ts" else v for k, v in r.items()}
        for r in rows
    ]
