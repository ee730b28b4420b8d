"""Kafka topic metadata and offsets through a Python Kafka client (confluent-kafka), for a
run whose Spark is a Spark Connect server: its client has no JVM to run Kafka's own
AdminClient in (`kafka._JvmAdmin`). Same questions, same answers: the topics, their
partitions, the earliest or latest offset of each partition.

The profile's `transport.options` are Java client properties (Spark's Kafka source on the
server takes them as they are); librdkafka, under confluent-kafka, spells most of them the
same. Where it does not: `sasl.jaas.config`'s username and password become
`sasl.username`/`sasl.password`, a PEM `ssl.truststore.location` becomes
`ssl.ca.location`, and properties librdkafka does not know (Java's timeouts and tuning) are
left out, logged, and named in the error of a look-up that fails. librdkafka-only
properties may be given beside the Java ones (the Java client ignores them). Its own log
lines go to Python logging, never to the terminal. This module reads metadata; it never
reads records or writes anything.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.secrets import redacted

log = logging.getLogger(__name__)

# Java client properties with no librdkafka counterpart that matters here: timeouts are
# given per call (`timeout`), deserializers and the like are the Spark source's.
JAVA_ONLY = (
    "default.api.timeout.ms",
    "isolation.level",
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.type",
)
_JAAS = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's configuration for the Java client properties `options`."""
    conf = {k: v for k, v in options.items() if k not in JAVA_ONLY}
    jaas = options.get("sasl.jaas.config")
    if jaas:
        found = dict(_JAAS.findall(jaas))
        for key in ("username", "password"):
            if key in found:
                # JAAS quoting: a backslash escapes the next character.
                conf.setdefault(f"sasl.{key}", re.sub(r"\\(.)", r"\1", found[key]))
    truststore = options.get("ssl.truststore.location")
    if truststore and options.get("ssl.truststore.type", "").upper() == "PEM":
        conf.setdefault("ssl.ca.location", truststore)
    return conf


class PyAdmin:
    """Topic metadata and offsets of one Kafka cluster, through confluent-kafka."""

    def __init__(self, options: Mapping[str, str], timeout: float, where: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.timeout = timeout
        self.where = where
        self.options = dict(options)
        self.read_committed = options.get("isolation.level") == "read_committed"
        conf: dict[str, Any] = client_config(options)
        self.dropped: list[str] = []
        while True:
            try:
                self.admin = AdminClient({**conf, "logger": log})
                break
            except Exception as e:  # noqa: BLE001 - a property librdkafka does not know
                unknown = re.search(r'No such configuration property: "([^"]+)"', str(e))
                if unknown is None or unknown.group(1) not in conf:
                    raise UserError(
                        f"cannot create a Kafka client for {where}: {e} (hint: check "
                        f"transport.options; in use: {redacted(options)})"
                    ) from e
                self.dropped.append(unknown.group(1))
                del conf[unknown.group(1)]
        if self.dropped:
            log.info("kafka: options the Python client does not know: %s", self.dropped)

    def _failed(self, what: str, e: BaseException) -> UserError:
        hint = "check bootstrap_servers, network access and the security options"
        if "UNKNOWN_TOPIC" in str(e):
            hint = "create the topic, or fix the source's topics"
        dropped = (
            f"; left out as unknown to the Python client: {', '.join(self.dropped)}"
            if self.dropped
            else ""
        )
        return UserError(
            f"Kafka at {self.where}: {what} failed: {e} (hint: {hint}; client options in "
            f"use: {redacted(self.options)}{dropped})"
        )

    def _metadata(self, what: str):
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except Exception as e:  # noqa: BLE001 - reported with the options in use
            raise self._failed(what, e) from e

    def topics(self) -> set[str]:
        md = self._metadata("listing topics")
        return {name for name, t in md.topics.items() if t.error is None}

    def partitions(self, names: list[str]) -> dict[str, list[int]]:
        md = self._metadata("describing topics")
        out = {}
        for name in names:
            t = md.topics.get(name)
            if t is None or t.error is not None:
                raise self._failed("describing topics", RuntimeError(f"{name}: UNKNOWN_TOPIC"))
            out[name] = sorted(int(p) for p in t.partitions)
        return out

    def offsets(self, tps: list[tuple[str, int]], spec: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        want = OffsetSpec.earliest() if spec == "earliest" else OffsetSpec.latest()
        level = (
            IsolationLevel.READ_COMMITTED
            if self.read_committed
            else IsolationLevel.READ_UNCOMMITTED
        )
        try:
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): want for t, p in tps},
                isolation_level=level,
                request_timeout=self.timeout,
            )
            return {
                (tp.topic, tp.partition): int(f.result(timeout=self.timeout).offset)
                for tp, f in futures.items()
            }
        except Exception as e:  # noqa: BLE001 - reported with the options in use
            raise self._failed(f"listing {spec} offsets", e) from e


@contextmanager
def admin(options: Mapping[str, str], timeout: float, where: str) -> Iterator[PyAdmin]:
    yield PyAdmin(options, timeout, where)
