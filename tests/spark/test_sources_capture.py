"""Capture-file reading: one lazy pass over the lines; overlapping files are staged once;
a line that is not a record fails the run, named by file and line."""

from __future__ import annotations

import json

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.errors import UserError
from ticdc_sync.spark import runner
from ticdc_sync.spark.staging import batch
from ticdc_sync.spark.transports.sources import broken_lines_error, read_capture_records
from ticdc_sync.warehouse.locations import state_location, warehouse_path

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));\n"


def _line(p: int, o: int, v: str) -> str:
    return json.dumps({"partition": p, "offset": o, "timestamp": 1, "key": None, "value": v})


def _rows(spark, root, consumed=None):
    df = read_capture_records(spark, root, ["t"], consumed or {})
    return sorted((r["partition"], r["offset"], bytes(r["value"]).decode()) for r in df.collect())


def _row(ts: int, i: int, v: str) -> str:
    return canal_row("shop", "t", "INSERT", ts, {"id": str(i), "v": v}, {}, ["id"]).decode()


@pytest.fixture(params=["kept", "read back"])
def staged_how(request, monkeypatch):
    """Both ways a batch is staged (`batch.kept_poll`): kept while its repeats are checked,
    or read back from the staging table after its write (a catch-up's batch)."""
    if request.param == "read back":
        monkeypatch.setattr(batch, "kept_poll", lambda records, capture_bytes: False)
    return request.param


def test_overlapping_capture_files_are_staged_once_and_applied_once(spark, tmp_path, staged_how):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    d = root / "captures" / "t"
    d.mkdir(parents=True)
    # b.jsonl repeats offsets 1 and 2 of partition 0 (a capture taken twice over a range).
    a = [
        _line(0, 0, _row(100, 1, "a")),
        _line(0, 1, _row(110, 2, "b")),
        _line(0, 2, _row(120, 3, "c")),
    ]
    b = [a[1], a[2], _line(0, 3, wm(130).decode())]
    (d / "a.jsonl").write_text("\n".join(a) + "\n\n")
    (d / "b.jsonl").write_text("\n".join(b) + "\n")
    # The reader itself is one pass: it yields what the files hold.
    assert [o for _, o, _ in _rows(spark, root / "captures")] == [0, 1, 1, 2, 2, 3]

    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    events = spark.read.format("delta").load(state_location(warehouse_path(project), "events"))
    positions = [(r["partition"], r["offset"], r["idx"]) for r in events.collect()]
    assert sorted(positions) == [(0, o, 0) for o in range(4)]
    got = read_target(spark, project, "t", "id")
    assert [(r["id"], r["v"]) for r in got] == [(1, "a"), (2, "b"), (3, "c")]
    # Nothing new: a second run stages nothing and the table stays as it is.
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert events.count() == 4


def test_different_records_at_one_position_fail_the_run_and_stage_nothing(
    spark, tmp_path, staged_how
):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    d = root / "captures" / "t"
    d.mkdir(parents=True)
    a = [_line(0, 0, _row(100, 1, "a")), _line(0, 1, _row(110, 2, "b"))]
    # b.jsonl holds offset 1 again, with another record: one of the two is wrong.
    b = [_line(0, 1, _row(110, 2, "B")), _line(0, 2, wm(130).decode())]
    (d / "a.jsonl").write_text("\n".join(a) + "\n")
    (d / "b.jsonl").write_text("\n".join(b) + "\n")
    project = load(root)
    with pytest.raises(UserError, match=r"different records at the same position: t/0/1 "):
        runner.run(project, spark=spark, out=lambda s: None)
    events = spark.read.format("delta").load(state_location(warehouse_path(project), "events"))
    assert events.count() == 0
    # Fixed (the wrong line removed), the next run stages and applies every record once.
    (d / "b.jsonl").write_text(b[1] + "\n")
    assert runner.run(load(root), spark=spark, out=lambda s: None) == 0
    assert sorted((r["partition"], r["offset"]) for r in events.collect()) == [
        (0, 0),
        (0, 1),
        (0, 2),
    ]
    got = read_target(spark, project, "t", "id")
    assert [(r["id"], r["v"]) for r in got] == [(1, "a"), (2, "b")]


def test_consumed_lines_are_dropped_by_position_in_any_key_order(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "a.jsonl").write_text(_line(0, 0, "x") + "\n" + _line(0, 1, "y") + "\n\n")
    (d / "b.jsonl").write_text(_line(1, 0, "z") + "\n")
    assert _rows(spark, tmp_path, {("t", 0): 0}) == [(0, 1, "y"), (1, 0, "z")]
    assert _rows(spark, tmp_path, {("t", 0): 1, ("t", 1): 0}) == []


