"""The staging tallies `plan` reads from an `s3a://` warehouse on the local S3 server, as on
another machine: the newest staging commit's, which count its own batch. No JVM.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from tests.s3.helpers import STORAGE_ENV
from ticdc_sync.core.lake import LakeTable, storage_options, table_uri
from ticdc_sync.core.staged import SourceTally, to_user_metadata
from ticdc_sync.warehouse import read as warehouse
from ticdc_sync.warehouse.locations import state_location

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


def test_plan_reads_the_newest_staging_commit_s_tallies_in_an_s3_warehouse(
    server_env, s3_server, bucket
):
    wh = f"s3a://{bucket}/tallies"
    events = state_location(wh, "events")
    _stage(events, _tally(4, 100))
    _stage(events, _tally(9, 200))
    assert warehouse._newest_tallies(LakeTable(events)) == (_tally(9, 200), True)
