"""A catalog step that fails says the catalog's own reason, not py4j's "An error occurred
while calling oN.tableExists.": here a catalog plugin whose class is not on the classpath
(Unity Catalog's connector, which Maven Central does not serve to this machine); and a run
with such a catalog stops before any target commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark.engine_harness import load, make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from ticdc_sync.core.errors import UserError
from ticdc_sync.plan.model import CATALOG_REGISTER, CatalogEntry
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply.catalog_sync import held_location
from ticdc_sync.warehouse.locations import target_location, warehouse_path


def test_a_catalog_that_cannot_load_is_named_with_its_reason(spark):
    key = "spark.sql.catalog.uc_absent"
    spark.conf.set(key, "io.unitycatalog.spark.UCSingleCatalog")
    entry = CatalogEntry("uc_absent", "lake", "orders", "/nowhere", "", CATALOG_REGISTER)
    try:
        with pytest.raises(UserError) as e:
            held_location(spark, entry)
    finally:
        spark.conf.unset(key)
    text = str(e.value)
    assert "catalog uc_absent: uc_absent.lake.orders cannot be looked up" in text
    assert "An error occurred while calling" not in text
    assert "io.unitycatalog.spark.UCSingleCatalog" in text


def test_a_run_whose_catalog_cannot_load_stops_before_any_target_commits(spark, tmp_path):
    """A target with new rows and a catalog step, its catalog a plugin that cannot load: the
    run's check before any apply stops it, naming the catalog, and the target's log has no
    new commit (found before, not after, the rows were committed)."""
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc")
    u = Upstream("canal-json")
    u.ddl("a", "CREATE TABLE shop.a (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("a", id=1, v="one")
    u.watermark()
    write_captures(root, "cdc", u.records())
    lines: list[str] = []
    assert runner.run(load(root), spark=spark, out=lines.append) == 0, "\n".join(lines)
    log = Path(target_location(warehouse_path(load(root)), "a")) / "_delta_log"
    commits = sorted(log.glob("*.json"))
    start = len(u.p.records)
    u.insert("a", id=2, v="two")
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    profiles = root / "profiles.yml"
    profiles.write_text(profiles.read_text().rstrip("\n") + "\n      catalog: {name: uc_absent}\n")
    key = "spark.sql.catalog.uc_absent"
    spark.conf.set(key, "io.unitycatalog.spark.UCSingleCatalog")
    try:
        with pytest.raises(UserError) as e:
            runner.run(load(root), spark=spark, out=lines.append)
    finally:
        spark.conf.unset(key)
    text = str(e.value)
    assert "catalog uc_absent (the profile output's `catalog`) cannot be loaded" in text
    assert "Cannot find catalog plugin class" in text and "nothing was applied" in text
    assert sorted(log.glob("*.json")) == commits
