"""What a table's version checksum says without the JVM (`delta_log.checksum_facts`) is what
Delta says: the columns a read shows, and the files and bytes DESCRIBE DETAIL gives, after the
commits a target sees (create, write, ADD COLUMN, a rename under column mapping, a delete);
and no answer where there is no checksum to read. The newest commit's information read from
its file (`newest_commit_info`) is what DESCRIBE HISTORY shows of it."""

from __future__ import annotations

import pytest

from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.core.window import Marker
from ticdc_sync.spark.runtime.conf import commit_marker
from ticdc_sync.spark.runtime.delta_log import checksum_facts, newest_commit_info

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


def test_the_newest_commit_info_is_what_describe_history_shows(spark, tmp_path):
    loc = str(tmp_path / "t")
    ref = table_ref(loc)
    assert newest_commit_info(loc) is None  # no table
    spark.sql(f"CREATE TABLE {ref} (id BIGINT, v STRING) USING delta")
    marker = Marker(42, 0, 0, 0)
    for statement in (
        f"INSERT INTO {ref} VALUES (1, 'a'), (2, 'b'), (3, NULL)",
        f"UPDATE {ref} SET v = 'c' WHERE id = 3",
        f"INSERT INTO {ref} SELECT id + 10, v FROM {ref}",
    ):
        with commit_marker(spark, marker, "create"):
            spark.sql(statement)
        info = newest_commit_info(loc)
        shown = spark.sql(f"DESCRIBE HISTORY {ref} LIMIT 1").collect()[0]
        assert info is not None and info["operation"] == shown["operation"]
        assert info["userMetadata"] == shown["userMetadata"]
        assert Marker.from_user_metadata(info["userMetadata"]) == marker
        assert info["operationMetrics"] == shown["operationMetrics"], statement
    assert info["operationMetrics"]["numOutputRows"] == "3"
    assert newest_commit_info("s3a://bucket/t") is None  # remote: asked of Delta


def test_a_create_killed_before_its_first_commit_is_done_again(spark, tmp_path):
    """A run killed while creating a target leaves `_delta_log/` with no commit (Delta's
    staged-commit folder, a temporary commit file). Delta's own check takes that for a table
    and CREATE TABLE IF NOT EXISTS does nothing there; the next run creates the target."""
    from tests.jvm_archive import _records
    from tests.spark.engine_harness import load, make_project, read_target, write_captures
    from ticdc_sync.spark import runner
    from ticdc_sync.spark.runtime.delta_log import has_commit, table_exists
    from ticdc_sync.warehouse.locations import target_location, warehouse_path

    schema = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));\n"
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=schema)
    write_captures(root, "t", _records())
    project = load(root)
    loc = target_location(warehouse_path(project), "t")
    log = tmp_path / "p" / "warehouse" / "tables" / "t" / "_delta_log"
    assert str(log.parent) == loc.removeprefix("file:")
    (log / "_staged_commits").mkdir(parents=True)
    (log / ".00000000000000000000.json.0a1b.tmp").write_text("{")
    assert has_commit(loc) is False and not table_exists(spark, loc)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert read_target(spark, project, "t", "id") == [{"id": 1, "v": "c", "_commit_ts": 200 << 18}]


def test_a_state_table_whose_create_was_killed_is_created_again(spark, tmp_path):
    """The same for the state tables: a log without a commit is made a table by the next
    run's first open."""
    from ticdc_sync.spark.runtime.delta_log import has_commit
    from ticdc_sync.spark.staging.state import State
    from ticdc_sync.warehouse.locations import state_location

    wh = str(tmp_path / "wh")
    events = state_location(wh, "events")
    log = tmp_path / "wh" / "_ticdc_sync" / "events" / "_delta_log"
    (log / "_staged_commits").mkdir(parents=True)
    (log / ".00000000000000000000.json.0a1b.tmp").write_text("{")
    state = State(spark, wh)
    assert has_commit(events) is True
    assert state.staging.tally("src").partitions == {}
    assert spark.read.format("delta").load(events).count() == 0


def test_a_folder_delta_takes_for_a_table_without_a_commit_is_an_error_naming_it(spark, tmp_path):
    """CREATE TABLE IF NOT EXISTS of a path does nothing when the folder lists anything; a
    folder holding files but no commit is reported, not left as a table never created."""
    import pytest

    from ticdc_sync.core.errors import TicdcSyncError
    from ticdc_sync.spark.runtime.delta_log import has_commit
    from ticdc_sync.spark.staging.state_table import ensure_table

    folder = tmp_path / "wh" / "t"
    folder.mkdir(parents=True)
    (folder / "part-00000-stray.snappy.parquet").write_bytes(b"PAR1")
    with pytest.raises(TicdcSyncError) as raised:
        ensure_table(spark, str(folder), "id INT")
    text = str(raised.value)
    assert str(folder) in text and "part-00000-stray.snappy.parquet" in text, text
    assert "remove the folder" in text, text
    assert has_commit(str(folder)) is False
    # Removed as the error says, the next create makes the table.
    (folder / "part-00000-stray.snappy.parquet").unlink()
    ensure_table(spark, str(folder), "id INT")
    assert has_commit(str(folder)) is True
