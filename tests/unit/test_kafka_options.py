"""Kafka client options: pass-through, redaction, refusals (no JVM)."""

from __future__ import annotations

import pytest

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Transport, TransportKind
from ticdc_sync.spark.transports.kafka import client_options, redact, spark_options


def _t(bootstrap: str | None = "b:9092", **opts: str) -> Transport:
    return Transport(TransportKind.KAFKA, bootstrap_servers=bootstrap, kafka_options=opts)


def test_redact_hides_every_secret_looking_option():
    opts = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'ScramLoginModule required username="u" password="p";',
        "ssl.truststore.password": "tp",
        "ssl.key.password": "kp",
        "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "client.secret": "s",
        "bootstrap.servers": "b:9092",
    }
    r = redact(opts)
    assert r == {
        "bootstrap.servers": "b:9092",
        "client.secret": "****",
        "sasl.jaas.config": "****",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.oauthbearer.token.endpoint.url": "****",
        "security.protocol": "SASL_SSL",
        "ssl.key.password": "****",
        "ssl.keystore.key": "****",
        "ssl.truststore.password": "****",
    }
    assert opts["ssl.key.password"] == "kp"  # a copy; the original is untouched
    assert "password=" not in str(r)


def test_every_option_passes_through_with_the_kafka_prefix():
    o = spark_options(_t(**{"security.protocol": "SSL", "kafka.ssl.truststore.location": "/t.jks"}))
    assert o["kafka.bootstrap.servers"] == "b:9092"
    assert o["kafka.security.protocol"] == "SSL"
    assert o["kafka.ssl.truststore.location"] == "/t.jks"  # Spark's spelling accepted once
    assert "kafka.kafka.ssl.truststore.location" not in o
    # Bounded waits unless the profile says otherwise.
    assert client_options(_t(**{"request.timeout.ms": "5"}))["request.timeout.ms"] == "5"
    assert client_options(_t())["default.api.timeout.ms"] == "60000"


def test_bootstrap_from_options_or_an_error():
    assert client_options(_t(None, **{"bootstrap.servers": "x:1"}))["bootstrap.servers"] == "x:1"
    with pytest.raises(UserError, match="no bootstrap_servers"):
        client_options(_t(None))


def test_options_spark_manages_are_refused():
    with pytest.raises(UserError, match=r"auto.offset.reset.*transport.options"):
        client_options(_t(**{"auto.offset.reset": "earliest"}))
