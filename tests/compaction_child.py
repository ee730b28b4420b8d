"""A process that stages batches while the staging table is compacted beside it, for the
tests that kill it with SIGKILL (`tests/spark/test_staging_compaction.py`).

    python -m tests.compaction_child WAREHOUSE BATCHES

Goes on from what is staged (the tally's last offset) and stages up to BATCHES batches of
`BATCH_EVENTS` row events, one staging commit each, as a `--follow` run's polls do; after
each, starts a compaction (`maintenance.Maintenance`, on its thread) once more than
`COMPACT_ABOVE` files were added since the last one. Prints `STAGED <last offset>` after
each staging commit, `COMPACTING` when a compaction starts, `COMPACTED ok|<error>` when one
ends. Exits 0 after waiting for the last compaction.
"""

from __future__ import annotations

import os
import sys
import time

BATCH_EVENTS = 40
COMPACT_ABOVE = 4
SOURCE = "src"


def batch(spark, first: int, n: int = BATCH_EVENTS):
    """`n` row events of one table, offsets `first`..; two tasks, so two files a commit."""
    from ticdc_sync.core.events import EVENT_SCHEMA, KIND_ROW

    rows = [
        (
            "t",
            0,
            first + i,
            0,
            KIND_ROW,
            1000 + first + i,
            True,
            "shop",
            "a",
            "c",
            None,
            {"id": str(first + i)},
            None,
            ["id"],
            None,
            None,
            None,
            None,
            None,
            None,
            0,
            None,
            f'{{"id": "{first + i}"}}',
        )
        for i in range(n)
    ]
    return spark.createDataFrame(rows, EVENT_SCHEMA).repartition(2)


def main(warehouse: str, batches: int) -> int:
    os.environ["TZ"] = "UTC"
    time.tzset()
    from ticdc_sync.spark.runtime.conf import INTERPRETED
    from ticdc_sync.spark.runtime.session import build_session
    from ticdc_sync.spark.staging.maintenance import Maintenance
    from ticdc_sync.spark.staging.table import Staging

    spark = build_session(
        None,
        app_name="ticdc-sync-compaction-child",
        kafka=False,
        # As the tests' own session (tests/spark/conftest.py): a few rows a query.
        extra_conf={
            "spark.master": "local[2]",
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "1",
            "spark.ui.enabled": "false",
            **INTERPRETED,
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    staging = Staging(spark, warehouse)
    compactor = Maintenance(staging, spark.newSession)

    def report() -> None:
        for ended in compactor.ended():
            if ended.compacted is not None:
                print(f"COMPACTED {ended.compacted.error or 'ok'}", flush=True)

    parts = staging.tally(SOURCE).partitions
    offset = max((p.last_offset for p in parts.values()), default=-1) + 1
    for _ in range(batches):
        staging.stage(SOURCE, batch(spark, offset))
        offset += BATCH_EVENTS
        print(f"STAGED {offset - 1}", flush=True)
        report()
        if compactor.start_if_due(COMPACT_ABOVE):
            print("COMPACTING", flush=True)
    compactor.wait()
    report()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
