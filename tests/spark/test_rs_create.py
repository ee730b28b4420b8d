"""A table created without the statement (`rs_create`: by delta-rs, or for a TIMESTAMP_NTZ
column by a commit written as Delta writes it) is the table Delta's CREATE TABLE makes: the
same protocol and the same metadata (schema, description, properties, the session's
property defaults among them), for the state tables and for targets of every mode and of
every column type; Spark and delta-rs then write it and read it alike. Where a property asks
for a feature, or the folder holds files, the statement creates it as before."""

from __future__ import annotations

import json

import pytest

from ticdc_sync.core.model import Mode
from ticdc_sync.core.sqlgen import create_table_sql, table_ref
from ticdc_sync.core.sqlgen_history import mode_columns
from ticdc_sync.spark.runtime.delta_log import checksum_facts
from ticdc_sync.spark.runtime.rs_create import PlainCreate
from ticdc_sync.spark.runtime.table_create import create_table
from ticdc_sync.spark.staging.quarantine import QUARANTINE_SCHEMA
from ticdc_sync.spark.staging.schema_history import SCHEMA_HISTORY_SCHEMA
from ticdc_sync.spark.staging.state_table import ddl_columns, ensure_table, properties_sql
from ticdc_sync.spark.staging.table import STAGED_PROPERTIES, STAGED_SCHEMA

pytestmark = pytest.mark.spark

