"""Small warehouse files on the local S3 server (ticdc_sync/store.py), and the staging tallies
cache that `plan` reads through it: on another machine, `plan` must see the tallies a run
saved in an `s3a://` warehouse, not only what the newest staging commit carries. No JVM.
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from tests.s3.helpers import STORAGE_ENV
from ticdc_sync import store, warehouse
from ticdc_sync.lake import LakeTable, storage_options, table_uri
from ticdc_sync.locations import state_location
from ticdc_sync.staged import SourceTally, to_user_metadata

pytestmark = pytest.mark.s3


@pytest.fixture
def server_env(s3_server, monkeypatch):
    for k in STORAGE_ENV:
        monkeypatch.delenv(k, raising=False)
    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)


def _tally(offset: int, watermark: int) -> dict[str, SourceTally]:
    return {
        "src": SourceTally.from_dict({"partitions": [["t", 0, offset, watermark, None, None, 0]]})
    }


def _stage(location: str, carried: dict[str, SourceTally]) -> None:
    """A staging commit (delta-rs stands in for Spark) carrying `carried` as its tallies."""
    uri = table_uri(location)
    write_deltalake(
        uri,
        pa.table({"x": [1]}),
        mode="append",
        storage_options=storage_options(uri),
        commit_properties=CommitProperties(
            custom_metadata={"userMetadata": to_user_metadata(carried)}
        ),
    )


def test_read_bytes_and_commit_key(server_env, s3_server, bucket):
    loc = f"s3a://{bucket}/files/_ticdc_sync/x.json"
    assert store.read_bytes(loc) is None
    s3_server.put_object(bucket, "files/_ticdc_sync/x.json", b'{"a": 1}')
    assert store.read_bytes(loc) == b'{"a": 1}'
    table = f"s3a://{bucket}/files/t"
    _stage(table, {})
    log = s3_server.get_object(bucket, "files/t/_delta_log/00000000000000000000.json")
    assert store.commit_key(table, 0) == (0, hashlib.sha256(log).hexdigest())
    assert store.commit_key(table, 1) is None


def test_plan_reads_the_tallies_a_run_saved_in_an_s3_warehouse(server_env, s3_server, bucket):
    wh = f"s3a://{bucket}/tallies"
    events = state_location(wh, "events")
    before, complete = _tally(4, 100), _tally(9, 200)
    _stage(events, before)
    # Without the cache: what the newest commit carries, which lacks its own batch.
    assert warehouse._saved_tallies(wh, LakeTable(events)) == (before, False)
    version, sha = store.commit_key(events, 0)
    body = {"version": version, "sha256": sha, "tallies": to_user_metadata(complete)}
    s3_server.put_object(
        bucket, "tallies/_ticdc_sync/events_tallies.json", json.dumps(body).encode()
    )
    assert warehouse._saved_tallies(wh, LakeTable(events)) == (complete, True)
    # A later staging commit makes the cache stale: it is ignored.
    _stage(events, complete)
    assert warehouse._saved_tallies(wh, LakeTable(events)) == (complete, False)
