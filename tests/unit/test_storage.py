"""An S3 warehouse's Spark settings come from the environment (ticdc_sync/spark/runtime/storage.py):
the S3A connector of Spark's own Hadoop, endpoint, region, http, addressing, credentials.
No JVM: these check the settings; tests/s3 checks that a session built with them works."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Output
from ticdc_sync.spark.runtime import storage
from ticdc_sync.spark.runtime.session import jar_conf, with_profile_conf

H = "spark.hadoop.fs.s3a."
LOCAL = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_ACCESS_KEY_ID": "AKIDLOCAL",
    "AWS_SECRET_ACCESS_KEY": "local-secret-value",
    "AWS_ALLOW_HTTP": "true",
}


def test_the_s3a_connector_matches_the_hadoop_that_pyspark_ships():
    spec = importlib.util.find_spec("pyspark")
    assert spec and spec.origin
    jars = Path(spec.origin).parent / "jars"
    shipped = sorted(p.name for p in jars.glob("hadoop-client-api-*.jar"))
    assert shipped == [f"hadoop-client-api-{storage.SPARK_HADOOP_VERSION}.jar"]
    assert storage.HADOOP_AWS_PACKAGE.endswith(":" + storage.SPARK_HADOOP_VERSION)


@pytest.mark.parametrize(
    "location, scheme",
    [
        ("s3a://lake/wh", "s3a"),
        ("S3://lake/wh", "s3"),
        ("warehouse", None),
        ("/abs/warehouse", None),
        ("file:/tmp/wh", None),
        ("abfss://c@a.dfs.core.windows.net/wh", None),
        ("s3n://lake/wh", None),
    ],
)
def test_which_warehouses_are_on_s3(location, scheme):
    assert storage.s3_scheme(location) == scheme


def test_a_local_warehouse_needs_nothing_whatever_the_environment():
    out = Output("dev", warehouse="warehouse")
    assert storage.packages(out) == []
    assert storage.spark_conf(out, {"AWS_ENDPOINT_URL": "http://x", "AWS_ACCESS_KEY_ID": "k"}) == {}


def test_a_local_s3_compatible_server():
    conf = storage.s3a_conf("s3a://lake/wh", LOCAL)
    assert conf == {
        H + "endpoint": "http://127.0.0.1:9000",
        H + "connection.ssl.enabled": "false",
        H + "path.style.access": "true",
        H + "endpoint.region": "us-east-1",
        H + "aws.credentials.provider": storage.ENV_CREDENTIALS_CHAIN,
    }


def test_secrets_stay_out_of_the_spark_conf():
    conf = storage.s3a_conf("s3a://lake/wh", {**LOCAL, "AWS_SESSION_TOKEN": "tok-value"})
    text = repr(conf)
    assert "local-secret-value" not in text
    assert "AKIDLOCAL" not in text
    assert "tok-value" not in text


def test_plain_http_needs_to_be_allowed():
    env = {k: v for k, v in LOCAL.items() if k != "AWS_ALLOW_HTTP"}
    with pytest.raises(UserError, match="AWS_ALLOW_HTTP=true"):
        storage.s3a_conf("s3a://lake/wh", env)
    with pytest.raises(UserError, match="AWS_ALLOW_HTTP"):
        storage.s3a_conf("s3a://lake/wh", {**env, "AWS_ALLOW_HTTP": "false"})


def test_an_endpoint_that_is_not_a_url_is_refused():
    with pytest.raises(UserError, match="not an http"):
        storage.s3a_conf("s3a://lake/wh", {**LOCAL, "AWS_ENDPOINT_URL": "127.0.0.1:9000"})


def test_the_s3_specific_endpoint_wins_and_https_keeps_tls():
    env = {**LOCAL, "AWS_ENDPOINT_URL_S3": "https://objects.example:8443", "AWS_REGION": "eu-1"}
    conf = storage.s3a_conf("s3a://lake/wh", env)
    assert conf[H + "endpoint"] == "https://objects.example:8443"
    assert conf[H + "connection.ssl.enabled"] == "true"
    assert conf[H + "endpoint.region"] == "eu-1"


def test_virtual_hosted_addressing_on_request():
    conf = storage.s3a_conf("s3a://lake/wh", {**LOCAL, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"})
    assert conf[H + "path.style.access"] == "false"


def test_aws_itself_gets_only_the_region_and_the_credentials():
    env = {
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    assert storage.s3a_conf("s3a://lake/wh", env) == {
        H + "endpoint.region": "eu-west-1",
        H + "aws.credentials.provider": storage.ENV_CREDENTIALS_CHAIN,
    }


def test_without_keys_hadoops_default_chain_is_left_alone():
    """Instance roles in production: no provider is forced."""
    assert storage.s3a_conf("s3a://lake/wh", {"AWS_REGION": "eu-west-1"}) == {
        H + "endpoint.region": "eu-west-1"
    }


@pytest.mark.parametrize("present", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
def test_half_of_the_credentials_is_an_error_naming_the_other_half(present):
    other = ({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} - {present}).pop()
    with pytest.raises(UserError, match=other):
        storage.s3a_conf("s3a://lake/wh", {present: "x"})


def test_s3_scheme_is_served_by_s3a():
    conf = storage.s3a_conf("s3://lake/wh", {})
    assert conf["spark.hadoop.fs.s3.impl"] == storage.S3A_FS
    assert conf["spark.hadoop.fs.AbstractFileSystem.s3.impl"] == "org.apache.hadoop.fs.s3a.S3A"


def test_describe_says_where_and_how_without_secrets():
    line = storage.describe("s3a://lake/wh", LOCAL)
    assert line == (
        "s3a://lake/wh via http://127.0.0.1:9000 (us-east-1, path-style; keys from the environment)"
    )
    assert storage.describe("warehouse", LOCAL) is None


def test_an_s3_warehouse_adds_the_connector_to_the_resolved_packages(monkeypatch):
    monkeypatch.delenv("TICDC_SYNC_JARS_DIR", raising=False)
    s3 = jar_conf(Output("dev", warehouse="s3a://lake/wh"), kafka=False)
    local = jar_conf(Output("dev", warehouse="warehouse"), kafka=False)
    assert s3["spark.jars.packages"].split(",")[1:] == [storage.HADOOP_AWS_PACKAGE]
    assert storage.HADOOP_AWS_PACKAGE not in local["spark.jars.packages"]


def test_a_jar_folder_without_the_connector_is_refused_for_an_s3_warehouse(monkeypatch, tmp_path):
    (tmp_path / "io.delta_delta-spark_4.2_2.13-4.4.0.jar").write_bytes(b"")
    monkeypatch.setenv("TICDC_SYNC_JARS_DIR", str(tmp_path))
    s3 = Output("dev", warehouse="s3a://lake/wh")
    assert jar_conf(Output("dev"), kafka=False)["spark.jars"]  # a local warehouse is fine
    with pytest.raises(UserError, match=r"hadoop-aws-3\.5\.0\.jar.*--fetch .* --s3"):
        jar_conf(s3, kafka=False)
    (tmp_path / "org.apache.hadoop_hadoop-aws-3.5.0.jar").write_bytes(b"")
    with pytest.raises(UserError, match="bundle"):
        jar_conf(s3, kafka=False)
    (tmp_path / "software.amazon.awssdk_bundle-2.35.4.jar").write_bytes(b"")
    assert len(jar_conf(s3, kafka=False)["spark.jars"].split(",")) == 3


def test_an_endpoint_without_keys_is_an_error_unless_the_profile_names_a_provider():
    env = {"AWS_ENDPOINT_URL": "https://objects.example"}
    with pytest.raises(UserError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        storage.spark_conf(Output("dev", warehouse="s3a://lake/wh"), env)
    provider = {H + "aws.credentials.provider": "my.Provider"}
    own = Output("dev", warehouse="s3a://lake/wh", spark_conf=provider)
    assert storage.spark_conf(own, env)[H + "endpoint"] == "https://objects.example"


def test_a_profile_adds_a_storage_connector_to_the_jars_instead_of_replacing_them(monkeypatch):
    """ADLS and GCS connectors come from the profile's spark.conf; Delta must stay."""
    monkeypatch.delenv("TICDC_SYNC_JARS_DIR", raising=False)
    ours = jar_conf(Output("dev"), kafka=False)
    azure = "org.apache.hadoop:hadoop-azure:3.5.0"
    conf = with_profile_conf(
        ours, {"spark.jars.packages": f" {azure} ", "spark.jars": "/opt/gcs.jar", "x.y": "1"}
    )
    assert conf["spark.jars.packages"] == ours["spark.jars.packages"] + "," + azure
    assert conf["spark.jars"] == "/opt/gcs.jar"  # none of ours to keep without Kafka
    assert conf["x.y"] == "1"
    again = with_profile_conf(conf, {"spark.jars.packages": azure})
    assert again["spark.jars.packages"] == conf["spark.jars.packages"]
