"""The example project runs end to end and lands exactly its expected tables (all protocols),
which polars and delta-rs read exactly as Spark does (no upstream table of the example is
renamed, dropped or widened, so no target needs a feature they lack).

Also exercises `status --show` and `plan --explain` through the CLI on the shared session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.example_tables import PREFIXES, differences
from tests.spark import readers as R
from tests.spark.engine_harness import load
from ticdc_sync import cli
from ticdc_sync.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "projects_example" / "shop"


def test_example_runs_end_to_end(spark, tmp_path, capsys):
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    assert cli.main(["run", "--project", str(root)]) == 0
    project = load(root)
    assert differences(spark, project) == []
    # Other readers: polars and delta-rs (SQL, to_pyarrow_table, to_pandas) read what Spark
    # reads: by default no target carries a feature they lack (docs/table-features.md).
    for expected_file in sorted((root / "expected").glob("*.json")):
        tbl = json.loads(expected_file.read_text())["table"].split(".")[1]
        for prefix in PREFIXES:
            loc = target_location(warehouse_path(project), prefix + tbl)
            assert R.reader_features(loc) <= {"timestampNtz"}, prefix + tbl
            R.assert_reads_as_spark(spark, loc, tuple(R.READERS))
    capsys.readouterr()
    assert cli.main(["status", "--project", str(root), "--show", "2"]) == 0
    status_out = capsys.readouterr().out
    assert "canal_orders" in status_out and "open_items" in status_out
    assert cli.main(["plan", "--project", str(root), "--explain"]) == 0
    explain_out = capsys.readouterr().out
    assert "== decode: source canal" in explain_out
    assert "== collapse (MERGE source): target debezium_orders ==" in explain_out
    assert "MERGE INTO" in explain_out
