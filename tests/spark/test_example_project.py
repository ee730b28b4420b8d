"""The example project runs end to end and lands exactly its expected tables (all protocols).

Also exercises `status --show` and `plan --explain` through the CLI on the shared session.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.example_tables import differences
from tests.spark.engine_harness import load
from ticdc_sync import cli

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "projects_example" / "shop"


def test_example_runs_end_to_end(spark, tmp_path, capsys):
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    assert cli.main(["run", "--project", str(root)]) == 0
    assert differences(spark, load(root)) == []
    capsys.readouterr()
    assert cli.main(["status", "--project", str(root), "--show", "2"]) == 0
    status_out = capsys.readouterr().out
    assert "canal_orders" in status_out and "open_items" in status_out
    assert cli.main(["plan", "--project", str(root), "--explain"]) == 0
    explain_out = capsys.readouterr().out
    assert "== decode: source canal" in explain_out
    assert "== collapse (MERGE source): target debezium_orders ==" in explain_out
    assert "MERGE INTO" in explain_out
