"""Delta tables in an `s3a://` warehouse on a real S3-compatible server, through the session
ticdc-sync builds: a target is created, inserted into and merged with the statements a run
issues, lands in the bucket, and delta-rs reads the same table.

The Spark work runs in child processes (tests/s3/helpers.py says why); the module's one
writer process also probes what S3A's file creation guarantees on this server.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tests.s3.helpers import job_env, run_job
from tests.s3.spark_job import LEFTOVER, TARGET
from ticdc_sync.core.lake import storage_options, table_uri
from ticdc_sync.core.sqlgen import COMMIT_TS
from ticdc_sync.warehouse.locations import target_location

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def warehouse(bucket) -> str:
    return f"s3a://{bucket}/wh"


@pytest.fixture(scope="module")
def written(s3_server, bucket, warehouse) -> dict:
    # What a create killed before its first commit leaves on an object store: the folder
    # markers of the log that Delta made before writing the commit.
    for marker in ("_delta_log/", "_delta_log/_commits/"):
        s3_server.put_object(bucket, f"wh/tables/{LEFTOVER}/{marker}", b"")
    return run_job(job_env(s3_server), "write,probe,leftover", warehouse)


def test_a_target_is_created_inserted_into_and_merged(written):
    state = written["write"]
    # 2 updated, 3 deleted, 4 inserted; 1 kept: its update is older than the row.
    assert state["rows"] == [[1, "a", 10], [2, "B", 20], [4, "d", 20]]
    assert state["operations"] == [[0, "CREATE TABLE"], [1, "WRITE"], [2, "MERGE"]]


def test_a_create_killed_before_its_first_commit_is_made_again(written):
    # CREATE TABLE IF NOT EXISTS takes a log folder without a commit for a table and does
    # nothing; the run removes such a folder first, as it does on a local disk.
    assert written["leftover"] == {"is_delta": True, "operations": [[0, "CREATE TABLE"]]}


def test_the_table_lives_in_the_bucket(written, s3_server, bucket):
    prefix = f"wh/tables/{TARGET}/"
    keys = s3_server.list_keys(bucket, prefix)
    in_log = [k.removeprefix(prefix + "_delta_log/") for k in keys if "/_delta_log/" in k]
    log = sorted(n for n in in_log if "/" not in n and n.endswith(".json"))
    assert log == [f"{v:020d}.json" for v in range(3)]
    assert any(k.endswith(".parquet") for k in keys)


def test_a_reader_other_than_spark_reads_the_same_table(written, s3_server, warehouse):
    """delta-rs in this process, as `plan`, polars or DuckDB open a target: the commits of
    the writer's process, read from the bucket alone. (The S3 example's check job reads its
    targets in another Spark process.)"""
    uri = table_uri(target_location(warehouse, TARGET))
    table = DeltaTable(uri, storage_options=storage_options(uri, s3_server.env()))
    rows = table.to_pyarrow_table(columns=["id", "name", COMMIT_TS]).to_pylist()
    state = {
        "rows": sorted([r["id"], r["name"], r[COMMIT_TS]] for r in rows),
        "operations": sorted([h["version"], h["operation"]] for h in table.history()),
    }
    assert state == written["write"]


def test_s3a_create_without_overwrite_is_not_atomic_but_a_conditional_create_is(written):
    """What Delta's default S3 LogStore relies on, and what would make it safe.

    Delta writes commit N with `create(path, overwrite=false)`; S3A checks that the file
    is absent when the stream opens and uploads on close, so of two writers that both
    passed the check the second silently replaces the first: a lost commit, were the two
    in different processes. S3A's conditional create sends `If-None-Match: *`, and the
    server refuses the second upload with 412, keeping the first.
    """
    probe = written["probe"]
    assert probe["plain"] == "succeeded"
    assert probe["plain_content"] == ["second"]
    assert probe["conditional"] == "refused: 412"
    assert probe["conditional_content"] == ["first"]
