"""`run --follow` prints one line per poll (events staged, targets applied since, targets
past their lag, staging's lag); the details go to the log."""

from __future__ import annotations

import io
import re

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.console import Console
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.f (id INT PRIMARY KEY, v VARCHAR(10));\n"
MT = {"id": "int", "v": "varchar"}
POLL = re.compile(
    r"poll (\d+): (\d+) event\(s\) staged, (\d+) applied, (\d+) behind \(over lag\), "
    r"staging lag \d+\.\ds"
)


def test_follow_prints_one_line_per_poll(spark, tmp_path):
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
    polls = [POLL.fullmatch(line).groups() for line in lines]  # type: ignore[union-attr]
    assert [(n, staged) for n, staged, _, _ in polls] == [("1", "2"), ("2", "0")], lines
    # The one apply ends after the first poll or the second (the loop never waits for it);
    # its change is far past the default lag, so nothing stays behind at the end.
    assert sum(int(applied) for _, _, applied, _ in polls) == 1, lines
    assert polls[-1][3] == "0", lines
    assert err.getvalue() == ""
    log = (tmp_path / "follow.log").read_text()
    assert "read+decode src: 2 new event(s) staged" in log and "apply f: +1" in log
