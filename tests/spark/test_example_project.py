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
from ticdc_sync.commands import cli
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "projects_example" / "shop"


def test_example_runs_end_to_end(spark, tmp_path, capsys):
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    assert cli.main(["run", "--project", str(root)]) == 0
    run_out = capsys.readouterr().out
    # `sync_points: every 10m`: the run records the TSO all targets of each source hold.
    for source in ("canal", "debezium", "open"):
        assert f"  {source}: sync point at TSO " in run_out, run_out
    project = load(root)
    # canal_* mirror, debezium_* soft_delete, open_* history: the rows each holds now equal
    # the upstream tables.
    assert differences(spark, project) == []
    deleted = spark.read.format("delta").load(
        target_location(warehouse_path(project), "debezium_items")
    )
    assert deleted.where("_is_deleted").count() > 0  # the example deletes items upstream
    versions = spark.read.format("delta").load(
        target_location(warehouse_path(project), "open_orders")
    )
    assert versions.where("_valid_to IS NOT NULL").count() > 0  # orders change upstream
    # Other readers: polars and delta-rs (SQL, to_pyarrow_table, to_pandas) read what Spark
    # reads: by default no target carries a feature they lack (docs/table-features.md).
    for expected_file in sorted((root / "expected").glob("*.json")):
        tbl = json.loads(expected_file.read_text())["table"].split(".")[1]
        for prefix in PREFIXES:
            loc = target_location(warehouse_path(project), prefix + tbl)
            assert R.reader_features(loc) <= {"timestampNtz"}, prefix + tbl
            readers = tuple(R.READERS) if prefix == "canal_" else R.MODE_READERS
            R.assert_reads_as_spark(spark, loc, readers)
    capsys.readouterr()
    assert cli.main(["status", "--project", str(root), "--show", "2"]) == 0
    status_out = capsys.readouterr().out
    assert "canal_orders" in status_out and "open_items" in status_out
    assert cli.main(["snapshot", "--project", str(root), "--as-of", "latest"]) == 0
    snap_out = capsys.readouterr().out
    assert "canal_orders" in snap_out and "VERSION AS OF" in snap_out, snap_out
    assert cli.main(["plan", "--project", str(root), "--explain"]) == 0
    explain_out = capsys.readouterr().out
    assert "== decode: source canal" in explain_out
    assert "== collapse (MERGE source): target debezium_orders ==" in explain_out
    assert "MERGE INTO" in explain_out
