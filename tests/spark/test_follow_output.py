"""`run --follow` prints one line per batch (events staged, applied ts, lag); the details
of each batch go to the log."""

from __future__ import annotations

import io
import re

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.console import Console
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.f (id INT PRIMARY KEY, v VARCHAR(10));\n"
MT = {"id": "int", "v": "varchar"}
BATCH = re.compile(
    r"batch (\d+): (\d+) event\(s\) staged, 1 target\(s\) at ts (\d+) "
    r"\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z\), lag \d+\.\ds, 0 error\(s\), \d+\.\ds"
)


def test_follow_prints_one_line_per_batch(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    row = canal_row("shop", "f", "INSERT", 100, {"id": "1", "v": "a"}, MT, ["id"])
    write_captures(root, "t", [(0, 0, None, row), (0, 1, None, wm(200))])
    out, err = io.StringIO(), io.StringIO()
    console = Console(stdout=out, stderr=err, progress="off")
    console.open_log(tmp_path / "follow.log", "test")
    console.details = False
    code = runner.run(
        load(root),
        spark=spark,
        follow=True,
        max_batches=2,
        poll_seconds=0.1,
        console=console,
    )
    console.close()
    assert code == 0
    lines = out.getvalue().splitlines()
    assert [BATCH.fullmatch(line).groups() for line in lines] == [  # type: ignore[union-attr]
        ("1", "2", "200"),
        ("2", "0", "200"),
    ], lines
    assert err.getvalue() == ""
    log = (tmp_path / "follow.log").read_text()
    assert "read+decode src: 2 new event(s) staged" in log and "apply f: +1" in log