def test_consumed_positions_are_the_record_s_not_its_text(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    lines = [
        # sorted keys, as `ticdc-sync capture` writes them; the key text mentions an offset
        '{"key": "\\"offset\\": 99, \\"partition\\": 7", "offset": 3, "partition": 1, "value": "v"}',
        '{"offset":12,"partition":4,"value":"compact"}',
        '{"value": "\\"offset\\": 5", "partition": 2, "offset": 40}',  # value first
        '{"partition": 3, "offset":   -0   , "value": "zero"}',
        '{"partition": 3, "offset": 7, "value": "seven"}',
        "   ",
    ]
    (d / "a.jsonl").write_text("\n".join(lines) + "\n")
    consumed = {("t", 1): 2, ("t", 4): 12, ("t", 2): 40, ("t", 3): 0, ("t", 7): 1000}
    assert _rows(spark, tmp_path, consumed) == [(1, 3, "v"), (3, 7, "seven")]
    assert len(_rows(spark, tmp_path)) == 5


@pytest.mark.parametrize(
    "bad",
    [
        '{"partition": 0, "value": "no offset"}',
        '{"partition": 3, "offset": 1.5}',
        '{"partition": 3, "offset": "17"}',
        '{"partition": 3000000000, "offset": 1}',
        '{"partition": 3, "offset": 123456789012345678901234567890}',
        '{"partition": 3, "offset": 2, "value": "v"',
        "not json",
        # positions read, a later field of the wrong type: refused, not read without it
        '{"partition": 3, "offset": 2, "timestamp": "soon", "value": "v"}',
        b'{"partition": 3, "offset": 2, "value": "\xff"}',
    ],
)
def test_a_line_the_json_reader_refuses_is_named(spark, tmp_path, bad):
    d = tmp_path / "t"
    d.mkdir()
    good = (_line(0, 0, "x") + "\n").encode()
    (d / "z.jsonl").write_bytes(good + (bad if isinstance(bad, bytes) else bad.encode()) + b"\n")
    with pytest.raises(Exception, match="a line is not a capture record"):
        _rows(spark, tmp_path)
    err = broken_lines_error(spark, tmp_path, ["t"])
    assert err is not None
    assert "z.jsonl:2: not a capture record" in str(err)


def test_distinct_records_are_all_kept(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "part-0.jsonl").write_text("".join(_line(0, o, f"v{o}") + "\n" for o in range(5)))
    (d / "part-1.jsonl").write_text(_line(1, 0, "w") + "\n")
    assert len(_rows(spark, tmp_path)) == 6


def test_record_bytes_are_the_utf8_of_the_text_or_the_base64_bytes(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    texts = ["plain", "héllo wörld", "中文字段", "emoji \U0001f600", 'quote " and \\ and \n']
    lines = [
        json.dumps({"partition": 0, "offset": o, "timestamp": 1, "key": t, "value": t})
        for o, t in enumerate(texts)
    ]
    # Escaped in the line (ensure_ascii) as well as raw UTF-8: both read as the same bytes.
    lines += [
        json.dumps(
            {"partition": 1, "offset": o, "timestamp": 1, "key": None, "value": t},
            ensure_ascii=False,
        )
        for o, t in enumerate(texts)
    ]
    binary = bytes([0, 0xFF, 0xC3, 0x28])  # not UTF-8: base64 in the line (DESIGN.md §1)
    lines.append(
        json.dumps(
            {
                "partition": 2,
                "offset": 0,
                "timestamp": 1,
                "key": "AA==",
                "value": "AP/DKA==",
                "encoding": "base64",
            }
        )
    )
    (d / "part.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = {
        (r["partition"], r["offset"]): (r["key"], r["value"])
        for r in read_capture_records(spark, tmp_path, ["t"], {}).collect()
    }
    for o, t in enumerate(texts):
        assert bytes(rows[(0, o)][0]) == t.encode("utf-8")
        assert bytes(rows[(0, o)][1]) == t.encode("utf-8")
        assert rows[(1, o)][0] is None
        assert bytes(rows[(1, o)][1]) == t.encode("utf-8")
    assert bytes(rows[(2, 0)][0]) == b"\x00"
    assert bytes(rows[(2, 0)][1]) == binary


def test_a_line_that_is_not_a_record_fails_the_run_naming_file_and_line(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    d = root / "captures" / "t"
    d.mkdir(parents=True)
    (d / "x.jsonl").write_text(
        _line(0, 0, _row(100, 1, "a")) + '\n{"partition": 0, "value": "v"}\n'
    )
    project = load(root)
    with pytest.raises(UserError, match=r"x.jsonl:2: not a capture record"):
        runner.run(project, spark=spark, out=lambda s: None)
    # The job failed before its commit: nothing of the batch is staged, not even line 1.
    events = spark.read.format("delta").load(state_location(warehouse_path(project), "events"))
    assert events.count() == 0


def test_a_cut_line_with_good_positions_is_named_by_file_and_line(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    cut = '{"key": null, "offset": 1, "partition": 0, "timestamp": 1, "value": "{\\"id'
    (d / "y.jsonl").write_text(_line(0, 0, "x") + "\n" + cut + "\n")
    with pytest.raises(Exception, match="a line is not a capture record"):
        _rows(spark, tmp_path)
    err = broken_lines_error(spark, tmp_path, ["t"])
    assert err is not None
    assert "y.jsonl:2: not a capture record" in str(err)
    assert broken_lines_error(spark, tmp_path, ["other"]) is None


def test_the_split_model_packs_files_as_spark_does(spark, tmp_path):
    # The model's task count is Spark's own for the same files and split size, so its
    # choice of split is made on what Spark will really run.
    from ticdc_sync.spark.runtime.conf import session_conf
    from ticdc_sync.spark.transports.splits import MIB, OPEN_COST, pack

    line = _line(0, 1, "x" * 200) + "\n"
    files = []
    for i, n in enumerate((3 * MIB, 5 * MIB // 2, MIB, 7 * MIB)):
        f = tmp_path / f"{i}.jsonl"
        f.write_text(line * (n // len(line)))
        files.append(f)
    sizes = [f.stat().st_size for f in files]
    cores = spark.sparkContext.defaultParallelism
    share = max(OPEN_COST, (sum(sizes) + OPEN_COST * len(sizes)) // cores)
    for split in (MIB // 2, MIB, 3 * MIB, 8 * MIB):
        with session_conf(spark, "spark.sql.files.maxPartitionBytes", str(split)):
            got = spark.read.text([str(f) for f in files]).rdd.getNumPartitions()
        assert got == len(pack(sizes, min(split, share))), split
