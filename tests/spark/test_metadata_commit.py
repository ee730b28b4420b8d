"""A metadata-only DDL part committed without Spark (`metadata_commit`) leaves the table
Delta's own statement leaves: the same schema (position, type, comment), the same
properties, the marker in its commit, read by Spark and by delta-rs; and where it is not the
same table (column mapping, a column already there) it commits nothing, for the statement."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.core.window import Marker
from ticdc_sync.ddl.changes import AddColumn
from ticdc_sync.ddl.statements import Position
from ticdc_sync.spark.runtime import metadata_commit
from ticdc_sync.spark.runtime.conf import commit_marker

pytestmark = pytest.mark.spark

COLUMNS = "id INT COMMENT 'the key', v STRING, amount DECIMAL(12,2), _commit_ts BIGINT"
ADDED = [
    AddColumn("n", "BIGINT", Position("v"), comment="a count"),
    AddColumn("first_one", "DATE", Position(None)),
    AddColumn("tags", "ARRAY<STRING>"),
]


def schema_and_props(loc: str) -> tuple[dict, dict]:
    dt = DeltaTable(loc)
    return json.loads(dt.schema().to_json()), dict(dt.metadata().configuration)


def test_the_commit_is_the_statements(spark, tmp_path):
    by_spark, by_hand = str(tmp_path / "spark"), str(tmp_path / "hand")
    for loc in (by_spark, by_hand):
        spark.sql(f"CREATE TABLE {table_ref(loc)} ({COLUMNS}) USING delta COMMENT 'mirror'")
        spark.sql(f"INSERT INTO {table_ref(loc)} VALUES (1, 'a', 2.50, 7)")
    for i, col in enumerate(ADDED):
        sql = f"ALTER TABLE {table_ref(by_spark)} ADD COLUMNS (`{col.name}` {col.delta_type}"
        sql += f" COMMENT '{col.comment}'" if col.comment else ""
        sql += f" {col.position.sql()})" if col.position else ")"
        spark.sql(sql)
        with commit_marker(spark, Marker(applied_ts=7, ddl_ts=10 + i), "ddl.part", target="t"):
            assert metadata_commit.try_add_column(spark, by_hand, col)
    props = {"ticdc_sync.last_ddl_ts": "13"}
    spark.sql(
        f"ALTER TABLE {table_ref(by_spark)} SET TBLPROPERTIES ('ticdc_sync.last_ddl_ts' = '13')"
    )
    with commit_marker(spark, Marker(applied_ts=7, ddl_ts=13), "ddl.part", target="t"):
        assert metadata_commit.try_set_properties(spark, by_hand, props)

    assert schema_and_props(by_hand) == schema_and_props(by_spark)
    read = spark.read.format("delta").load(by_hand)
    assert read.schema == spark.read.format("delta").load(by_spark).schema
    assert read.columns == ["first_one", "id", "v", "n", "amount", "_commit_ts", "tags"]
    assert [tuple(r) for r in read.select("id", "v", "n").collect()] == [(1, "a", None)]
    history = spark.sql(f"DESCRIBE HISTORY {table_ref(by_hand)}").collect()
    newest = max(history, key=lambda r: r["version"])
    assert newest["operation"] == "SET TBLPROPERTIES"
    assert Marker.from_user_metadata(newest["userMetadata"]) == Marker(applied_ts=7, ddl_ts=13)
    assert sorted(r["operation"] for r in history).count("ADD COLUMNS") == 3
    # Spark writes after it, over the new schema.
    spark.sql(
        f"INSERT INTO {table_ref(by_hand)} (id, n, tags, _commit_ts) VALUES (2, 5, array('x'), 8)"
    )
    assert DeltaTable(by_hand).to_pyarrow_table().num_rows == 2


def test_nothing_is_committed_where_the_statement_knows_better(spark, tmp_path):
    mapped = str(tmp_path / "mapped")
    spark.sql(
        f"CREATE TABLE {table_ref(mapped)} ({COLUMNS}) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    plain = str(tmp_path / "plain")
    spark.sql(f"CREATE TABLE {table_ref(plain)} ({COLUMNS}) USING delta")
    versions = {loc: DeltaTable(loc).version() for loc in (mapped, plain)}
    # Column mapping: the statement gives the column its id and physical name.
    assert not metadata_commit.try_add_column(spark, mapped, AddColumn("n", "BIGINT"))
    # Already there (a resumed run): the statement's error is the one the part tolerates.
    assert not metadata_commit.try_add_column(spark, plain, AddColumn("V", "STRING"))
    # After a column that is not there; a name Delta refuses; a type outside protocol 1/2.
    assert not metadata_commit.try_add_column(spark, plain, AddColumn("n", "INT", Position("x")))
    assert not metadata_commit.try_add_column(spark, plain, AddColumn("a b", "INT"))
    assert not metadata_commit.try_add_column(spark, plain, AddColumn("t", "TIMESTAMP_NTZ"))
    # A property that is not ticdc-sync's own (it may take the table to a new protocol).
    assert not metadata_commit.try_set_properties(
        spark, plain, {"delta.enableChangeDataFeed": "true"}
    )
    assert {loc: DeltaTable(loc).version() for loc in (mapped, plain)} == versions
