"""History generator and capture files: truth consistent with the records, determinism,
replays, per-partition watermarks, capture round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit import example
from testkit.captures import read_captures, record_line, write_captures
from testkit.encode import CanalJsonEncoder, EncoderOptions, Record
from testkit.history import HistoryConfig, encode, generate
from testkit.values import default_value, internal, zone


def _canal_replay(records: list[Record], partitions: int) -> tuple[dict, int]:
    """An independent Canal-JSON consumer: per-partition watermarks, resolved = min,
    apply rows with commitTs <= resolved in (commitTs, delete-first, offset) order,
    drop duplicates. Returns tables of text values and the resolved ts."""
    wm: dict[int, int] = {}
    events = []
    for r in records:
        m = json.loads(r.value)
        if m["type"] == "TIDB_WATERMARK":
            wm[r.partition] = max(wm.get(r.partition, 0), m["_tidb"]["watermarkTs"])
        elif not m["isDdl"]:
            events.append((m["_tidb"]["commitTs"], m, r.partition, r.offset))
    resolved = min(wm.get(p, 0) for p in range(partitions))
    seen = set()
    tables: dict[str, dict] = {}
    order = {"DELETE": 0, "UPDATE": 1, "INSERT": 2}
    for ts, m, _p, _off in sorted(events, key=lambda e: (e[0], order[e[1]["type"]], e[2], e[3])):
        if ts > resolved:
            continue
        ident = (ts, json.dumps(m["data"], sort_keys=True), m["type"])
        if ident in seen:
            continue  # at-least-once replay
        seen.add(ident)
        q = f"{m['database']}.{m['table']}"
        t = tables.setdefault(q, {})
        row = m["data"][0]
        key = tuple(row[k] for k in m["pkNames"])
        if m["type"] == "DELETE":
            t.pop(key, None)
        else:
            t[key] = row
    return tables, resolved


@pytest.mark.parametrize("dispatch", ["table", "index-value"])
def test_truth_matches_an_independent_canal_consumer(dispatch: str) -> None:
    hist = generate(HistoryConfig(seed=3, transactions=80, dispatch=dispatch))
    enc = encode(hist, "canal-json", "t")
    tables, resolved = _canal_replay(enc.records, enc.partitions)
    assert resolved == enc.resolved_ts and resolved is not None
    canal = CanalJsonEncoder()
    tz = zone("UTC")
    for q, rows in enc.truth.items():
        schema = enc.schemas[q]
        want = {
            tuple(
                canal.value_text(schema.column(k), internal(schema.column(k), r[k], tz))
                for k in schema.handle_key()
            ): {c.name: canal.value_text(c, internal(c, r[c.name], tz)) for c in schema.columns}
            for r in rows
        }
        # a row last changed before ADD COLUMN gets the default; dropped columns go away
        got = {
            key: {
                c.name: row[c.name]
                if c.name in row
                else canal.value_text(c, internal(c, default_value(c), tz))
                for c in schema.columns
            }
            for key, row in tables.get(q, {}).items()
        }
        assert got == want, q


def test_history_properties() -> None:
    cfg = HistoryConfig(seed=11, transactions=100, ddl_count=2)
    a, b = generate(cfg), generate(cfg)
    ea, eb = encode(a, "open-protocol", "t"), encode(b, "open-protocol", "t")
    assert ea.records == eb.records and ea.truth == eb.truth  # deterministic for a seed
    assert encode(generate(HistoryConfig(seed=12)), "open-protocol", "t").records != ea.records
    assert ea.replays > 0
    kinds = [s.kind for s in a.steps]
    assert kinds.count("ddl") == 2
    # watermarks per partition, arriving at different points, and monotonic per partition
    wms = [(i, s.partition, s.commit_ts) for i, s in enumerate(a.steps) if s.kind == "watermark"]
    assert {p for _, p, _ in wms} == set(range(cfg.partitions))
    for p in range(cfg.partitions):
        ts = [t for _, q, t in wms if q == p]
        assert ts == sorted(ts)
    # commit ts rise and TSOs carry a physical part in ms
    commits = [s.commit_ts for s in a.steps if s.kind in ("txn", "ddl")]
    assert commits == sorted(commits) and len(set(commits)) == len(commits)
    # offsets rise per partition; replays duplicate earlier records
    for recs in ea.by_partition().values():
        assert [r.offset for r in recs] == list(range(len(recs)))
    values = [r.value for r in ea.records if r.value]
    assert len(values) > len(set(values))
    # key moves and re-inserts happen (split into D+I at one commit ts)
    moves = [
        s
        for s in a.steps
        if s.kind == "txn"
        for (d, _), (i, _) in zip(s.events, s.events[1:], strict=False)
        if d.op == "D" and i.op == "I" and d.schema.qualified == i.schema.qualified
    ]
    assert moves
    chunks = ea.chunks(5)
    assert sum(len(c) for c in chunks) == len(ea.records) and len(chunks) == 5


def test_debezium_and_open_truth_equal_canal() -> None:
    h = generate(HistoryConfig(seed=5, transactions=40))
    truths = {p: encode(h, p, "t").truth for p in ("canal-json", "debezium", "open-protocol")}
    assert truths["canal-json"] == truths["debezium"] == truths["open-protocol"]
    no_ext = encode(h, "canal-json", "t", EncoderOptions(enable_tidb_extension=False))
    assert no_ext.resolved_ts is None


def test_capture_round_trip_and_bytes(tmp_path: Path) -> None:
    h = generate(HistoryConfig(seed=2, transactions=30))
    recs = encode(h, "open-protocol", "op").records + encode(h, "canal-json", "cj").records
    write_captures(tmp_path / "a", recs)
    write_captures(tmp_path / "b", recs)
    back = read_captures(tmp_path / "a")
    assert back["op"] == [r for r in recs if r.topic == "op"]
    assert back["cj"] == [r for r in recs if r.topic == "cj"]
    for t in ("op", "cj"):
        assert (tmp_path / "a" / t / "capture.jsonl").read_bytes() == (
            tmp_path / "b" / t / "capture.jsonl"
        ).read_bytes()
    line = json.loads(record_line(recs[0]))
    assert line["encoding"] == "base64" and list(line) == sorted(line)
    text = json.loads(record_line(Record("x", 1, 2, 3, None, b'{"a":1}')))
    assert text == {"key": None, "offset": 2, "partition": 1, "timestamp": 3, "value": '{"a":1}'}


def test_example_regenerates_identically(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "projects_example" / "shop"
    if not (root / "captures").exists():
        pytest.skip("example captures not generated")
    (tmp_path / "schema").mkdir()
    if (root / "schema" / "shop.sql").exists():
        (tmp_path / "schema" / "shop.sql").write_bytes((root / "schema" / "shop.sql").read_bytes())
    example.build(tmp_path)
    generated = [
        *sorted((root / "captures").rglob("*.jsonl")),
        *sorted((root / "expected").glob("*.json")),
        *sorted((root / "dumpling").iterdir()),
        *sorted((root / "expected" / "dumpling").iterdir()),
    ]
    assert len(generated) == len(
        [*(tmp_path / "captures").rglob("*.jsonl"), *(tmp_path / "expected").glob("*.json")]
        + [*(tmp_path / "dumpling").iterdir(), *(tmp_path / "expected" / "dumpling").iterdir()]
    )
    for f in generated:
        assert (tmp_path / f.relative_to(root)).read_bytes() == f.read_bytes(), f
