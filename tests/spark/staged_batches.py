"""Hand-made batches of staged row events, for the staging table's tests (trims,
compaction): `batch(spark, first)` is `BATCH_EVENTS` row events of one table, offsets
`first`.., whose commit_ts is 1000 + offset.
"""

from __future__ import annotations

BATCH_EVENTS = 40
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
