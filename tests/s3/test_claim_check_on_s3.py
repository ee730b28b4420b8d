"""Claim-check storage on S3 (the local S3 server): TiCDC's claimed messages read back by
file name with the environment's credentials, without and with Spark.

Without Spark, `core.claim_store` reads a claimed file from `s3://` (and `s3a://`), tells a
missing file (a bad message) from a storage that refuses it (no bad message). With Spark,
a real `ticdc-sync run` (a process of its own, the server's endpoint and keys in its
environment only) reads an Open Protocol changefeed whose large events TiCDC wrote to
`s3://<bucket>/cf1/claims`: with a wrong secret key the run stops and stages nothing,
naming the record; with the right one the tables equal the truth, read back by delta-rs.
"""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest

from testkit.history import HistoryConfig, encode, generate
from testkit.large_message import LargeMessageConfig
from tests.s3.helpers import STORAGE_ENV, job_env
from tests.spark.engine_harness import make_project, start_cli, write_captures
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.core import claim_store
from ticdc_sync.warehouse.locations import target_location

pytestmark = pytest.mark.s3

TIMEOUT = 900


@pytest.fixture
def server_env(s3_server, monkeypatch):
    for k in STORAGE_ENV:
        monkeypatch.delenv(k, raising=False)
    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_a_claimed_file_is_read_from_s3_by_its_name(server_env, s3_server, bucket, scheme):
    s3_server.put_object(bucket, f"{scheme}-feed/claims/a.json", b'{"key":null,"value":"dg=="}')
    uri = f"{scheme}://{bucket}/{scheme}-feed/claims"
    store = claim_store.ClaimStore(uri, claim_store.options(uri))
    assert store.read("a.json") == b'{"key":null,"value":"dg=="}'
    with pytest.raises(FileNotFoundError, match="no such file"):
        store.read("b.json")
    wrong = claim_store.options(uri, {**s3_server.env(), "AWS_SECRET_ACCESS_KEY": "wrong"})
    with pytest.raises(claim_store.StorageError) as exc:
        claim_store.ClaimStore(uri, wrong).read("a.json")
    assert str(exc.value).startswith(f"{uri}/a.json: ")
    assert s3_server.secret_key not in str(exc.value)


def _run(root, env) -> tuple[int, str]:
    p = start_cli(["run", "--project", str(root)], env=env)
    try:
        out, _ = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise AssertionError(
            f"ticdc-sync did not finish within {TIMEOUT}s:\n{out[-3000:]}"
        ) from None
    return p.returncode, out


def _delta_rows(location: str) -> list[dict]:
    """A target's rows read by delta-rs, TIMESTAMP values as Spark gives them (naive UTC)."""
    from deltalake import DeltaTable

    rows = DeltaTable(location).to_pyarrow_table().to_pylist()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, dt.datetime) and v.tzinfo is not None:
                r[k] = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return rows


def test_a_claim_checked_changefeed_on_s3_lands_exactly(s3_server, bucket, tmp_path):
    uri = f"s3://{bucket}/cf1/claims"
    history = generate(HistoryConfig(seed=11, transactions=40, partitions=2, ddl_count=0))
    config = LargeMessageConfig(
        option="claim-check", compression="lz4", storage_uri=uri, max_message_bytes=700
    )
    enc = encode(history, "open-protocol", "cdc", large=config)
    assert len(enc.claims) >= 20
    for name, data in enc.claims.items():
        s3_server.put_object(bucket, f"cf1/claims/{name}", data)
    root = make_project(
        tmp_path / "p",
        protocol="open-protocol",
        topic="cdc",
        schema_sql="".join(schema_sql(s) for s in history.initial.values()),
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
        options=(
            "      large-message-handle-option: claim-check\n"
            f"      claim-check-storage-uri: {uri}\n"
            "      large-message-handle-compression: lz4\n"
        ),
    )
    write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in enc.records])

    code, out = _run(root, job_env(s3_server, AWS_SECRET_ACCESS_KEY="not-the-key"))
    assert code == 1, out[-3000:]
    assert "the claim-check storage cannot be read (" in out, out[-3000:]
    assert "nothing of this batch was staged: run again once the storage can be reached" in out
    assert "not-the-key" not in out and s3_server.secret_key not in out
    assert not (root / "warehouse" / "_ticdc_sync" / "quarantine").exists()

    code, out = _run(root, job_env(s3_server))
    assert code == 0, out[-3000:]
    assert s3_server.secret_key not in out
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = _delta_rows(target_location(str(root / "warehouse"), schema.table))
        assert_table_equals(rows, truth, schema, f"open-protocol {qualified}")
