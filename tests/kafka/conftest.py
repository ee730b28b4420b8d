"""A real Kafka broker (KRaft, from scripts/kafka.py) for the whole test session.

Tests here are marked `kafka`; they also use the shared Spark session (re-exported below).
The broker is stopped and its data deleted at the end of the session, also when the
session is stopped with SIGTERM or Ctrl-C (tests/conftest.py): the broker runs in its own
process group, so nothing else would stop it.
"""

from __future__ import annotations

import atexit

import pytest

from tests.kafka.helpers import broker_module
from tests.spark.conftest import spark  # noqa: F401 - the one shared SparkSession fixture


@pytest.fixture(scope="session")
def kafka_broker():
    broker = broker_module().KafkaBroker(die_with_parent=True)
    # The last resort if the teardown below never runs (close() is idempotent).
    atexit.register(broker.close)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
        atexit.unregister(broker.close)
