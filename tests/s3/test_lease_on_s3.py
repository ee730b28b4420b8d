"""The run lease (ticdc_sync/warehouse/lease.py) in an `s3a://` warehouse on the local S3 server.

Racing processes (`tests/lease_child.py`) get their keys and endpoint from the environment
only; exactly one wins, because delta-rs commits each lease change with a conditional
PutObject (`If-None-Match: *`) that the server refuses for all but the first. No JVM.
"""

from __future__ import annotations

import signal

import pytest

from tests import lease_child
from tests.s3.helpers import job_env
from ticdc_sync.core.errors import UserError
from ticdc_sync.warehouse.lease import RunLease

pytestmark = pytest.mark.s3


def test_racing_processes_on_s3_exactly_one_wins_and_a_killed_one_is_taken_over(
    s3_server, bucket, tmp_path
):
    wh = f"s3a://{bucket}/race"
    env = job_env(s3_server)
    procs = [lease_child.start(wh, tmp_path, env=env) for _ in range(3)]
    (tmp_path / "go").touch()
    try:
        results = [lease_child.result(p)[0] for p in procs]
        won = [r for r in results if r.startswith("WON ")]
        assert len(won) == 1, results
        holder = won[0].removeprefix("WON ")
        refused = [r for r in results if r is not won[0]]
        assert all(
            r.startswith(f"REFUSED warehouse {wh} is in use by another `ticdc-sync run`: {holder}")
            for r in refused
        ), results
        winner = procs[results.index(won[0])]
        winner.send_signal(signal.SIGKILL)
    finally:
        (tmp_path / "release").touch()
        codes = sorted(p.wait(timeout=60) for p in procs)
    assert codes == [-signal.SIGKILL, 1, 1]
    lines: list[str] = []
    with RunLease(wh, out=lines.append, env=s3_server.env()) as lease:
        lease.check()
    assert lines == [f"took over the run lease of {holder}: its process is gone"]
    keys = s3_server.list_keys(bucket, "race/")
    assert "race/_ticdc_sync/run_lease/_delta_log/00000000000000000000.json" in keys
    # Everything went to the bucket: no folder named after the URI scheme here.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go", "release"]


def test_wrong_credentials_are_an_error_that_says_where_they_come_from(s3_server, bucket):
    env = {**s3_server.env(), "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    with pytest.raises(UserError, match="cannot read the run lease") as e:
        RunLease(f"s3a://{bucket}/denied", out=lambda s: None, env=env).acquire()
    assert "credentials come from the environment" in str(e.value)
    assert "not-the-secret" not in str(e.value)
