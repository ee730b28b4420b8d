"""`ticdc_sync.core.lake` answers what Spark answers, on tables Spark wrote: targets as ticdc-sync
creates them (column mapping, type widening, deletion vectors, timestampNtz, column
defaults), after a MERGE with a marker, a widening, a rename and an OPTIMIZE; the staging
table with its map and array columns; tables delta-rs refuses to load (read from
`_delta_log` instead); checkpoints of every kind; and the same tables on an S3-compatible
server (moto's, on 127.0.0.1)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.spark.engine_harness import as_staged_columns
from ticdc_sync.core import lake
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.sqlgen import create_table_sql, table_ref
from ticdc_sync.core.staged import from_user_metadata
from ticdc_sync.core.window import Marker
from ticdc_sync.spark.runtime.conf import commit_marker, session_conf
from ticdc_sync.spark.runtime.delta_log import latest_user_metadata
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse.locations import legacy_path_segment, state_location, target_location

pytestmark = pytest.mark.spark

TARGET_COLUMNS = [
    ("id", "INT"),
    ("name", "STRING"),
    ("amount", "DECIMAL(10,2)"),
    ("ts", "TIMESTAMP"),
    ("dt", "TIMESTAMP_NTZ"),
    ("b", "BINARY"),
    ("flag", "BOOLEAN"),
    ("d", "DATE"),
    ("x", "DOUBLE"),
    ("f", "FLOAT"),
    ("s", "SMALLINT"),
    ("ti", "TINYINT"),
]
MARKER = Marker(applied_ts=4242, ddl_ts=4000, ddl_part=0, ddl_parts=1)
EVENT_COLUMNS = (
    "topic STRING, `partition` INT, `offset` BIGINT, idx INT, kind STRING, commit_ts BIGINT, "
    "exact_ts BOOLEAN, db STRING, tbl STRING, op STRING, after MAP<STRING, STRING>, "
    "col_meta MAP<STRING, STRING>, pk_names ARRAY<STRING>, ddl_sql STRING, raw_value BINARY"
)
# A feature no Delta reader knows yet, as a newer writer would add it.
FUTURE_FEATURE = "someFutureFeature"
BUCKET = "lake-test"


@dataclass
class SparkSays:
    """What Spark reports about a table."""

    version: int
    user_metadata: list[str | None]  # newest first
    schema: list[tuple[str, str]]
    min_reader: int
    min_writer: int
    features: tuple[str, ...]
    properties: dict[str, str]


def spark_says(spark, location: str) -> SparkSays:
    history = spark.sql(f"DESCRIBE HISTORY {table_ref(location)}").collect()
    history.sort(key=lambda r: r["version"], reverse=True)
    detail = spark.sql(f"DESCRIBE DETAIL {table_ref(location)}").collect()[0]
    schema = spark.read.format("delta").load(location).schema
    return SparkSays(
        version=history[0]["version"],
        user_metadata=[r["userMetadata"] for r in history],
        schema=[(f.name, f.dataType.simpleString()) for f in schema.fields],
        min_reader=detail["minReaderVersion"],
        min_writer=detail["minWriterVersion"],
        features=tuple(sorted(detail["tableFeatures"])),
        properties={
            k: v
            for k, v in sorted(detail["properties"].items())
            if k.startswith(lake.PROPERTY_PREFIXES)
        },
    )


def assert_same(table: lake.LakeTable, said: SparkSays, *, marker: Marker | None) -> None:
    assert table.version() == said.version
    assert table.schema() == said.schema
    p = table.protocol()
    assert (p.min_reader_version, p.min_writer_version) == (said.min_reader, said.min_writer)
    assert p.table_features() == said.features
    assert p.properties == said.properties
    spark_marker = next(
        (m for m in map(Marker.from_user_metadata, said.user_metadata) if m is not None), None
    )
    assert spark_marker == marker
    assert table.newest_user_metadata(Marker.from_user_metadata) == marker


# Every table feature earlier versions enabled at CREATE (today a target gains column mapping
# and type widening with the DDL that needs them): the most a reader meets.
EVERY_FEATURE = {
    "delta.columnMapping.mode": "name",
    "delta.enableTypeWidening": "true",
    "delta.feature.allowColumnDefaults": "supported",
    "delta.feature.timestampNtz": "supported",
    "delta.enableDeletionVectors": "true",
}


def make_target(spark, location: str) -> None:
    """A target with every feature, as ticdc-sync changes it: rows, a MERGE carrying the
    marker, a widening, a rename, and an OPTIMIZE (a commit without userMetadata)."""
    ref = table_ref(location)
    spark.sql(create_table_sql(ref, TARGET_COLUMNS, properties=EVERY_FEATURE))
    spark.sql(
        f"INSERT INTO {ref} VALUES (1, 'a', 1.50, TIMESTAMP'2024-01-01 00:00:00', "
        "TIMESTAMP_NTZ'2024-01-01 01:00:00', X'00FF', true, DATE'2024-01-02', 1.5, 2.5, 3, 4, 10),"
        " (2, 'b', 2.50, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 11)"
    )
    with commit_marker(spark, MARKER, "merge"):
        spark.sql(
            f"MERGE INTO {ref} t USING (SELECT 1 AS id, 'z' AS name) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET t.name = s.name"
        )
    spark.sql(f"ALTER TABLE {ref} ALTER COLUMN id TYPE BIGINT")
    spark.sql(f"ALTER TABLE {ref} RENAME COLUMN name TO title")
    spark.sql(f"OPTIMIZE {ref}")


def stage_events(spark, state: Staging) -> None:
    """Two staging commits of rows, a watermark and DDL (the second carries the tallies of
    the first in its userMetadata)."""
    first = [
        ("t", 0, 0, 0, "row", 10, True, "shop", "orders", "I", {"id": "1", "v": "a"},
         {"id": "int", "v": "varchar(10)"}, ["id"], None, None),
        ("t", 0, 1, 0, "ddl", 12, True, "shop", "orders", None, None, None, None,
         "ALTER TABLE orders ADD COLUMN w INT", None),
        ("t", 0, 2, 0, "watermark", 12, True, None, None, None, None, None, None, None, None),
    ]  # fmt: skip
    second = [
        ("t", 0, 3, 0, "ddl", 20, True, "shop", "items", None, None, None, None,
         "CREATE TABLE items (id INT PRIMARY KEY)", None),
        ("t", 1, 0, 0, "row", 21, True, "shop", "items", "I", {"id": "7"}, {"id": "int"},
         ["id"], None, None),
        ("t", 1, 1, 0, "ddl", 30, True, "shop", "items", None, None, None, None,
         "ALTER TABLE items ADD COLUMN n TEXT", None),
        ("t", 1, 2, 0, "bad", 31, True, None, None, None, None, None, None, None, b"\x00\xff"),
    ]  # fmt: skip
    for batch in (first, second):
        df = spark.createDataFrame(batch, EVENT_COLUMNS)
        state.stage("src", as_staged_columns(state, df))


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("lake") / "wh"
    make_target(spark, target_location(str(wh), "orders"))
    stage_events(spark, Staging(spark, str(wh)))
    return wh


def location(wh: Path, target: str) -> str:
    return target_location(str(wh), target)


# --- targets ------------------------------------------------------------------------------


def test_target_metadata_is_what_spark_says(spark, warehouse: Path) -> None:
    loc = location(warehouse, "orders")
    said = spark_says(spark, loc)
    # The table this test is about: every feature ticdc-sync enables, one commit of each kind.
    assert {"columnMapping", "typeWidening", "deletionVectors", "timestampNtz"} <= set(
        said.features
    )
    assert said.user_metadata[0] is None  # OPTIMIZE
    assert ("id", "bigint") in said.schema and ("title", "string") in said.schema

    table = lake.LakeTable(loc)
    assert table.exists()
    assert_same(table, said, marker=MARKER)
    # The module-level helpers open the location anew and answer the same.
    assert lake.exists(loc)
    assert lake.version(loc) == said.version
    assert lake.schema(loc) == said.schema
    assert lake.protocol(loc) == table.protocol()
    assert lake.newest_user_metadata(loc, Marker.from_user_metadata) == MARKER
    p = table.protocol()
    assert "typeWidening" in p.reader_features and "allowColumnDefaults" in p.writer_features
    assert "allowColumnDefaults" not in p.reader_features  # a writer-only feature


def test_target_rows_are_refused_naming_the_location_and_feature(warehouse: Path) -> None:
    loc = location(warehouse, "orders")
    with pytest.raises(UserError) as e:
        lake.read(loc, ["id"])
    assert loc in str(e.value) and "TypeWidening" in str(e.value) and "hint:" in str(e.value)


def test_marker_is_found_past_many_foreign_commits_as_spark_finds_it(spark, tmp_path) -> None:
    loc = str(tmp_path / "t")
    ref = table_ref(loc)
    spark.sql(f"CREATE TABLE {ref} (id INT) USING delta")
    assert lake.newest_user_metadata(loc, Marker.from_user_metadata) is None
    with commit_marker(spark, MARKER, "merge"):
        spark.sql(f"INSERT INTO {ref} VALUES (1)")
    newer = Marker(applied_ts=5000)
    with commit_marker(spark, newer, "merge"):
        spark.sql(f"INSERT INTO {ref} VALUES (2)")
    # More commits without userMetadata than the first look-back covers.
    for i in range(4):
        spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('ticdc_sync.test' = '{i}')")
    assert latest_user_metadata(spark, loc, Marker.from_user_metadata) == newer
    assert lake.newest_user_metadata(loc, Marker.from_user_metadata) == newer
    assert lake.protocol(loc).properties["ticdc_sync.test"] == "3"


def test_rows_with_column_mapping_and_deletion_vectors_are_what_spark_reads(
    spark, tmp_path
) -> None:
    loc = str(tmp_path / "cm_dv")
    ref = table_ref(loc)
    spark.sql(
        f"CREATE TABLE {ref} (id INT, name STRING, tags ARRAY<STRING>, attrs MAP<STRING, STRING>) "
        "USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(
        f"INSERT INTO {ref} VALUES (1, 'a', array('x'), map('k', 'v')), (2, 'b', NULL, NULL), "
        "(3, 'c', array('y', 'z'), map('k', 'w'))"
    )
    spark.sql(f"DELETE FROM {ref} WHERE id = 2")
    spark.sql(f"ALTER TABLE {ref} RENAME COLUMN name TO title")
    said = spark_says(spark, loc)
    assert {"columnMapping", "deletionVectors"} <= set(said.features)
    assert said.schema[2:] == [("tags", "array<string>"), ("attrs", "map<string,string>")]
    assert_same(lake.LakeTable(loc), said, marker=None)

    rows = spark.read.format("delta").load(loc).collect()
    expected = sorted(
        (r["id"], r["title"], r["tags"], sorted((r["attrs"] or {}).items())) for r in rows
    )
    got = lake.read(loc).to_pylist()
    assert sorted((r["id"], r["title"], r["tags"], sorted(r["attrs"] or [])) for r in got) == (
        expected
    )
    assert [r["title"] for r in lake.read(loc, ["title"], [("id", ">=", 3)]).to_pylist()] == ["c"]


# --- the staging table ----------------------------------------------------------------------


def test_staging_table_schema_tallies_and_ddl_rows_are_what_spark_says(
    spark, warehouse: Path
) -> None:
    loc = state_location(str(warehouse), "events")
    said = spark_says(spark, loc)
    table = lake.LakeTable(loc)
    assert table.version() == said.version
    assert table.schema() == said.schema
    assert ("after", "map<string,string>") in said.schema
    assert ("pk_names", "array<string>") in said.schema
    p = table.protocol()
    assert (p.min_reader_version, p.min_writer_version) == (said.min_reader, said.min_writer)
    assert p.table_features() == said.features and p.properties == said.properties
    assert "delta.dataSkippingStatsColumns" in p.properties
    tallies = table.newest_user_metadata(from_user_metadata)
    assert tallies is not None
    assert tallies == latest_user_metadata(spark, loc, from_user_metadata)
    assert tallies["src"].to_dict() == from_user_metadata(said.user_metadata[0])["src"].to_dict()

    cols = ["source", "topic", "partition", "offset", "db", "tbl", "commit_ts", "ddl_sql"]
    events = spark.read.format("delta").load(loc)

    def spark_rows(condition: str) -> list[tuple]:
        return sorted(tuple(r) for r in events.where(condition).select(*cols).collect())

    def lake_rows(where) -> list[tuple]:
        return sorted(tuple(r[c] for c in cols) for r in table.read(cols, where).to_pylist())

    ddl = lake_rows([("kind", "=", "ddl")])
    assert len(ddl) == 3
    assert ddl == spark_rows("kind = 'ddl'")
    window = [("kind", "=", "ddl"), ("source", "=", "src"), ("commit_ts", "<=", 20)]
    assert lake_rows(window) == spark_rows("kind = 'ddl' AND source = 'src' AND commit_ts <= 20")
    assert len(lake_rows(window)) == 2
    assert lake_rows([("kind", "in", ["bad", "watermark"]), ("partition", "!=", 0)]) == (
        spark_rows("kind IN ('bad', 'watermark') AND `partition` <> 0")
    )
    assert lake_rows([("tbl", "=", "it's")]) == []

    full = table.read(where=[("kind", "=", "row")]).to_pylist()
    by_offset = {(r["partition"], r["offset"]): r for r in full}
    first = by_offset[(0, 0)]
    assert dict(first["after"]) == {"id": "1", "v": "a"}
    assert first["pk_names"] == ["id"]
    bad = table.read(["raw_value"], [("kind", "=", "bad")]).to_pylist()
    assert bad == [{"raw_value": b"\x00\xff"}]


def test_unknown_columns_and_missing_tables_are_user_errors(tmp_path, warehouse: Path) -> None:
    loc = state_location(str(warehouse), "events")
    with pytest.raises(UserError, match="no column 'nope'"):
        lake.read(loc, ["nope"])
    missing = str(tmp_path / "nothing")
    assert not lake.exists(missing)
    (tmp_path / "plain").mkdir()
    assert not lake.exists(str(tmp_path / "plain"))
    with pytest.raises(UserError) as e:
        lake.version(missing)
    assert missing in str(e.value) and "hint:" in str(e.value)


# --- tables delta-rs will not load -------------------------------------------------------------


def add_future_feature(table_dir: Path) -> int:
    """Commit, as a newer Delta writer would, a protocol with a feature no reader here knows
    (and no userMetadata). Returns the new version."""
    log = table_dir / "_delta_log"
    version = max(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit()) + 1
    old = LakeTableLog(table_dir).protocol()
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": sorted([*old.reader_features, FUTURE_FEATURE]),
        "writerFeatures": sorted([*old.writer_features, FUTURE_FEATURE]),
    }
    info = {"timestamp": 1, "operation": "SET TBLPROPERTIES", "operationParameters": {}}
    lines = [json.dumps({"commitInfo": info}), json.dumps({"protocol": protocol})]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    return version


def LakeTableLog(table_dir: Path) -> lake.DeltaLog:  # noqa: N802 (reads like a constructor)
    return lake.DeltaLog(str(table_dir)).load()


def test_a_table_with_a_feature_newer_than_delta_rs_answers_from_its_log(
    spark, warehouse: Path, tmp_path
) -> None:
    said = spark_says(spark, location(warehouse, "orders"))
    copy = tmp_path / "orders"
    shutil.copytree(location(warehouse, "orders"), copy)
    version = add_future_feature(copy)
    with pytest.raises(Exception, match=FUTURE_FEATURE):
        DeltaTable(str(copy))  # what makes this the fallback's case

    table = lake.LakeTable(str(copy))
    assert table.exists()
    assert table.version() == version == said.version + 1
    assert table.schema() == said.schema
    assert table.newest_user_metadata(Marker.from_user_metadata) == MARKER
    p = table.protocol()
    assert p.table_features() == tuple(sorted([*said.features, FUTURE_FEATURE]))
    assert p.properties == said.properties
    assert FUTURE_FEATURE in p.reader_features
    with pytest.raises(UserError, match=FUTURE_FEATURE):
        table.read(["id"])


def test_a_target_whose_folder_name_is_percent_encoded_answers_from_its_log(
    spark, warehouse: Path, tmp_path
) -> None:
    # Earlier versions wrote a space as %20 (`legacy_path_segment`); delta-rs decodes such a
    # local path once too often and cannot load the table (its listing works, its file reads
    # do not). Such targets stay where they are (`locations.find_target`).
    loc = f"{tmp_path / 'wh'}/tables/{legacy_path_segment('odd name')}"
    assert loc.endswith("/tables/odd%20name")
    shutil.copytree(location(warehouse, "orders"), loc)
    with pytest.raises(Exception, match="not found"):
        DeltaTable(loc)
    said = spark_says(spark, loc)
    assert said == spark_says(spark, location(warehouse, "orders"))
    assert lake.exists(loc)
    assert_same(lake.LakeTable(loc), said, marker=MARKER)


def test_delta_log_reads_every_kind_of_checkpoint_as_delta_rs_does(
    spark, warehouse: Path, tmp_path
) -> None:
    said = spark_says(spark, location(warehouse, "orders"))

    def checkpointed(name: str, properties: str, part_size: str | None = None) -> lake.DeltaLog:
        """A copy of the target whose next commit (no userMetadata) writes a checkpoint."""
        loc = str(tmp_path / name)
        shutil.copytree(location(warehouse, "orders"), loc)
        sql = (
            f"ALTER TABLE {table_ref(loc)} SET TBLPROPERTIES "
            f"({properties}'delta.checkpointInterval' = '1')"
        )
        if part_size is None:
            spark.sql(sql)
        else:
            with session_conf(spark, "spark.databricks.delta.checkpoint.partSize", part_size):
                spark.sql(sql)
        log = lake.DeltaLog(loc).load()
        assert log.checkpoint is not None and log.checkpoint[0] == said.version + 1
        assert_same(lake.LakeTable(loc), spark_says(spark, loc), marker=MARKER)
        rs = lake.LakeTable(loc)
        assert log.version() == rs.version()
        assert log.protocol() == rs.protocol()
        assert json.loads(log.schema_json()) == json.loads(rs._snapshot().schema_json())
        assert [i.get("userMetadata") for i in log.commit_infos()][:5] == [
            i.get("userMetadata") for i in rs._snapshot().commit_infos()
        ][:5]
        # The commit files up to the checkpoint removed (as log cleanup does): protocol and
        # schema now come from the checkpoint alone.
        for f in (Path(loc) / "_delta_log").glob("*.json"):
            if re.fullmatch(r"\d{20}\.json", f.name) and int(f.name[:20]) <= log.checkpoint[0]:
                f.unlink()
        cleaned = lake.DeltaLog(loc).load()
        assert cleaned.version() == log.version()
        assert cleaned.protocol() == log.protocol()
        assert json.loads(cleaned.schema_json()) == json.loads(log.schema_json())
        return log

    classic = checkpointed("classic", "")
    assert classic.checkpoint[1][0].endswith(".checkpoint.parquet")
    multi = checkpointed("multi", "", part_size="2")
    assert len(multi.checkpoint[1]) > 1
    v2 = checkpointed("v2", "'delta.checkpointPolicy' = 'v2', ")
    assert "v2Checkpoint" in v2.protocol().reader_features


# --- an S3-compatible server ----------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server in its own process on 127.0.0.1 (delta-rs holds the GIL in some
    calls, so a server thread in this process could not answer them)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("moto server exited") from None
                time.sleep(0.1)
        else:
            raise RuntimeError("moto server did not start")
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}


def upload(endpoint: str, local: Path, prefix: str) -> None:
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_ENV["AWS_REGION"],
    )
    if BUCKET not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        s3.create_bucket(Bucket=BUCKET)
    for f in sorted(local.rglob("*")):
        if f.is_file():
            s3.upload_file(str(f), BUCKET, f"{prefix}/{f.relative_to(local).as_posix()}")


def test_tables_on_an_s3_server_answer_as_they_do_locally(
    spark, warehouse: Path, s3_endpoint: str, monkeypatch, tmp_path
) -> None:
    upload(s3_endpoint, warehouse, "wh")
    copy = tmp_path / "future"
    shutil.copytree(location(warehouse, "orders"), copy)
    add_future_feature(copy)
    upload(s3_endpoint, copy, "wh/tables/future")
    for k, v in {**S3_ENV, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(k, v)

    remote = f"s3a://{BUCKET}/wh"
    orders = lake.LakeTable(target_location(remote, "orders"))
    assert orders.uri.startswith("s3://")
    assert orders.exists()
    assert_same(orders, spark_says(spark, location(warehouse, "orders")), marker=MARKER)

    local_events = lake.LakeTable(state_location(str(warehouse), "events"))
    events = lake.LakeTable(state_location(remote, "events"))
    assert events.version() == local_events.version()
    assert events.schema() == local_events.schema()
    ddl = [("kind", "=", "ddl")]
    assert sorted(map(str, events.read(where=ddl).to_pylist())) == sorted(
        map(str, local_events.read(where=ddl).to_pylist())
    )

    future = lake.LakeTable(f"s3://{BUCKET}/wh/tables/future")
    assert future.newest_user_metadata(Marker.from_user_metadata) == MARKER
    assert FUTURE_FEATURE in future.protocol().reader_features
    assert future._log is not None  # answered from the log, over S3

    assert not lake.exists(f"s3a://{BUCKET}/wh/tables/nothing")
    with pytest.raises(UserError) as e:
        lake.version(f"s3a://{BUCKET}/wh/tables/nothing")
    assert "s3a://" in str(e.value) and "hint:" in str(e.value)
    with pytest.raises(UserError) as e:
        lake.version("s3a://no-such-bucket/t")
    assert "s3a://no-such-bucket/t" in str(e.value) and "AWS_ENDPOINT_URL" in str(e.value)


def test_values_read_back_typed(spark, tmp_path) -> None:
    loc = str(tmp_path / "typed")
    ref = table_ref(loc)
    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, amount DECIMAL(10,2), dt TIMESTAMP_NTZ, ts TIMESTAMP) "
        "USING delta TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')"
    )
    spark.sql(
        f"INSERT INTO {ref} VALUES (1, 12.34, TIMESTAMP_NTZ'2024-05-06 07:08:09', "
        "TIMESTAMP'2024-05-06 07:08:09')"
    )
    (row,) = lake.read(loc).to_pylist()
    assert row["amount"] == Decimal("12.34")
    assert row["dt"].isoformat() == "2024-05-06T07:08:09"
    assert row["ts"].isoformat() == "2024-05-06T07:08:09+00:00"
