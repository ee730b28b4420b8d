"""Records staged twice: whether a batch holds a position more than once, and whether those
copies differ (a capture that cannot be the topic's). Only checks; `Staging` decides what
to stage.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.sqlgen import quote

# An event's position: a record's (topic, partition, offset) and its index among the
# events decoded from that record.
POSITION = ("topic", "partition", "offset", "idx")


def repeats(batch: DataFrame) -> bool:
    """Whether a position is in `batch` twice. One narrow job over the kept batch's
    positions, much cheaper than the check of every capture line it replaces
    (benchmarks/README.md)."""
    # A count, not `limit(1)`: where nothing repeats (the usual case) a limit reads the
    # groups in growing rounds, one job each.
    copies = batch.groupBy(*POSITION).count().where(F.col("count") > 1).count()
    return copies > 0


def refuse_conflicts(source: str, batch: DataFrame) -> None:
    """Raise if positions of `batch` hold copies that differ (`conflicting_copies`)."""
    conflicts = conflicting_copies(batch)
    if conflicts:
        raise UserError(
            f"source {source}: capture files hold different records at the same "
            f"position: {', '.join(conflicts)} (hint: keep one file per range of "
            "offsets, delete the wrong line or file, or capture the topic again "
            "with `ticdc-sync capture`; nothing of this batch was staged)"
        )


def conflicting_copies(batch: DataFrame) -> list[str]:
    """Up to 3 positions (`topic/partition/offset`) in `batch` whose copies differ: two
    records at one offset, where only one can be the record Kafka held. Runs only after
    `repeats` found copies, so normal runs never pay for it."""
    fields = [f for f in batch.schema.fields if f.name != "source"]
    # Maps cannot be hashed; their JSON text stands for them.
    content = F.xxhash64(
        *[
            F.to_json(F.col(quote(f.name)))
            if f.dataType.typeName() == "map"
            else F.col(quote(f.name))
            for f in fields
        ]
    )
    rows = (
        batch.groupBy(*POSITION)
        .agg(F.count_distinct(content).alias("versions"))
        .where(F.col("versions") > 1)
        .select("topic", "partition", "offset")
        .distinct()
        .orderBy("topic", "partition", "offset")
        .limit(3)
        .collect()
    )
    return [f"{r['topic']}/{r['partition']}/{r['offset']}" for r in rows]
