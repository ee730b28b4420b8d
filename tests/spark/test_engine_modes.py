"""The soft_delete and history modes against a simulated upstream (a plain Python model of
the TiDB table): many versions per key, deletes and re-inserts, key moves (as an UPDATE and
as TiCDC's split DELETE + INSERT), redelivered messages, ADD / RENAME / DROP COLUMN and
TRUNCATE, applied in several runs and then replayed whole.

Three upstream tables get the same changes; each lands in a target of one mode. After every
run: the mirror equals the model as of the resolved ts; the soft-delete target equals the
mirror plus the deleted rows with their deletion ts; the history target cut at every
commit_ts (and between them) equals the model as of that ts.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

TABLES = {"t_mirror": "mirror", "t_soft": "soft_delete", "t_hist": "history"}
SCHEMA = "".join(
    f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v VARCHAR(20), n INT);\n" for t in TABLES
)
ENTRIES = "".join(
    f"  - upstream: shop.{t}\n    name: {t}\n    mode: {m}\n" for t, m in TABLES.items()
)
# A TSO: physical milliseconds << 18 (codec facts: commit_ts is a TiDB TSO).
BASE = 1_767_000_000_000 << 18
STEP = 1000 << 18


@dataclass
class Col:
    ident: str  # stable across renames
    name: str
    mysql: str
    born: int  # commit_ts of the DDL that added it (0: from the start)
    dropped: int | None = None
    renamed: list[tuple[int, str]] = field(default_factory=list)  # (commit_ts, new name)

    def name_at(self, t: int) -> str:
        """Its name in a target as of `t` (a history target follows renames too)."""
        return next((n for ts, n in reversed(self.renamed) if ts <= t), self.ident)


@dataclass
class Model:
    """The upstream table, change by change, with its state after every commit_ts."""

    cols: list[Col] = field(
        default_factory=lambda: [
            Col("id", "id", "int", 0),
            Col("v", "v", "varchar", 0),
            Col("n", "n", "int", 0),
        ]
    )
    rows: dict[int, dict[str, object]] = field(default_factory=dict)
    # After each commit_ts: the rows, and the deleted keys with their delete's ts and values.
    states: list[tuple[int, dict[int, dict[str, object]], dict]] = field(default_factory=list)
    deleted: dict[int, tuple[int, dict[str, object]]] = field(default_factory=dict)
    # (commit_ts, kind, payload) per message, payload: (op, data, old) or DDL SQL.
    log: list[tuple[int, str, object]] = field(default_factory=list)

    def live(self) -> list[Col]:
        return [c for c in self.cols if c.dropped is None]

    def image(self, row: dict[str, object]) -> dict[str, str | None]:
        return {c.name: _text(row.get(c.ident)) for c in self.live()}

    def mysql_types(self) -> dict[str, str]:
        return {c.name: c.mysql for c in self.live()}

    def commit(self, ts: int) -> None:
        rows = {k: dict(v) for k, v in self.rows.items()}
        self.states.append((ts, rows, dict(self.deleted)))

    def insert(self, ts: int, row: dict[str, object]) -> None:
        self.rows[row["id"]] = row  # type: ignore[index]
        self.deleted.pop(row["id"], None)  # type: ignore[arg-type]
        self.log.append((ts, "row", ("INSERT", self.image(row), None)))

    def update(self, ts: int, old_id: int, row: dict[str, object], split: bool) -> None:
        old = self.rows.pop(old_id)
        new_id = row["id"]
        if split and new_id != old_id:  # TiCDC splits a key-changing UPDATE
            self.log.append((ts, "row", ("DELETE", self.image(old), None)))
            self.deleted[old_id] = (ts, dict(old))
            self.rows[new_id] = row  # type: ignore[index]
            self.deleted.pop(new_id, None)  # type: ignore[arg-type]
            self.log.append((ts, "row", ("INSERT", self.image(row), None)))
            return
        if new_id != old_id:
            self.deleted[old_id] = (ts, dict(old))
        self.deleted.pop(new_id, None)  # type: ignore[arg-type]
        self.rows[new_id] = row  # type: ignore[index]
        self.log.append((ts, "row", ("UPDATE", self.image(row), self.image(old))))

    def delete(self, ts: int, key: int) -> None:
        old = self.rows.pop(key)
        self.deleted[key] = (ts, dict(old))
        self.log.append((ts, "row", ("DELETE", self.image(old), None)))

    def ddl(self, ts: int, sql: str) -> None:
        self.log.append((ts, "ddl", sql))

    def as_of(self, t: int) -> dict[int, dict[str, object]]:
        return self._at(t)[1]

    def deleted_as_of(self, t: int) -> dict[int, tuple[int, dict[str, object]]]:
        return self._at(t)[2]

    def _at(self, t: int) -> tuple[int, dict, dict]:
        best: tuple[int, dict, dict] = (0, {}, {})
        for state in self.states:
            if state[0] <= t:
                best = state
        return best

    def cols_at(self, t: int) -> list[Col]:
        return [c for c in self.cols if c.born <= t and (c.dropped is None or c.dropped > t)]


def _text(v: object) -> str | None:
    return None if v is None else str(v)


def simulate(seed: int = 11, steps: int = 60) -> Model:
    rnd = random.Random(seed)
    m = Model()
    ts = BASE
    keys = range(1, 13)
    has_c2 = False
    for step in range(steps):
        ts += STEP + rnd.randrange(1, 50)
        if step in (15, 27, 38, 47):
            if step == 15:
                m.cols.append(Col("c2", "c2", "int", ts))
                m.ddl(ts, "ALTER TABLE {t} ADD COLUMN c2 INT")
                has_c2 = True
            elif step == 27:
                v = next(c for c in m.cols if c.ident == "v")
                v.name = "v2"
                v.renamed.append((ts, "v2"))
                m.ddl(ts, "ALTER TABLE {t} RENAME COLUMN v TO v2")
            elif step == 38:
                next(c for c in m.cols if c.ident == "n").dropped = ts
                m.ddl(ts, "ALTER TABLE {t} DROP COLUMN n")
            else:
                for k in sorted(m.rows):
                    m.deleted[k] = (ts, dict(m.rows[k]))
                m.rows.clear()
                m.ddl(ts, "TRUNCATE TABLE {t}")
            m.commit(ts)
            continue

        def values(key: int, step: int = step, has_c2: bool = has_c2) -> dict[str, object]:
            row: dict[str, object] = {"id": key, "v": f"s{step}-{rnd.randrange(100)}"}
            if not any(c.ident == "n" and c.dropped for c in m.cols):
                row["n"] = rnd.choice([None, rnd.randrange(1000)])
            if has_c2:
                row["c2"] = rnd.choice([None, rnd.randrange(10)])
            return row

        touched: set[int] = set()
        for _ in range(rnd.randrange(1, 4)):  # one transaction: distinct keys
            live = [k for k in sorted(m.rows) if k not in touched]
            free = [k for k in keys if k not in m.rows and k not in touched]
            op = rnd.choice(["insert", "update", "update", "move", "delete"])
            if op == "insert" and free:
                k = rnd.choice(free)
                m.insert(ts, values(k))
            elif op == "update" and live:
                k = rnd.choice(live)
                m.update(ts, k, values(k), split=False)
            elif op == "move" and live and free:
                k, k2 = rnd.choice(live), rnd.choice(free)
                m.update(ts, k, values(k2), split=rnd.random() < 0.5)
                touched.add(k2)
            elif op == "delete" and live:
                k = rnd.choice(live)
                m.delete(ts, k)
            else:
                continue
            touched.add(k)
        m.commit(ts)
    return m


def ddl_message(table: str, ts: int, sql: str) -> bytes:
    return json.dumps(
        {
            "id": 0,
            "database": "shop",
            "table": table,
            "pkNames": None,
            "isDdl": True,
            "type": "TRUNCATE" if sql.startswith("TRUNCATE") else "ALTER",
            "es": ts >> 18,
            "ts": 0,
            "sql": sql.format(t=table),
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"commitTs": ts},
        }
    ).encode()


def messages(m: Model, rnd: random.Random) -> list[tuple[int, list[bytes]]]:
    """Per commit_ts (a transaction), the messages of the three tables, with some redelivered
    (at-least-once: the same message again, right after it)."""
    types: dict[str, str] = {"id": "int", "v": "varchar", "n": "int"}
    out: list[tuple[int, list[bytes]]] = []
    for ts, kind, payload in m.log:
        batch: list[bytes] = []
        if kind == "ddl":
            sql = str(payload)
            if "ADD COLUMN c2" in sql:
                types["c2"] = "int"
            elif "RENAME COLUMN v TO v2" in sql:
                types["v2"] = types.pop("v")
            elif "DROP COLUMN n" in sql:
                types.pop("n")
            batch = [ddl_message(t, ts, sql) for t in TABLES]
        else:
            op, data, old = payload  # type: ignore[misc]
            for t in TABLES:
                msg = canal_row("shop", t, op, ts, data, dict(types), ["id"], old)
                batch.append(msg)
                if rnd.random() < 0.15:
                    batch.append(msg)
        if out and out[-1][0] == ts:  # one transaction: never split by a watermark
            out[-1][1].extend(batch)
        else:
            out.append((ts, batch))
    return out


def _hist_cut(rows: list[dict], t: int, names: dict[str, str], cols: list[Col]) -> set[tuple]:
    return {
        tuple(r[names[c.ident]] for c in cols)
        for r in rows
        if r["_valid_from"] <= t and (r["_valid_to"] is None or r["_valid_to"] > t)
    }


def _truth(state: dict[int, dict[str, object]], cols: list[Col]) -> set[tuple]:
    return {tuple(row.get(c.ident) for c in cols) for row in state.values()}


def check(spark, project, m: Model, resolved: int, read=None) -> None:
    """The three targets against the model as of `resolved`; `read(name, order)`: their
    rows (by default the Delta tables as they are)."""
    if read is None:

        def read(name: str, order: str) -> list[dict]:
            return read_target(spark, project, name, order)

    final = {c.ident: c.name_at(resolved) for c in m.cols}
    live = m.cols_at(resolved)
    truth = m.as_of(resolved)
    # The mirror: the model as of the resolved ts.
    mirror = read("t_mirror", "id")
    assert {tuple(r[final[c.ident]] for c in live) for r in mirror} == _truth(truth, live)
    # soft_delete: the mirror plus the deleted rows, with their deletion ts.
    soft = read("t_soft", "id")
    alive = [r for r in soft if not r["_is_deleted"]]
    gone = [r for r in soft if r["_is_deleted"]]
    assert {tuple(r[final[c.ident]] for c in live) for r in alive} == _truth(truth, live)
    assert all(r["_deleted_ts"] is None and r["_deleted_at"] is None for r in alive)
    deleted = m.deleted_as_of(resolved)
    assert {(r["id"], r["_deleted_ts"]) for r in gone} == {(k, d[0]) for k, d in deleted.items()}
    # A deleted row keeps the values it had before the delete.
    assert {tuple(r[final[c.ident]] for c in live) for r in gone} == _truth(
        {k: row for k, (_, row) in deleted.items()}, live
    )
    for r in gone:
        assert r["_commit_ts"] == r["_deleted_ts"]
        assert r["_deleted_at"] is not None
    # history: cut at every commit_ts up to the resolved ts, and just before each.
    hist = read("t_hist", "id, _valid_from")
    assert all(r["_commit_ts"] == r["_valid_from"] for r in hist)
    assert len({(r["id"], r["_valid_from"]) for r in hist}) == len(hist)  # no version twice
    for r in hist:
        assert r["_valid_to"] is None or r["_valid_to"] > r["_valid_from"]
    cuts = sorted({s[0] for s in m.states if s[0] <= resolved})
    for t in [BASE, *cuts, *(c - 1 for c in cuts)]:
        cols = m.cols_at(t)
        assert _hist_cut(hist, t, final, cols) == _truth(m.as_of(t), cols), f"as of {t}"
    # Each key has at most one open version.
    open_keys = [r["id"] for r in hist if r["_valid_to"] is None]
    assert len(open_keys) == len(set(open_keys))


def test_soft_delete_and_history_follow_a_simulated_upstream(spark, tmp_path):
    m = simulate()
    rnd = random.Random(5)
    batches = messages(m, rnd)
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA, tables=ENTRIES)
    project = load(root)
    offset = 0
    records: list[tuple] = []
    # Four runs, each over a quarter of the history: several changes of a key per window.
    n = len(batches)
    bounds = [n // 4, n // 2, 3 * n // 4, n]
    lo = 0
    for hi in bounds:
        chunk: list[tuple] = []
        for _ts, batch in batches[lo:hi]:
            for msg in batch:
                chunk.append((0, offset, None, msg))
                offset += 1
        resolved = batches[hi - 1][0]
        chunk.append((0, offset, None, wm(resolved)))
        offset += 1
        write_captures(root, "t", chunk)
        records += chunk
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
        check(spark, project, m, resolved)
        lo = hi
    before = read_target(spark, project, "t_hist", "id, _valid_from")
    # The history target kept the dropped column; the others dropped it.
    assert "n" in before[0] and "v2" in before[0]
    assert "n" not in read_target(spark, project, "t_mirror", "id")[0]
    assert "n" not in read_target(spark, project, "t_soft", "id")[0]
    # Every message delivered again (a changefeed restarted from an old checkpoint).
    replay = [(0, offset + i, None, r[3]) for i, r in enumerate(records)]
    write_captures(root, "t", replay)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    check(spark, project, m, resolved)
    assert read_target(spark, project, "t_hist", "id, _valid_from") == before


def test_every_mode_reads_as_of_each_tso_with_changes_pending(spark, tmp_path):
    """Targets applied up to an early TSO, the rest staged and not applied: a read as of each
    later TSO (up to the RENAME COLUMN, the first DDL a read does not replay; across the ADD
    COLUMN) gives the soft-delete marks and the history versions as of it, exactly what an
    apply up to it would have written."""
    from ticdc_sync.run.loop import StopRequest
    from ticdc_sync.spark.as_of import as_of

    m = simulate()
    rnd = random.Random(7)
    batches = messages(m, rnd)
    rename = next(ts for ts, kind, p in m.log if kind == "ddl" and "RENAME" in str(p))
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        tables=ENTRIES,
        defaults="defaults:\n  target_lag: 36500d\n",
    )
    project = load(root)
    offset = 0

    def write(chunk_batches):
        nonlocal offset
        chunk = []
        for _ts, batch in chunk_batches:
            for msg in batch:
                chunk.append((0, offset, None, msg))
                offset += 1
        chunk.append((0, offset, None, wm(chunk_batches[-1][0])))
        offset += 1
        write_captures(root, "t", chunk)

    early = [b for b in batches if b[0] < rename][:8]
    write(early)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0  # applies: plain run
    applied = early[-1][0]
    later = [b for b in batches if applied < b[0] < rename]
    write(later)
    stop = StopRequest()

    def out(line: str) -> None:
        if line.startswith("poll ") and stop.level == 0:
            stop.request()

    # Staged, nothing due by its lag: the follow run stops after its first poll.
    assert (
        runner.run(project, spark=spark, follow=True, poll_seconds=0.2, out=out, stop_request=stop)
        == 0
    )
    pending_reads = 0
    for ts in [b[0] for b in later][::3] + [later[-1][0]]:
        read = as_of(spark, project, ts)
        assert read.applied["t_soft"] == applied  # nothing was applied by the follow run
        pending_reads += read.pending["t_soft"] > 0 and read.pending["t_hist"] > 0

        def rows(name: str, order: str, read=read) -> list[dict]:
            keys = [c.strip() for c in order.split(",")]
            return [r.asDict() for r in read.frames[name].orderBy(*keys).collect()]

        check(spark, project, m, ts, read=rows)
    assert pending_reads >= 3


# --- the MERGE of each mode, applied twice -------------------------------------------------

CHANGES = (
    "commit_ts BIGINT, partition INT, offset BIGINT, idx INT, "
    "__c STRUCT<id: INT, v: STRING, __op: STRING, __rank: INT>"
)


def _changes(spark, rows: list[tuple[int, int, str, str | None]]):
    """(commit_ts, id, op, v) in delivery order, as `TargetWriter` explodes them."""
    data = [
        (ts, 0, i, 0, (key, v, op, 0 if op == "D" else 1))
        for i, (ts, key, op, v) in enumerate(rows)
    ]
    return spark.createDataFrame(data, CHANGES)


SEG1 = [
    (10, 1, "U", "a"),
    (10, 2, "U", "x"),
    (20, 1, "U", "b"),
    (30, 2, "D", None),
    (30, 3, "U", "p"),
    (30, 3, "U", "p"),  # redelivered
]
SEG2 = [(40, 1, "U", "c"), (45, 3, "D", None), (50, 2, "U", "y"), (50, 4, "U", "q")]


@pytest.mark.parametrize("mode", ["history", "soft_delete"])
def test_a_segment_applied_again_changes_nothing(spark, tmp_path, mode):
    from ticdc_sync.core.model import Mode
    from ticdc_sync.core.sqlgen import create_table_sql, table_ref
    from ticdc_sync.core.sqlgen_history import MERGE_SQL, mode_columns
    from ticdc_sync.spark.apply import mode_rows

    m = Mode(mode)
    ref = table_ref(str(tmp_path / "t"))
    cols = [("id", "int"), ("v", "string")]
    spark.sql(create_table_sql(ref, cols, extra=mode_columns(m)))

    def apply(seg) -> None:
        src = mode_rows.source(m, _changes(spark, seg), ["id"], ["id", "v"])
        src.createOrReplaceTempView("__src")
        spark.sql(MERGE_SQL[m](ref, "__src", ["id"], ["id", "v"]))

    def table() -> list[tuple]:
        return [tuple(r) for r in spark.sql(f"SELECT * FROM {ref} ORDER BY 1, 3").collect()]

    apply(SEG1)
    apply(SEG2)
    once = table()
    apply(SEG1)  # stale replays of both segments: no version opened or closed twice
    apply(SEG2)
    apply(SEG2)
    assert table() == once
    if m is Mode.HISTORY:
        got = [(r[0], r[1], r[3], r[4]) for r in once]  # id, v, _valid_from, _valid_to
        assert got == [
            (1, "a", 10, 20),
            (1, "b", 20, 40),
            (1, "c", 40, None),
            (2, "x", 10, 30),
            (2, "y", 50, None),
            (3, "p", 30, 45),
            (4, "q", 50, None),
        ]
    else:
        got = [(r[0], r[1], r[2], r[3], r[4]) for r in once]  # .., _is_deleted, _deleted_ts
        assert got == [
            (1, "c", 40, False, None),
            (2, "y", 50, False, None),
            (3, "p", 45, True, 45),
            (4, "q", 50, False, None),
        ]


# --- an initial load, then the changefeed ---------------------------------------------------


@pytest.mark.parametrize("mode", ["history", "soft_delete"])
def test_loaded_rows_start_live_at_the_snapshot(spark, tmp_path, mode):
    from decimal import Decimal

    from tests.spark.test_initial_load import S, project_with_export
    from tests.spark.test_initial_load import row as trow
    from tests.spark.test_initial_load import ts as tts

    exported = [
        {"id": 1, "v": "a", "n": Decimal("1.50")},
        {"id": 2, "v": "b", "n": None},
        {"id": 4, "v": "d", "n": None},
    ]
    root = project_with_export(tmp_path, exported)
    (root / "tables" / "t.yml").write_text(
        f'tables:\n  - upstream: "shop.*"\n    name: "{{table}}"\n    mode: {mode}\n'
    )
    recs = [
        (0, 0, None, trow("UPDATE", tts(12), {"id": "2", "v": "b2", "n": None}, {"id": "2"})),
        (0, 1, None, trow("DELETE", tts(12), {"id": "4", "v": "d", "n": None})),
        (0, 2, None, trow("INSERT", tts(13), {"id": "5", "v": "e", "n": None})),
        (0, 3, None, wm(tts(15))),
    ]
    write_captures(root, "t", recs)
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    # polars, delta-rs and DuckDB read the mode's columns as Spark does.
    from tests.spark import readers as R
    from ticdc_sync.warehouse.locations import target_location, warehouse_path

    loc = target_location(warehouse_path(project), "t")
    assert R.reader_features(loc) <= {"timestampNtz"}
    R.assert_reads_as_spark(spark, loc, tuple(R.READERS))
    if mode == "history":
        got = read_target(spark, project, "t", "id, _valid_from")
        assert [(r["id"], r["v"], r["_valid_from"], r["_valid_to"]) for r in got] == [
            (1, "a", S, None),
            (2, "b", S, tts(12)),
            (2, "b2", tts(12), None),
            (4, "d", S, tts(12)),
            (5, "e", tts(13), None),
        ]
        assert all(r["_valid_from_at"] is not None for r in got)
    else:
        got = read_target(spark, project, "t", "id")
        assert [(r["id"], r["v"], r["_is_deleted"], r["_deleted_ts"]) for r in got] == [
            (1, "a", False, None),
            (2, "b2", False, None),
            (4, "d", True, tts(12)),
            (5, "e", False, None),
        ]


def test_history_add_column_default_fills_the_versions_open_at_it(spark, tmp_path):
    """Upstream every row has an added column's DEFAULT from the ADD on: the history
    target's versions open at the ADD hold it, a version closed before it holds NULL, and a
    row changed after it holds its own value."""
    from tests.spark.test_plan_is_program import ddl

    types = {"id": "int", "v": "varchar"}
    ts = iter(range(BASE, BASE + 100 * STEP, STEP))

    def row(op: str, i: int, v: str, old: dict | None = None, extra: dict | None = None):
        mt = {**types, **({"c": "varchar"} if extra else {})}
        data = {"id": str(i), "v": v, **(extra or {})}
        return canal_row("shop", "h", op, next(ts), data, mt, ["id"], old)

    msgs = [
        row("INSERT", 1, "a"),
        row("INSERT", 2, "b"),
        row("UPDATE", 2, "b2", old={"v": "b"}),
    ]
    add_ts = next(ts)
    msgs.append(
        ddl("h", add_ts, "ALTER TABLE shop.h ADD COLUMN c VARCHAR(5) DEFAULT 'd1'", "ALTER")
    )
    msgs.append(row("INSERT", 3, "c", extra={"c": "x"}))
    msgs.append(wm(next(ts)))
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql="CREATE TABLE shop.h (id INT PRIMARY KEY, v VARCHAR(20));\n",
        tables="  - upstream: shop.h\n    name: h\n    mode: history\n",
    )
    write_captures(root, "t", [(0, i, None, m) for i, m in enumerate(msgs)])
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    got = sorted(
        (r["id"], r["v"], r["c"], r["_valid_to"] is None)
        for r in read_target(spark, project, "h", "id, _valid_from")
    )
    assert got == [
        (1, "a", "d1", True),
        (2, "b", None, False),  # closed before the ADD: the column did not exist
        (2, "b2", "d1", True),
        (3, "c", "x", True),
    ], got
