"""A real Kafka broker (KRaft, from scripts/kafka.py) for the whole test session.

Tests here are marked `kafka`; they also use the shared Spark session (re-exported below).
The broker is stopped and its data deleted at the end of the session.
"""

from __future__ import annotations

import pytest

from tests.kafka.helpers import broker_module
from tests.spark.conftest import spark  # noqa: F401 - the one shared SparkSession fixture


@pytest.fixture(scope="session")
def kafka_broker():
    broker = broker_module().KafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
