"""What staging keeps and what a MERGE source may be called: column metadata only for tables
without a declared schema, target columns named like the engine's own position columns, and
how a target's emptiness is read, and which columns the staging table keeps statistics for."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.spark.engine_harness import (
    as_staged_columns,
    canal_row,
    load,
    make_project,
    read_target,
    write_captures,
)
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.spark import runner
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse.locations import state_location, warehouse_path

pytestmark = pytest.mark.spark

# `offset`, `partition`, `idx` and `commit_ts` are also what the engine orders changes by.
SCHEMA = (
    "CREATE TABLE shop.pos (id INT PRIMARY KEY, `offset` INT, `partition` VARCHAR(8), "
    "idx INT, commit_ts BIGINT);\n"
)
POS_TYPES = {
    "id": "int",
    "offset": "int",
    "partition": "varchar",
    "idx": "int",
    "commit_ts": "bigint",
}
FREE_TYPES = {"id": "int", "note": "varchar"}


def pos(op: str, ts: int, data: dict, old: dict | None = None) -> bytes:
    return canal_row("shop", "pos", op, ts, data, POS_TYPES, ["id"], old)


def free(op: str, ts: int, data: dict) -> bytes:
    return canal_row("shop", "free", op, ts, data, FREE_TYPES, ["id"])


def vals(i: int, o: int, p: str, x: int, c: int) -> dict:
    return {"id": str(i), "offset": str(o), "partition": p, "idx": str(x), "commit_ts": str(c)}


def test_seeded_rows_stage_without_metadata_and_position_named_columns_merge(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    write_captures(
        root,
        "t",
        [
            (0, 0, None, pos("INSERT", 100, vals(1, 10, "a", 1, 7))),
            (0, 1, None, pos("INSERT", 101, vals(2, 20, "b", 2, 8))),
            (0, 2, None, free("INSERT", 102, {"id": "1", "note": "x"})),
            (0, 3, None, wm(110)),
        ],
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0

    # Second run: the targets have rows, so this is a MERGE (the first was an INSERT).
    write_captures(
        root,
        "t",
        [
            (0, 4, None, pos("UPDATE", 120, vals(1, 11, "a2", 3, 9), vals(1, 10, "a", 1, 7))),
            # The key moves: 2 -> 3 deletes 2.
            (0, 5, None, pos("UPDATE", 121, vals(3, 30, "c", 4, 6), vals(2, 20, "b", 2, 8))),
            (0, 6, None, pos("UPDATE", 122, vals(1, 12, "a3", 5, 5), vals(1, 11, "a2", 3, 9))),
            (0, 7, None, wm(130)),
        ],
    )
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    rows = read_target(spark, project, "pos", "id")
    assert [
        (r["id"], r["offset"], r["partition"], r["idx"], r["commit_ts"], r["_commit_ts"])
        for r in rows
    ] == [(1, 12, "a3", 5, 5, 122), (3, 30, "c", 4, 6, 121)]

    # A table with a schema/*.sql seed never needs its protocol metadata; one without keeps
    # it, and its target is created from it.
    staged = (
        Staging(spark, warehouse_path(project))
        .events()
        .where(F.col("kind") == "row")
        .groupBy("tbl")
        .agg(F.count("col_meta").alias("with_meta"), F.count(F.lit(1)).alias("rows"))
    )
    assert sorted(tuple(r) for r in staged.collect()) == [("free", 1, 1), ("pos", 0, 5)]
    assert [(r["id"], r["note"]) for r in read_target(spark, project, "free", "id")] == [(1, "x")]


def test_has_data_files_follows_the_snapshot(spark, tmp_path):
    """A target's emptiness (INSERT instead of MERGE, no backfill UPDATE) comes from the
    snapshot's file count: none after CREATE, some after a write and after a partial delete
    (a deletion vector keeps the file), and the same answer as listing the files once
    every row is deleted. The count is read from the version's checksum file, and is the
    one DESCRIBE DETAIL gives; without checksum files, DESCRIBE DETAIL answers."""
    from ticdc_sync.core.sqlgen import table_ref
    from ticdc_sync.spark.runtime.delta_log import checksum_num_files, has_data_files

    loc = str(tmp_path / "t")
    ref = table_ref(loc)

    def detail_files() -> int:
        return int(spark.sql(f"DESCRIBE DETAIL {ref}").collect()[0]["numFiles"])

    def check(want: bool) -> None:
        assert checksum_num_files(loc) == detail_files()
        assert has_data_files(spark, loc) is want

    spark.sql(
        f"CREATE TABLE {ref} (id INT) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    check(False)
    spark.sql(f"INSERT INTO {ref} VALUES (1), (2)")
    check(True)
    spark.sql(f"DELETE FROM {ref} WHERE id = 1")
    check(True)
    spark.sql(f"DELETE FROM {ref}")
    assert spark.read.format("delta").load(loc).count() == 0
    check(bool(spark.read.format("delta").load(loc).inputFiles()))

    spark.sql(f"INSERT INTO {ref} VALUES (3)")
    for crc in (tmp_path / "t" / "_delta_log").glob("*.crc"):
        crc.unlink()
    assert checksum_num_files(loc) is None
    assert has_data_files(spark, loc)


def test_staging_statistics_cover_only_the_columns_events_are_selected_by(spark, tmp_path):
    """A new staging table keeps file statistics for its selection columns only; one an
    older ticdc-sync created without the property gains it on the next run."""
    from ticdc_sync.spark.staging.table import STAGED_PROPERTIES, STAGED_SCHEMA

    def stats_columns(wh: str) -> str | None:
        loc = state_location(wh, "events")
        props = spark.sql(f"DESCRIBE DETAIL {table_ref(loc)}").collect()[0]["properties"]
        return props.get("delta.dataSkippingStatsColumns")

    want = STAGED_PROPERTIES["delta.dataSkippingStatsColumns"]
    fresh = str(tmp_path / "fresh")
    Staging(spark, fresh)
    assert stats_columns(fresh) == want

    older = str(tmp_path / "older")
    spark.sql(
        f"CREATE TABLE {table_ref(state_location(older, 'events'))} ({STAGED_SCHEMA}) USING delta"
    )
    assert stats_columns(older) is None
    Staging(spark, older)
    assert stats_columns(older) == want


def test_staged_unique_columns_are_written_without_a_parquet_dictionary(spark, tmp_path):
    """offset, commit_ts, kafka_ts and the row-image text are staged plain (the table's
    `#column` properties reach the Parquet writer); a low-cardinality column such as tbl
    keeps its dictionary. The values here repeat, so without the properties Parquet would
    keep a dictionary."""
    import pyarrow.parquet as pq

    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    rows = [("t", 0, 7, 0, "row", 100, True, "shop", "pos", "I")] * 50
    decoded = spark.createDataFrame(
        rows,
        "topic STRING, `partition` INT, `offset` BIGINT, idx INT, kind STRING, "
        "commit_ts BIGINT, exact_ts BOOLEAN, db STRING, tbl STRING, op STRING",
    ).select(
        "*",
        F.lit(1).cast("bigint").alias("kafka_ts"),
        F.lit('{"id":"7"}').alias("before_json"),
        F.lit('{"id":"7","note":"x"}').alias("after_json"),
    )
    state.stage("src", as_staged_columns(state, decoded))
    files = spark.read.format("delta").load(state.events_path).inputFiles()
    assert files
    for f in files:
        meta = pq.ParquetFile(f.removeprefix("file:")).metadata
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            enc = {
                rg.column(i).path_in_schema: rg.column(i).encodings for i in range(rg.num_columns)
            }
            for plain in ("offset", "commit_ts", "kafka_ts", "before_json", "after_json"):
                assert not any("DICTIONARY" in e for e in enc[plain]), (plain, enc[plain])
            assert any("DICTIONARY" in e for e in enc["tbl"])
