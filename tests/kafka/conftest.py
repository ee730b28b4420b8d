"""A real Kafka broker (KRaft, from scripts/kafka.py) for the whole test session.

Tests here are marked `kafka`; they also use the shared Spark session (re-exported below).
The broker is stopped and its data deleted at the end of the session, also when the
session is stopped with SIGTERM or Ctrl-C: the broker runs in its own process group, so
nothing else would stop it.
"""

from __future__ import annotations

import atexit
import signal

import pytest

from tests.kafka.helpers import broker_module
from tests.spark.conftest import spark  # noqa: F401 - the one shared SparkSession fixture


def _interrupt(signum, _frame):
    # pytest tears fixtures down on KeyboardInterrupt; the default SIGTERM action would not.
    # A second SIGTERM (`timeout` forwards the one it got) must not cut the teardown short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def kafka_broker():
    broker = broker_module().KafkaBroker()
    # The last resort if the teardown below never runs (close() is idempotent).
    atexit.register(broker.close)
    before = signal.signal(signal.SIGTERM, _interrupt)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
        signal.signal(signal.SIGTERM, before)
        atexit.unregister(broker.close)
