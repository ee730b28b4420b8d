"""What a create over Spark Connect sees of a table's folder on an object store, through
delta-rs's store (`table_create`'s remote listing): a log file left without a commit is
removed; Delta's folder markers are not log files and cannot be removed from the client, so
the folder stays listed (and a create reports it); a commit makes a table."""

from __future__ import annotations

import pytest

from tests.s3.helpers import job_env
from ticdc_sync.spark.runtime import table_create

pytestmark = pytest.mark.s3


@pytest.fixture
def storage_env(s3_server, monkeypatch):
    for key, value in job_env(s3_server).items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)


def test_a_log_without_a_commit_is_cleared_but_its_markers_stay_listed(
    s3_server, bucket, storage_env
):
    for key in ("_delta_log/", "_delta_log/_commits/", "_delta_log/.00000000000000000000.json.tmp"):
        s3_server.put_object(bucket, f"wh/t/{key}", b"")
    location = f"s3a://{bucket}/wh/t"
    found = table_create._remote_listing(location)
    assert found == table_create.LogListing(
        committed=False, log_files=(".00000000000000000000.json.tmp",), entries=("_delta_log",)
    )
    table_create._clear_remote_log(location, found)
    assert s3_server.list_keys(bucket, "wh/t/") == ["wh/t/_delta_log/", "wh/t/_delta_log/_commits/"]
    assert table_create._remote_listing(location) == table_create.LogListing(
        committed=False, log_files=(), entries=("_delta_log",)
    )


def test_a_commit_makes_a_table(s3_server, bucket, storage_env):
    s3_server.put_object(bucket, "wh/u/_delta_log/00000000000000000000.json", b"{}")
    assert table_create._remote_listing(f"s3a://{bucket}/wh/u").committed
