"""Capture-file reading: overlapping files give each record once; a broken line is named."""

from __future__ import annotations

import json

import pytest

from ticdc_sync.errors import UserError
from ticdc_sync.spark.sources import read_capture_records

pytestmark = pytest.mark.spark


def _line(p: int, o: int, v: str) -> str:
    return json.dumps({"partition": p, "offset": o, "timestamp": 1, "key": None, "value": v})


def _rows(spark, root, consumed=None):
    df = read_capture_records(spark, root, ["t"], consumed or {})
    return sorted((r["partition"], r["offset"], bytes(r["value"]).decode()) for r in df.collect())


def test_overlapping_capture_files_yield_each_record_once(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "a.jsonl").write_text(_line(0, 0, "x") + "\n" + _line(0, 1, "y") + "\n\n")
    (d / "b.jsonl").write_text(_line(0, 1, "y") + "\n" + _line(1, 0, "z") + "\n")
    assert _rows(spark, tmp_path) == [(0, 0, "x"), (0, 1, "y"), (1, 0, "z")]
    assert _rows(spark, tmp_path, {("t", 0): 0}) == [(0, 1, "y"), (1, 0, "z")]


def test_distinct_records_are_all_kept(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "part-0.jsonl").write_text("".join(_line(0, o, f"v{o}") + "\n" for o in range(5)))
    (d / "part-1.jsonl").write_text(_line(1, 0, "w") + "\n")
    assert len(_rows(spark, tmp_path)) == 6


def test_a_line_that_is_not_a_record_is_an_error_naming_file_and_line(spark, tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "x.jsonl").write_text(_line(0, 0, "x") + '\n{"partition": 0, "value": "v"}\n')
    with pytest.raises(UserError, match=r"x.jsonl:2: not a capture record"):
        read_capture_records(spark, tmp_path, ["t"], {})


def test_a_cut_line_with_good_positions_fails_the_read_naming_its_file(spark, tmp_path):
    from ticdc_sync.spark.raised import user_error

    d = tmp_path / "t"
    d.mkdir()
    cut = '{"key": null, "offset": 1, "partition": 0, "timestamp": 1, "value": "{\\"id'
    (d / "y.jsonl").write_text(_line(0, 0, "x") + "\n" + cut + "\n")
    with pytest.raises(Exception) as info:
        _rows(spark, tmp_path)
    err = user_error(info.value)
    assert err is not None
    assert "y.jsonl: a line is not a capture record" in str(err)