# Every type `datatypes.delta_type` gives but TIMESTAMP_NTZ.
UPSTREAM = (
    ("id", "BIGINT"),
    ("u", "DECIMAL(20,0)"),
    ("amount", "DECIMAL(12,4)"),
    ("tiny", "TINYINT"),
    ("small", "SMALLINT"),
    ("n", "INT"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("name", "STRING"),
    ("raw", "BINARY"),
    ("day", "DATE"),
    ("at", "TIMESTAMP"),
    ("flag", "BOOLEAN"),
)


def _log(folder) -> tuple[dict, dict, dict]:
    """(commitInfo, protocol, metaData) of version 0."""
    actions = {}
    for line in (folder / "_delta_log" / f"{0:020d}.json").read_text().splitlines():
        actions.update(json.loads(line))
    return actions["commitInfo"], actions["protocol"], actions["metaData"]


def _same_table(
    by_statement, by_rs, engine: str = "delta-rs", partitions: tuple[str, ...] = ()
) -> None:
    """Version 0 of both folders makes the same table; the second was not written by Spark."""
    info_s, protocol_s, meta_s = _log(by_statement)
    info_r, protocol_r, meta_r = _log(by_rs)
    assert info_s["engineInfo"].startswith("Apache-Spark"), info_s
    assert info_r["engineInfo"].startswith(engine), info_r
    features = ("readerFeatures", "writerFeatures")
    assert {k: v for k, v in protocol_r.items() if k not in features} == {
        k: v for k, v in protocol_s.items() if k not in features
    }
    for k in features:
        assert sorted(protocol_r.get(k, [])) == sorted(protocol_s.get(k, [])), k
    assert json.loads(meta_r["schemaString"]) == json.loads(meta_s["schemaString"])
    assert meta_r["configuration"] == meta_s["configuration"]
    assert meta_r["partitionColumns"] == meta_s["partitionColumns"] == list(partitions)
    assert meta_r["format"] == meta_s["format"]
    assert meta_r.get("description") == meta_s.get("description")


def _both(spark, tmp_path, ddl: str, properties: dict[str, str], comment: str | None = None):
    columns = ddl_columns(ddl)
    text = (
        f"CREATE TABLE IF NOT EXISTS {{ref}} ({ddl}) USING delta"
        + (f" COMMENT '{comment}'" if comment else "")
        + (f" TBLPROPERTIES ({properties_sql(properties)})" if properties else "")
    )
    folders = []
    for name, plain in (
        ("statement", None),
        ("rs", PlainCreate(columns, comment, tuple(properties.items()))),
    ):
        loc = str(tmp_path / name)
        create_table(spark, loc, text.format(ref=table_ref(loc)), plain)
        folders.append(tmp_path / name)
    return folders


@pytest.mark.parametrize(
    ("ddl", "properties"),
    [
        (STAGED_SCHEMA, {"delta.appendOnly": "false", **STAGED_PROPERTIES}),
        (QUARANTINE_SCHEMA, {"delta.appendOnly": "false"}),
        (SCHEMA_HISTORY_SCHEMA, {"delta.appendOnly": "false"}),
    ],
    ids=["staging", "quarantine", "schema_history"],
)
def test_a_state_table_delta_rs_creates_is_the_one_the_statement_creates(
    spark, tmp_path, ddl, properties
):
    statement, rs = _both(spark, tmp_path, ddl, properties)
    _same_table(statement, rs)
    # The same columns to Spark, and the facts without the JVM, the checksum's or the commit's.
    assert spark.read.format("delta").load(str(rs)).schema == (
        spark.read.format("delta").load(str(statement)).schema
    )
    assert checksum_facts(str(rs)) == checksum_facts(str(statement))


@pytest.mark.parametrize("ntz", [False, True], ids=["protocol-1-2", "timestamp_ntz"])
@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_a_target_created_without_the_statement_is_its_table_and_takes_writes(
    spark, tmp_path, mode, ntz
):
    extra = mode_columns(mode)
    upstream = (*UPSTREAM, ("wall", "TIMESTAMP_NTZ")) if ntz else UPSTREAM
    cols = (*upstream, ("_commit_ts", "BIGINT"), *((n, t.upper()) for n, t in extra))
    created = []
    for name, plain in (
        ("statement", None),
        ("rs", PlainCreate(cols, "upstream comment", ())),
    ):
        loc = str(tmp_path / name)
        text = create_table_sql(table_ref(loc), upstream, "upstream comment", {}, extra)
        create_table(spark, loc, text, plain)
        created.append(loc)
    _same_table(tmp_path / "statement", tmp_path / "rs", "ticdc-sync" if ntz else "delta-rs")
    # Spark writes both alike (an INSERT, then a MERGE that updates and inserts), and
    # delta-rs reads what Spark reads.
    from deltalake import DeltaTable

    names = [n for n, _ in cols]
    values = ", ".join(
        {
            "BIGINT": "1",
            "INT": "2",
            "TINYINT": "3",
            "SMALLINT": "4",
            "FLOAT": "1.5",
            "DOUBLE": "2.5",
            "STRING": "'x'",
            "BINARY": "X'01'",
            "DATE": "DATE'2024-01-02'",
            "TIMESTAMP": "TIMESTAMP'2024-01-02 03:04:05'",
            "TIMESTAMP_NTZ": "TIMESTAMP_NTZ'2024-01-02 03:04:05'",
            "BOOLEAN": "true",
        }.get(t, "1.25")
        for _, t in cols
    )
    for loc in created:
        ref = table_ref(loc)
        spark.sql(f"INSERT INTO {ref} ({', '.join(f'`{n}`' for n in names)}) VALUES ({values})")
        spark.sql(
            f"MERGE INTO {ref} t USING (SELECT * FROM {ref} UNION ALL SELECT * FROM {ref}) s "
            "ON false WHEN NOT MATCHED THEN INSERT *"
        )
        spark.sql(f"UPDATE {ref} SET name = 'y' WHERE id = 1")
    statement_rows = spark.read.format("delta").load(created[0]).collect()
    rs_rows = spark.read.format("delta").load(created[1]).collect()
    assert sorted(map(tuple, rs_rows)) == sorted(map(tuple, statement_rows))
    assert len(rs_rows) == 3 and {r["name"] for r in rs_rows} == {"y"}
    assert DeltaTable(created[1]).to_pyarrow_table().num_rows == 3


def test_a_session_default_property_lands_in_both(spark, tmp_path):
    # ticdc-sync's sessions set enableChangeDataFeed off by default (runtime/session.py):
    # Delta adds it to every table it creates, and so the delta-rs create.
    assert spark.conf.get("spark.databricks.delta.properties.defaults.enableChangeDataFeed") == (
        "false"
    )
    statement, rs = _both(spark, tmp_path, "id BIGINT, v STRING", {})
    _same_table(statement, rs)
    assert _log(rs)[2]["configuration"]["delta.enableChangeDataFeed"] == "false"


@pytest.mark.parametrize(
    ("ddl", "properties"),
    [
        ("id BIGINT, at TIMESTAMP_NTZ", {"delta.enableDeletionVectors": "true"}),
        ("id BIGINT", {"delta.enableDeletionVectors": "true"}),
        ("id BIGINT", {"delta.enableChangeDataFeed": "true"}),
        ("`odd name` BIGINT", {"delta.columnMapping.mode": "name"}),
    ],
    ids=["ntz_deletion_vectors", "deletion_vectors", "change_data_feed", "column_mapping"],
)
def test_a_table_delta_rs_would_write_otherwise_is_created_by_the_statement(
    spark, tmp_path, ddl, properties
):
    _, rs = _both(spark, tmp_path, ddl, properties)
    info, protocol, _ = _log(rs)
    assert info["engineInfo"].startswith("Apache-Spark"), info
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) != (1, 2)


