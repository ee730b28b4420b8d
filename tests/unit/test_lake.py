"""`ticdc_sync.core.lake` without a JVM: it imports no pyspark, maps locations and environment to
what delta-rs opens, spells types as Spark does, and reads tables delta-rs wrote."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from ticdc_sync.core import lake
from ticdc_sync.core.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def test_importing_lake_imports_no_pyspark() -> None:
    code = textwrap.dedent(
        """
        import sys
        import ticdc_sync.core.lake
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "delta", "py4j"))
        assert not loaded, loaded
        print("PURE-OK")
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "PURE-OK" in res.stdout


@pytest.mark.parametrize(
    ("location", "uri"),
    [
        ("s3a://bucket/wh/tables/t", "s3://bucket/wh/tables/t"),
        ("s3://bucket/wh", "s3://bucket/wh"),
        ("file:/tmp/wh/t", "/tmp/wh/t"),
        ("file:///tmp/wh/t", "/tmp/wh/t"),
        ("file://localhost/tmp/wh/t", "/tmp/wh/t"),
        ("/tmp/wh/odd%20name", "/tmp/wh/odd%20name"),
        ("gs://bucket/wh", "gs://bucket/wh"),
    ],
)
def test_table_uri(location: str, uri: str) -> None:
    assert lake.table_uri(location) == uri


def test_a_relative_path_is_made_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert lake.table_uri("wh/t") == str(tmp_path / "wh" / "t")


def test_storage_options_come_from_the_environment() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "HOME": "/root",
    }
    assert lake.storage_options("s3://b/t", env) == {
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true",
    }
    https = lake.storage_options("s3://b/t", {"AWS_ENDPOINT_URL": "https://s3.example"})
    assert "AWS_ALLOW_HTTP" not in https
    assert lake.storage_options("s3://b/t", {"AWS_REGION": "r", "AWS_DEFAULT_REGION": "x"}) == {
        "AWS_REGION": "r"
    }
    assert lake.storage_options("/tmp/t", env) == {}
    assert lake.LakeTable("s3a://b/t", env).options["AWS_REGION"] == "eu-west-1"


