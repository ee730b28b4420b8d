"""A real S3-compatible server (S3Proxy, from scripts/s3.py) for the whole test session.

Tests here are marked `s3`. The server checks request signatures against the random keys
it was started with, which tests hand to their Spark processes through the environment
only. It is stopped and its data deleted at the end of the session, also when the session
is stopped with SIGTERM or Ctrl-C (tests/conftest.py), and it dies with the test process
even when that is killed (`die_with_parent`).
"""

from __future__ import annotations

import atexit
import uuid

import pytest

from tests.s3.helpers import server_module


@pytest.fixture(scope="session")
def s3_server():
    server = server_module().S3Server(die_with_parent=True)
    # The last resort if the teardown below never runs (close() is idempotent).
    atexit.register(server.close)
    try:
        server.start()
        yield server
    finally:
        server.close()
        atexit.unregister(server.close)


@pytest.fixture(scope="module")
def bucket(s3_server) -> str:
    """A new, empty bucket for one test module."""
    name = f"lake-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name
