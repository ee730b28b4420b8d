"""One Spark Connect server (Spark 4.2's own, scripts/connect_server.py) for every test here,
and a client session of it.

The server binds 127.0.0.1, runs `local[2]` in its own process group, gets the Delta and
Kafka jars through `--packages` and is stopped at the end of the session (also on SIGTERM or
Ctrl-C, tests/conftest.py; SIGKILLed with the test run: `die_with_parent`). Its Python
workers run this interpreter without PYTHONPATH: ticdc_sync reaches them as the artifact
each session uploads (`remote.upload_package`). Starting it takes a while (measured in
`server.started_in`), hence one for all (but test_catalog_over_connect.py's, whose server
is started with a Hive metastore as its catalog).

In a test's process a Spark Connect session needs `SPARK_CONNECT_MODE_ENABLED` (pyspark's
functions build Connect expressions only then), which would turn the shared classic
session of tests/spark into a broken one: it is set for the tests here only, and put back
after each (`_connect_mode`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "connect_server.py"


def server_module() -> ModuleType:
    name = "ticdc_sync_scripts_connect_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# A server already running (`python scripts/connect_server.py start`): the tests use it
# instead of starting their own, for quick turns while developing.
EXISTING_ENV = "TICDC_SYNC_TEST_CONNECT_REMOTE"


class _Existing:
    def __init__(self, remote: str) -> None:
        self.remote = remote


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    if os.environ.get(EXISTING_ENV):
        yield _Existing(os.environ[EXISTING_ENV])
        return
    server = server_module().ConnectServer(
        tmp_path_factory.mktemp("connect-server"),
        conf={
            # What the shared test session takes for small data (tests/spark/conftest.py).
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.databricks.delta.snapshotPartitions": "1",
        },
    )
    try:
        server.start()
        print(f"\nSpark Connect server ready in {server.started_in:.1f}s", file=sys.stderr)
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _connect_mode():
    from ticdc_sync.spark.runtime.remote import CONNECT_MODE_ENV

    before = os.environ.get(CONNECT_MODE_ENV)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE_ENV, None)
        else:
            os.environ[CONNECT_MODE_ENV] = before


@pytest.fixture
def remote(connect_server, _connect_mode):
    """A client session of the server, as a run opens one (checked, ticdc_sync uploaded),
    released at the end of the test."""
    from ticdc_sync.core.model import Output
    from ticdc_sync.spark.runtime import fanout
    from ticdc_sync.spark.runtime.session import build_session

    spark = build_session(Output("connect", spark_remote=connect_server.remote), kafka=True)
    try:
        yield spark
    finally:
        fanout.release_all(spark)
        spark.stop()
