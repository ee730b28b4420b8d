"""A catalog step that fails says the catalog's own reason, not py4j's "An error occurred
while calling oN.tableExists.": here a catalog plugin whose class is not on the classpath
(Unity Catalog's connector, which Maven Central does not serve to this machine)."""

from __future__ import annotations

import pytest

from ticdc_sync.core.errors import UserError
from ticdc_sync.plan.model import CATALOG_REGISTER, CatalogEntry
from ticdc_sync.spark.apply.catalog_sync import held_location


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
