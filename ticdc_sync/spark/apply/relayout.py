"""A target's layout carried out as the plan decided it (`plan.layout`): an existing target
brought to its entry's layout (`Layout` step), and a clustered target's clustering put back
after a write that replaced its rows or schema (Delta's overwrite through the DataFrame
writer clears a table's clustering columns, and `DataFrameWriter.clusterBy` on a path does
not set them).

An entry's changed `properties` and `comment` (`TableProperties` step) are carried out here
too: ALTER TABLE ... UNSET / SET TBLPROPERTIES and COMMENT ON TABLE, crash point
`layout.properties`.

Each commit names its crash point: `layout.rebuild` (the rows rewritten with the new
partition columns, one commit, no marker: the same rows) and `layout.cluster` (ALTER TABLE
... CLUSTER BY). A run stopped between them leaves a table the next plan sees without its
clustering, and plans the ALTER again. Decides nothing: the columns are the plan's.
"""

from __future__ import annotations

from ticdc_sync.core.sqlgen import quote
from ticdc_sync.plan.model import Layout, TableProperties
from ticdc_sync.plan.properties import change_text as properties_text
from ticdc_sync.plan.properties import to_dict as properties_dict
from ticdc_sync.spark.runtime.conf import before_commit


def change_layout(w, step: Layout) -> None:
    """Bring target `w` (a `TargetWriter`) to the layout of `step`."""
    if step.rebuild:
        rows = w.spark.read.format("delta").load(w.location)
        writer = rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        if step.partition_by:
            writer = writer.partitionBy(*step.partition_by)
        before_commit("layout.rebuild", target=w.name)
        writer.save(w.location)
        w.out(f"  {w.name}: rows rewritten {_describe(step.partition_by, 'partitioned')}")
    if step.cluster_by or not step.rebuild:
        cluster(w, step.cluster_by)


def cluster(w, columns: tuple[str, ...]) -> None:
    """ALTER TABLE ... CLUSTER BY `columns` (NONE for none): in place, no rows rewritten
    (the next OPTIMIZE clusters the files)."""
    cols = ", ".join(quote(c) for c in columns) if columns else None
    before_commit("layout.cluster", target=w.name)
    w.spark.sql(f"ALTER TABLE {w.ref} CLUSTER BY {f'({cols})' if cols else 'NONE'}")


def keep_clustering(w, columns: tuple[str, ...]) -> None:
    """After an overwrite (rows or schema): the table's clustering columns again, if any."""
    if columns:
        cluster(w, columns)


def set_properties(w, step: TableProperties) -> None:
    """Bring target `w`'s properties and description to its entry's: the plan's statements,
    one commit each (`layout.properties`), unset before set (the record of the keys the entry set
    changes last, so a run stopped between them unsets again). Each is the same done twice:
    a run stopped at any of them does what the next plan still finds."""
    for sql in step.sql:
        before_commit("layout.properties", target=w.name)
        w.spark.sql(sql)
    w.out(f"  {w.name}: {properties_text(properties_dict(step))}")


def _describe(columns: tuple[str, ...], what: str) -> str:
    return f"{what} by ({', '.join(columns)})" if columns else "without partitions"
