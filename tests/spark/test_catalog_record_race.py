"""The `catalog` state table is created once when several targets record their catalog steps
at the same moment (their apply workers run side by side). Each thread creating it on its own
made two first commits race, and one failed the run with Delta's "multiple writers are
writing to an empty directory" (seen over Spark Connect, where two targets were registered
at once).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ticdc_sync.spark.apply import catalog_sync
from ticdc_sync.spark.runtime import rs_create
from ticdc_sync.warehouse.locations import state_location
from ticdc_sync.warehouse.read import CATALOG_TABLE
from ticdc_sync.warehouse.state import CatalogRecord

THREADS = 6


@pytest.mark.parametrize("path", ["statement", "commit"])
def test_targets_recording_at_once_create_the_catalog_table_once(
    spark, tmp_path: Path, monkeypatch, path: str
):
    if path == "statement":
        # The table made by Spark's CREATE statement, as over Spark Connect (whose server
        # writes the warehouse) or on an object store that delta-rs does not reach.
        monkeypatch.setattr(rs_create, "try_create", lambda *_a, **_k: False)
    warehouse = str(tmp_path / "wh")
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def record(i: int) -> None:
        start.wait()
        try:
            r = CatalogRecord(f"db.t{i}", f"{warehouse}/tables/t{i}", "registered")
            catalog_sync._record(spark, warehouse, f"t{i}", r)
        except BaseException as e:  # noqa: BLE001 - collected, asserted below
            failures.append(e)

    threads = [threading.Thread(target=record, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    rows = spark.read.format("delta").load(state_location(warehouse, CATALOG_TABLE)).collect()
    assert sorted(r.target for r in rows) == [f"t{i}" for i in range(THREADS)]
