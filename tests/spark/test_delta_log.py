"""What a table's version checksum says without the JVM (`delta_log.checksum_facts`) is what
Delta says: the columns a read shows, and the files and bytes DESCRIBE DETAIL gives, after the
commits a target sees (create, write, ADD COLUMN, a rename under column mapping, a delete);
and no answer where there is no checksum to read."""

from __future__ import annotations

import pytest

from ticdc_sync.spark.delta_log import checksum_facts
from ticdc_sync.sqlgen import table_ref

pytestmark = pytest.mark.spark


def test_checksum_facts_are_what_delta_says(spark, tmp_path):
    loc = str(tmp_path / "t")
    ref = table_ref(loc)

    def check() -> None:
        facts = checksum_facts(loc)
        assert facts is not None
        read = spark.read.format("delta").load(loc).schema.fields
        assert facts.columns == tuple((f.name, f.dataType.simpleString()) for f in read)
        detail = spark.sql(f"DESCRIBE DETAIL {ref}").collect()[0]
        assert (facts.files, facts.size) == (detail["numFiles"], detail["sizeInBytes"])

    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, `odd name` STRING, amount DECIMAL(20,4), "
        "at TIMESTAMP_NTZ, raw BINARY, code VARCHAR(8), tags ARRAY<STRING>, "
        "_commit_ts BIGINT) USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.enableDeletionVectors' = 'true')"
    )
    check()
    spark.sql(
        f"INSERT INTO {ref} VALUES (1, 'a', 1.5, TIMESTAMP_NTZ'2024-01-01 00:00:00', X'00', "
        "'x', array('t'), 7), (2, 'b', NULL, NULL, NULL, NULL, NULL, 8)"
    )
    check()
    spark.sql(f"ALTER TABLE {ref} ADD COLUMNS (added SMALLINT)")
    check()
    spark.sql(f"ALTER TABLE {ref} RENAME COLUMN `odd name` TO renamed")
    check()
    spark.sql(f"DELETE FROM {ref} WHERE id = 1")
    check()

    for crc in (tmp_path / "t" / "_delta_log").glob("*.crc"):
        crc.unlink()
    assert checksum_facts(loc) is None
    assert checksum_facts(str(tmp_path / "none")) is None