def test_spark_type_spellings() -> None:
    assert lake.spark_type("long") == "bigint"
    assert lake.spark_type("integer") == "int"
    assert lake.spark_type("short") == "smallint"
    assert lake.spark_type("byte") == "tinyint"
    assert lake.spark_type("decimal(10,2)") == "decimal(10,2)"
    assert lake.spark_type("timestamp_ntz") == "timestamp_ntz"
    nested = {
        "type": "struct",
        "fields": [
            {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": "long"}},
            {"name": "a", "type": {"type": "array", "elementType": "integer"}},
        ],
    }
    assert lake.spark_type(nested) == "struct<m:map<string,bigint>,a:array<int>>"


@pytest.mark.parametrize(
    ("reader", "writer", "explicit", "features"),
    [
        (1, 2, (), ("appendOnly", "invariants")),
        (1, 4, (), ("appendOnly", "changeDataFeed", "checkConstraints", "generatedColumns", "invariants")),
        (2, 5, (), ("appendOnly", "changeDataFeed", "checkConstraints", "columnMapping", "generatedColumns", "invariants")),
        (1, 7, ("appendOnly", "allowColumnDefaults"), ("allowColumnDefaults", "appendOnly")),
    ],
)  # fmt: skip
def test_table_features_as_spark_lists_them(reader, writer, explicit, features) -> None:
    p = lake.Protocol(reader, writer, (), explicit)
    assert p.table_features() == features


def test_filter_sql_quotes_names_and_values() -> None:
    assert lake._condition("kind", "=", "it's") == "\"kind\" = 'it''s'"
    assert lake._condition('a"b', "<=", 5) == '"a""b" <= 5'
    assert lake._condition("k", "in", ["x", "y"]) == "\"k\" IN ('x', 'y')"
    assert lake._condition("f", "!=", True) == '"f" != TRUE'
    with pytest.raises(ValueError):
        lake._condition("k", "like", "x")


def test_reads_and_metadata_of_a_table_delta_rs_wrote(tmp_path: Path) -> None:
    loc = str(tmp_path / "state")
    first = pa.table(
        {
            "kind": ["ddl", "row", "ddl"],
            "commit_ts": pa.array([10, 11, 30], pa.int64()),
            "tags": [["a"], None, ["b", "c"]],
        }
    )
    write_deltalake(loc, first, commit_properties=CommitProperties(custom_metadata={"userMetadata": "m1"}))  # fmt: skip
    write_deltalake(loc, first.slice(0, 1), mode="append")
    table = lake.LakeTable(loc)
    assert table.exists()
    assert table.version() == 1
    assert table.schema() == [
        ("kind", "string"),
        ("commit_ts", "bigint"),
        ("tags", "array<string>"),
    ]
    assert table.newest_user_metadata(lambda t: t) == "m1"
    assert table.newest_user_metadata(lambda t: None) is None
    rows = table.read(["commit_ts", "tags"], [("kind", "=", "ddl"), ("commit_ts", ">", 10)])
    assert rows.schema.field("tags").type == pa.list_(pa.field("element", pa.string()))
    assert rows.to_pylist() == [{"commit_ts": 30, "tags": ["b", "c"]}]
    assert sorted(table.read(["commit_ts"], [("kind", "=", "ddl")]).column(0).to_pylist()) == [
        10,
        10,
        30,
    ]


def test_an_ordered_read_returns_the_first_rows_only(tmp_path: Path) -> None:
    loc = str(tmp_path / "state")
    rows = pa.table(
        {
            "kind": ["row", "row", "ddl", "row", "row"],
            "commit_ts": pa.array([20, 10, 5, 10, None], pa.int64()),
            "offset": pa.array([1, 7, 0, 3, 9], pa.int64()),
        }
    )
    write_deltalake(loc, rows.slice(0, 3))
    write_deltalake(loc, rows.slice(3), mode="append")
    table = lake.LakeTable(loc)
    first = table.read(["commit_ts", "offset"], [("kind", "=", "row")], order_by=["commit_ts", "offset"], limit=2)  # fmt: skip
    assert first.to_pylist() == [{"commit_ts": 10, "offset": 3}, {"commit_ts": 10, "offset": 7}]
    # NULLs sort last; without a limit every matching row comes back in that order.
    ordered = table.read(["offset"], [("kind", "=", "row")], order_by=["commit_ts", "offset"])
    assert ordered.column(0).to_pylist() == [3, 7, 1, 9]
    with pytest.raises(UserError):
        table.read(["offset"], order_by=["nope"])


def test_a_missing_table_is_a_user_error_naming_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing")
    assert not lake.exists(missing)
    for call in (lake.version, lake.schema, lake.protocol):
        with pytest.raises(UserError) as e:
            call(missing)
        assert missing in str(e.value) and "hint:" in str(e.value)


def test_data_bytes_is_the_sum_of_the_live_files_both_ways(tmp_path) -> None:
    # What `table_features.rebuild_below` compares: the live add actions' sizes, from
    # delta-rs and from the log itself (a checkpoint, then adds and removes after it).
    loc = str(tmp_path / "t")
    write_deltalake(loc, pa.table({"a": list(range(100))}))
    write_deltalake(loc, pa.table({"a": [1, 2]}), mode="append")
    DeltaTable(loc).create_checkpoint()
    write_deltalake(loc, pa.table({"a": [3]}), mode="append")
    write_deltalake(loc, pa.table({"a": list(range(50))}), mode="overwrite")
    write_deltalake(loc, pa.table({"a": [4, 5]}), mode="append")
    live = sum(
        (tmp_path / "t" / u.rsplit("/", 1)[-1]).stat().st_size for u in DeltaTable(loc).file_uris()
    )
    assert lake.LakeTable(loc).data_bytes() == live > 0
    assert lake.DeltaLog(lake.table_uri(loc)).load().data_bytes() == live
