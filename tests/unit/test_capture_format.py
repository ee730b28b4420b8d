"""Capture lines and resuming from existing capture files (no JVM)."""

from __future__ import annotations

import pytest

from ticdc_sync.core.capture_format import record_line
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Defaults, Output, Project
from ticdc_sync.spark.capture import capture, captured_next


def test_captured_next_reads_any_layout_and_repairs_a_cut_last_line(tmp_path):
    (tmp_path / "a.jsonl").write_text(
        '{"offset": 4, "partition": 0}\n{"offset": 9, "partition": 2}\n\n'
    )
    (tmp_path / "part-0.jsonl").write_text('{"offset": 5, "partition": 0}\n{"offset": 6, "par')
    (tmp_path / "part-1.jsonl").write_text('{"offset": 1, "partition": 1}')
    assert captured_next(tmp_path) == {0: 6, 1: 2, 2: 10}
    assert (tmp_path / "part-0.jsonl").read_text() == '{"offset": 5, "partition": 0}\n'
    assert (tmp_path / "part-1.jsonl").read_text() == '{"offset": 1, "partition": 1}\n'


def test_a_bad_line_in_the_middle_is_an_error_naming_it(tmp_path):
    (tmp_path / "x.jsonl").write_text(
        '{"offset": 1, "partition": 0}\nnope\n{"offset": 2, "partition": 0}\n'
    )
    with pytest.raises(UserError, match=r"x.jsonl:2: not a capture record"):
        captured_next(tmp_path)


def test_capture_needs_a_kafka_transport(tmp_path):
    project = Project(
        name="p",
        root=tmp_path,
        output=Output(name="dev"),
        defaults=Defaults(),
        sources=(),
        tables=(),
    )
    with pytest.raises(UserError, match="files transport"):
        capture(project, out=lambda s: None, spark=object())


def test_a_line_round_trips_and_stays_one_line():
    from ticdc_sync.core.capture_format import parse_line

    cases = [
        (0, 5, 1700000000123, b'{"a":1}', '{"v":"ü\\n\u2028\u2029\x85"}'.encode()),
        (3, 0, 0, None, None),
        (1, 9, 1, b"\xff", b"\x00\x01"),
        (2, 7, 2, b"text", b"\xc3"),
    ]
    for p, o, ts, k, v in cases:
        line = record_line(p, o, ts, k, v)
        assert len(line.splitlines()) == 1
        r = parse_line(line)
        assert (r.partition, r.offset, r.timestamp, r.key, r.value) == (p, o, ts, k, v)
