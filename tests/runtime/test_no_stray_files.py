"""A run writes only into the project's warehouse and target/: no `spark-warehouse/`,
`metastore_db/` or `derby.log` in the working directory or the project.

Spark's built-in catalog creates its `spark.sql.warehouse.dir` (default: `spark-warehouse`
in the working directory) when first used; ticdc-sync points it into its cache folder.
"""

from __future__ import annotations

import pytest

from tests.runtime.helpers import ROWS, canal_project, child_env, cli, run_child
from tests.spark.engine_harness import load, read_target

pytestmark = pytest.mark.spark


def test_run_leaves_nothing_outside_warehouse_and_target(spark, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cache = tmp_path / "cache"
    root = canal_project(tmp_path / "p")
    # A target with deletion vectors is created by Spark's CREATE TABLE statement (a table
    # of protocol 1/2 is created without Spark: docs/engine.md), which uses the catalog.
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  table_features:\n    deletion_vectors: true\n"
    )
    before = {p.name for p in root.iterdir()}
    proc = run_child(
        cli("run", "--project", str(root)), env=child_env(TICDC_SYNC_CACHE=str(cache)), cwd=cwd
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in cwd.iterdir()) == []
    assert sorted({p.name for p in root.iterdir()} - before) == ["target", "warehouse"]
    assert (cache / "spark-warehouse").is_dir()  # where Spark's catalog folder went instead
    rows = read_target(spark, load(root), "t", "id")
    assert [(r["id"], r["v"]) for r in rows] == [(r["id"], r["v"]) for r in ROWS]