def test_a_folder_with_files_is_left_to_the_statement(spark, tmp_path):
    """delta-rs would make a table beside files a killed write left; the statement reports
    them (test_delta_log)."""
    from ticdc_sync.core.errors import TicdcSyncError

    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "part-00000-stray.snappy.parquet").write_bytes(b"PAR1")
    with pytest.raises(TicdcSyncError, match="remove the folder"):
        ensure_table(spark, str(folder), "id INT")
    assert not (folder / "_delta_log").exists() or not any((folder / "_delta_log").iterdir())


@pytest.mark.parametrize("ddl", ["id BIGINT", "id BIGINT, at TIMESTAMP_NTZ"], ids=["rs", "ntz"])
def test_a_create_inside_a_marker_carries_it_as_the_statement_does(spark, tmp_path, ddl):
    """An upstream CREATE TABLE creates its target inside the DDL's marker
    (`ddl_commit`): version 0 carries it, and a read as of a TSO finds the table applied to
    the DDL from its first version on."""
    from ticdc_sync.core.window import Marker
    from ticdc_sync.spark.runtime.conf import commit_marker

    marker = Marker(applied_ts=7, ddl_ts=7, ddl_part=0, ddl_parts=1)
    with commit_marker(spark, marker, "create"):
        statement, rs = _both(spark, tmp_path, ddl, {})
    _same_table(statement, rs, "ticdc-sync" if "NTZ" in ddl else "delta-rs")
    for folder in (statement, rs):
        assert Marker.from_user_metadata(_log(folder)[0].get("userMetadata")) == marker


@pytest.mark.parametrize("ntz", [False, True], ids=["protocol-1-2", "timestamp_ntz"])
def test_a_partitioned_target_is_created_without_the_statement_a_clustered_one_by_it(
    spark, tmp_path, ntz
):
    upstream = (("id", "BIGINT"), ("region", "STRING"))
    upstream += (("wall", "TIMESTAMP_NTZ"),) if ntz else ()
    cols = (*upstream, ("_commit_ts", "BIGINT"))
    region = ("region",)
    for name, parts, clustered, rs in (
        ("statement", region, (), False),
        ("rs", region, (), True),
        ("clustered", (), region, True),
    ):
        loc = str(tmp_path / name)
        text = create_table_sql(table_ref(loc), upstream, None, {}, (), parts, clustered)
        plain = PlainCreate(cols, None, (), parts, clustered) if rs else None
        create_table(spark, loc, text, plain)
    engine = "ticdc-sync" if ntz else "delta-rs"
    _same_table(tmp_path / "statement", tmp_path / "rs", engine, partitions=("region",))
    # delta-rs writes no clustered table: the statement made it.
    info, protocol, _ = _log(tmp_path / "clustered")
    assert info["engineInfo"].startswith("Apache-Spark")
    assert {"clustering", "domainMetadata"} <= set(protocol["writerFeatures"])
