"""The runtime builds a Delta-enabled session: column mapping, rename, type widening work."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_delta_table_with_column_mapping_and_type_widening(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id INT, v STRING, _commit_ts BIGINT) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode'='name', 'delta.enableTypeWidening'='true')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a', 10), (2147483647, 'b', 11)")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN v TO w")
    spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN id TYPE BIGINT")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (9223372036854775807, 'c', 12)")
    df = spark.read.format("delta").load(path)
    assert [f.name for f in df.schema.fields] == ["id", "w", "_commit_ts"]
    assert df.schema["id"].dataType.simpleString() == "bigint"
    rows = sorted((r.id, r.w) for r in df.collect())
    assert rows == [(1, "a"), (2147483647, "b"), (9223372036854775807, "c")]
