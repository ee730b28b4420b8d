"""The local S3-compatible server (scripts/s3.py): the S3 semantics ticdc-sync relies on,
its keys, its command line, and that it goes when the process that started it is killed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.s3.helpers import SCRIPT, STORAGE_ENV, server_module

pytestmark = pytest.mark.s3


def test_a_conditional_put_of_an_existing_key_is_refused(s3_server, bucket):
    key = "wh/tables/t/_delta_log/00000000000000000000.json"
    assert s3_server.put_object(bucket, key, b"first", if_none_match=True) == 200
    assert s3_server.put_object(bucket, key, b"second", if_none_match=True) == 412
    assert s3_server.get_object(bucket, key) == b"first"
    # Without the header the same PUT replaces the object: the 412 above is its doing.
    assert s3_server.put_object(bucket, key, b"third") == 200
    assert s3_server.get_object(bucket, key) == b"third"


def test_a_request_signed_with_another_secret_is_refused(s3_server, bucket):
    status, _, body = s3_server.request("GET", f"/{bucket}", secret_key="x" + s3_server.secret_key)
    assert status == 403
    assert b"SignatureDoesNotMatch" in body
    assert s3_server.request("GET", f"/{bucket}")[0] == 200


def test_the_server_never_shows_its_secret(s3_server):
    assert s3_server.secret_key not in repr(s3_server)


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_command_line_start_status_bucket_stop(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in STORAGE_ENV}
    env["TICDC_SYNC_S3_RUN_DIR"] = str(tmp_path)
    refused = _cli(["start"], env)
    assert refused.returncode != 0
    assert "AWS_ACCESS_KEY_ID" in refused.stderr

    env.update(AWS_ACCESS_KEY_ID="dev", AWS_SECRET_ACCESS_KEY="cli-test-secret-0123456789")
    started = _cli(["start"], env)
    try:
        assert started.returncode == 0, started.stderr
        exports = dict(
            line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines()
        )
        assert sorted(exports) == ["AWS_ALLOW_HTTP", "AWS_ENDPOINT_URL", "AWS_REGION"]
        assert env["AWS_SECRET_ACCESS_KEY"] not in started.stdout + started.stderr
        assert exports["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")

        status = _cli(["status"], env)
        assert (status.returncode, status.stdout.strip()) == (0, exports["AWS_ENDPOINT_URL"])
        assert _cli(["bucket", "lake"], env).returncode == 0
        wrong = _cli(["bucket", "lake2"], {**env, "AWS_SECRET_ACCESS_KEY": "wrong"})
        assert wrong.returncode == 1
        assert "SignatureDoesNotMatch" in wrong.stderr
    finally:
        stopped = _cli(["stop"], env)
    assert stopped.returncode == 0
    assert _cli(["status"], env).returncode == 1


STARTER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("s3_script", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
server = mod.S3Server(die_with_parent=True)
server.start()
print(server.proc.pid, server.data_dir, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited
    except OSError:
        return False


def test_the_server_goes_when_the_process_that_started_it_is_killed():
    server_module().fetch()  # the jars, before the child's start timeout runs
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(SCRIPT)], stdout=subprocess.PIPE, text=True
    )
    pid, data_dir = None, None
    try:
        pid_text, data_dir = parent.stdout.readline().split(maxsplit=1)
        pid, data_dir = int(pid_text), data_dir.strip()
        assert _alive(pid)
        parent.kill()
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid)
    finally:
        parent.kill()
        parent.stdout.close()
        if pid is not None and _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        if data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
