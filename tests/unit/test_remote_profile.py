"""A profile naming a Spark Connect server (`spark.remote`, `SPARK_REMOTE`): what `validate`
accepts and says, and the pure parts of the client (the Kafka options the Python client
gets, the session ids a run derives from its lease)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from ticdc_sync.commands import cli
from ticdc_sync.core.errors import ProjectError
from ticdc_sync.project import load_project
from ticdc_sync.spark.runtime import remote
from ticdc_sync.spark.transports.kafka_client import client_config

EXAMPLE = Path(__file__).resolve().parents[2] / "projects_example" / "shop"


def _example(tmp_path: Path, spark: dict) -> Path:
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    data = yaml.safe_load((root / "profiles.yml").read_text())
    data["shop"]["outputs"]["dev"]["spark"] = spark
    (root / "profiles.yml").write_text(yaml.safe_dump(data))
    return root


def test_remote_profile_validates_and_says_what_the_server_needs(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    root = _example(tmp_path, {"remote": "sc://spark.example:15002"})
    assert load_project(root).output.spark_remote == "sc://spark.example:15002"
    assert cli.main(["validate", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "a Spark Connect client of sc://spark.example:15002" in out
    assert "Spark 4.2 with Delta Lake 4.4 (io.delta:delta-spark_4.2_2.13:4.4.0" in out
    assert cli.main(["plan", "--project", str(root)]) == 0
    assert "spark remote: sc://spark.example:15002  (Spark Connect:" in capsys.readouterr().out


def test_spark_remote_env_is_the_server_of_a_profile_without_one(tmp_path, monkeypatch):
    root = _example(tmp_path, {"master": "local[2]"})
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert load_project(root).output.spark_remote is None
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert load_project(root).output.spark_remote == "sc://127.0.0.1:15002"


@pytest.mark.parametrize(
    ("spark", "says"),
    [
        ({"remote": "http://spark:15002"}, "is not a Spark Connect address"),
        ({"remote": "sc://spark:15002", "master": "local[2]"}, "spark.master cannot be used"),
        ({"remote": "sc://spark:15002", "jars_dir": "jars"}, "spark.jars_dir cannot be used"),
    ],
)
def test_bad_remote_profiles_are_errors_naming_the_key(tmp_path, monkeypatch, spark, says):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    root = _example(tmp_path, spark)
    with pytest.raises(ProjectError) as e:
        load_project(root)
    assert says in str(e.value) and "profiles.yml" in str(e.value)


@pytest.mark.parametrize("env", [False, True])
def test_a_client_side_metastore_over_connect_is_an_error_saying_where_it_goes(
    tmp_path, monkeypatch, capsys, env
):
    """Over Spark Connect the session catalog is the server's: `catalog.metastore`, which
    only a local session can apply, is refused, also when $SPARK_REMOTE makes it remote."""
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    root = _example(tmp_path, {"master": "local[2]"} if env else {"remote": "sc://spark:15002"})
    data = yaml.safe_load((root / "profiles.yml").read_text())
    data["shop"]["outputs"]["dev"]["catalog"] = {"metastore": "thrift://hms:9083"}
    (root / "profiles.yml").write_text(yaml.safe_dump(data))
    if env:
        assert load_project(root).output.catalog.metastore == "thrift://hms:9083"
        monkeypatch.setenv("SPARK_REMOTE", "sc://spark:15002")
    with pytest.raises(ProjectError) as e:
        load_project(root)
    text = str(e.value)
    assert "catalog.metastore cannot be used with the Spark Connect server sc://spark:15002" in (
        text
    )
    assert "profiles.yml" in text and "spark.hadoop.hive.metastore.uris" in text
    # Without the metastore the catalog is the server's, named by `catalog.name`.
    data["shop"]["outputs"]["dev"]["catalog"] = {"name": "spark_catalog"}
    (root / "profiles.yml").write_text(yaml.safe_dump(data))
    assert load_project(root).output.catalog.name == "spark_catalog"
    capsys.readouterr()
    assert cli.main(["plan", "--project", str(root)]) == 0
    out = capsys.readouterr().out
    assert "  catalog: spark_catalog  (as the Spark Connect server is configured; " in out, out


def test_the_python_kafka_client_gets_the_java_options_it_understands():
    conf = client_config(
        {
            "bootstrap.servers": "b:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u1" password="p\\"w";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "default.api.timeout.ms": "60000",
            "isolation.level": "read_committed",
        }
    )
    assert conf == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u1",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/ca.pem",
    }


def test_a_runs_session_ids_follow_from_its_lease_token():
    base = remote.session_id("abc")
    assert uuid.UUID(base) and base == remote.session_id("abc") != remote.session_id("abd")
    assert remote.session_id("abc", 0) == remote.slot_id(base, 0) != remote.slot_id(base, 1)
    url = remote._with_session("sc://h:15002/;token=x;session_id=old", base)
    assert url == f"sc://h:15002/;token=x;session_id={base}"
    assert remote._with_session("sc://h:15002", base) == f"sc://h:15002/;session_id={base}"


def test_a_server_nobody_answers_at_is_an_error_at_once():
    import socket
    import time

    from ticdc_sync.core.errors import UserError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        remote.connect(f"sc://127.0.0.1:{port}", conf={}, kafka=False)
    assert time.monotonic() - t0 < 15
    assert f"cannot use the Spark Connect server sc://127.0.0.1:{port}" in str(e.value)
    assert "spark.remote or $SPARK_REMOTE" in str(e.value)
