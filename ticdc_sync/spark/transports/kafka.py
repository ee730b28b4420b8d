"""Bounded batch reads of Kafka topics into `events.RECORD_SCHEMA` rows, and offset look-ups.

ticdc-sync keeps its own position per topic-partition (the next offset to read), so each
call reads exactly `[start, latest-at-call-time)` per partition: the latest offsets are
fetched first (Kafka AdminClient through py4j; kafka-clients comes with the Spark Kafka
connector; over Spark Connect a Python Kafka client, `kafka_client`), then one `spark.read.format("kafka")` batch is built for exactly those ranges.
The returned end offsets are exact, so the caller can checkpoint them atomically with the
data and call again for the next micro-batch (`run --follow`).

Offsets Kafka no longer has (retention, deleted records) are an error naming the gap; they
are never skipped (`failOnDataLoss` is on as well, for records deleted during the read).
Client options (SASL/SSL) pass through as `kafka.<option>`; they may hold secrets, so they
are only ever logged through `redact()`. This module reads; it never decodes or writes.
pyspark is imported lazily so that `redact()` is usable from the pure core.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.events import RECORD_SCHEMA
from ticdc_sync.core.model import Transport
from ticdc_sync.core.secrets import redacted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

Offsets = dict[tuple[str, int], int]  # (topic, partition) -> next offset to read

# Any option whose name contains one of these may carry a secret (sasl.jaas.config holds
# the password inline; ssl.key.password, ssl.keystore.key, sasl.oauthbearer tokens, ...).
# Same words as the plan's redaction (docs/commands.md).

# Spark's Kafka source manages these itself and rejects them (Spark docs: "Kafka specific
# configurations"); say so up front rather than with a JVM stack trace.
UNSUPPORTED_OPTIONS = (
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "enable.auto.commit",
    "interceptor.classes",
)

ADMIN_TIMEOUT_S = 90
DEFAULT_CLIENT_OPTIONS = {
    # Bounded: an unreachable broker is an error within a minute, not a hang.
    "request.timeout.ms": "30000",
    "default.api.timeout.ms": "60000",
}


def redact(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `options` fit for logs and messages (`secrets.redacted`)."""
    return redacted(options)


def client_options(transport: Transport) -> dict[str, str]:
    """Kafka client properties for `transport` (no `kafka.` prefix)."""
    opts = dict(DEFAULT_CLIENT_OPTIONS)
    for k, v in transport.kafka_options.items():
        # Accept Spark's spelling too (`kafka.security.protocol`).
        opts[k.removeprefix("kafka.")] = str(v)
    bad = sorted(k for k in opts if k in UNSUPPORTED_OPTIONS)
    if bad:
        raise UserError(
            f"Kafka option(s) {', '.join(bad)} cannot be set: ticdc-sync manages positions and "
            "deserialization itself (hint: remove them from the profile's transport.options)"
        )
    if transport.bootstrap_servers:
        opts["bootstrap.servers"] = transport.bootstrap_servers
    if not opts.get("bootstrap.servers"):
        raise UserError(
            "the Kafka transport has no bootstrap_servers (hint: set transport.bootstrap_servers "
            "in the profile, e.g. `${KAFKA_BOOTSTRAP}`)"
        )
    return opts


def spark_options(transport: Transport) -> dict[str, str]:
    """Options for `spark.read.format("kafka")`: every client option as `kafka.<option>`."""
    return {f"kafka.{k}": v for k, v in client_options(transport).items()}


# Kafka client errors that mean "the cluster cannot be reached right now", not "the request
# is wrong": a `run --follow` waits these out (runner), a plain `run` reports them.
UNAVAILABLE_MARKERS = (
    "org.apache.kafka.common.errors.TimeoutException",
    "org.apache.kafka.common.errors.DisconnectException",
    "org.apache.kafka.common.errors.NetworkException",
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException",
    "org.apache.kafka.common.errors.LeaderNotAvailableException",
    "org.apache.kafka.common.errors.CoordinatorNotAvailableException",
    "Timed out waiting for a node assignment",
    "Timed out waiting to send the call",
    # librdkafka's (the Python client's, over Spark Connect): KafkaError codes.
    "code=_TRANSPORT",
    "code=_TIMED_OUT",
    "code=_ALL_BROKERS_DOWN",
    "code=REQUEST_TIMED_OUT",
    "code=LEADER_NOT_AVAILABLE",
    "code=NOT_LEADER_OR_FOLLOWER",
)


def _reachable(servers: str, timeout: float = 3.0) -> bool:
    """Whether any bootstrap server accepts a TCP connection (no Kafka protocol)."""
    import socket

    for hp in servers.split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host or not port.isdigit():
            continue
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except OSError:
            continue
    return False


def is_unavailable(transport: Transport, e: BaseException) -> bool:
    """True when `e` (from a Kafka read or offset look-up) is Kafka being unreachable.

    Either the error is one of Kafka's availability errors, or no bootstrap server accepts
    a connection right now. Gaps, missing topics and bad options are not: they need a human.
    """
    text = str(e)
    if "no longer has records" in text or "fewer records than" in text:
        return False
    if any(m in text for m in UNAVAILABLE_MARKERS):
        return True
    return bool(transport.bootstrap_servers) and not _reachable(transport.bootstrap_servers)


def _java_error(e: Exception) -> str:
    """The Java exception's message without the JVM stack trace."""
    j = getattr(e, "java_exception", None)
    if j is None:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    msgs = []
    while j is not None and len(msgs) < 4:
        msgs.append(str(j.toString()))
        j = j.getCause()
    return "; caused by ".join(msgs)


@contextmanager
def _admin(spark: SparkSession, transport: Transport) -> Iterator[Any]:
    """Kafka's metadata: through Kafka's AdminClient in the session's JVM; over Spark
    Connect, whose client has none, through a Python Kafka client (`kafka_client`)."""
    from ticdc_sync.spark.runtime.remote import is_connect

    if is_connect(spark):
        from ticdc_sync.spark.transports import kafka_client

        with kafka_client.admin(
            client_options(transport), ADMIN_TIMEOUT_S, str(transport.bootstrap_servers)
        ) as admin:
            yield admin
        return
    jvm = spark._jvm
    opts = client_options(transport)
    props = jvm.java.util.Properties()
    for k, v in opts.items():
        props.put(k, v)
    try:
        admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
    except Exception as e:
        raise UserError(
            f"cannot create a Kafka client for {opts['bootstrap.servers']}: {_java_error(e)} "
            f"(hint: check transport.options; in use: {redact(opts)})"
        ) from e
    try:
        yield _JvmAdmin(spark, admin, transport)
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(10))


class _JvmAdmin:
    """Topic metadata and offsets through Kafka's AdminClient in the session's JVM."""

    def __init__(self, spark: SparkSession, admin: Any, transport: Transport) -> None:
        self.spark, self.admin, self.transport = spark, admin, transport

    def _get(self, future: Any, what: str) -> Any:
        unit = self.spark._jvm.java.util.concurrent.TimeUnit.SECONDS
        try:
            return future.get(ADMIN_TIMEOUT_S, unit)
        except Exception as e:
            msg = _java_error(e)
            hint = "check bootstrap_servers, network access and the security options"
            if "UnknownTopicOrPartition" in msg:
                hint = "create the topic, or fix the source's topics"
            raise UserError(
                f"Kafka at {self.transport.bootstrap_servers}: {what} failed: {msg} (hint: "
                f"{hint}; client options in use: {redact(client_options(self.transport))})"
            ) from e

    def topics(self) -> set[str]:
        return {str(t) for t in self._get(self.admin.listTopics().names(), "listing topics")}

    def partitions(self, names: list[str]) -> dict[str, list[int]]:
        jlist = self.spark._jvm.java.util.ArrayList()
        for t in names:
            jlist.add(t)
        desc = self._get(self.admin.describeTopics(jlist).allTopicNames(), "describing topics")
        return {t: sorted(int(p.partition()) for p in desc.get(t).partitions()) for t in names}

    def offsets(self, tps: list[tuple[str, int]], spec: str) -> Offsets:
        jvm = self.spark._jvm
        adm = jvm.org.apache.kafka.clients.admin
        jspec = adm.OffsetSpec.earliest() if spec == "earliest" else adm.OffsetSpec.latest()
        req = jvm.java.util.HashMap()
        for t, p in tps:
            req.put(jvm.org.apache.kafka.common.TopicPartition(t, p), jspec)
        options = adm.ListOffsetsOptions()
        if client_options(self.transport).get("isolation.level") == "read_committed":
            # Then the readable end is the last stable offset, as the Spark reader sees it.
            level = jvm.org.apache.kafka.common.IsolationLevel.READ_COMMITTED
            options = adm.ListOffsetsOptions(level)
        res = self._get(self.admin.listOffsets(req, options).all(), f"listing {spec} offsets")
        return {(str(tp.topic()), int(tp.partition())): int(i.offset()) for tp, i in res.items()}


def list_partitions(
    spark: SparkSession,
    transport: Transport,
    topics: tuple[str, ...] | None,
    topic_pattern: str | None = None,
) -> dict[str, list[int]]:
    """Partitions of `topics` plus every topic matching `topic_pattern` (a full match)."""
    with _admin(spark, transport) as admin:
        return _partitions(admin, transport, topics, topic_pattern)


def _partitions(
    admin: Any,
    transport: Transport,
    topics: tuple[str, ...] | None,
    topic_pattern: str | None,
) -> dict[str, list[int]]:
    wanted = set(topics or ())
    if topic_pattern or wanted:
        existing = admin.topics()
        missing = sorted(wanted - existing)
        if missing:
            raise UserError(
                f"Kafka at {transport.bootstrap_servers} has no topic(s) {', '.join(missing)} "
                "(hint: check the source's topics; TiCDC creates the topic when the changefeed "
                "starts)"
            )
        if topic_pattern:
            # Same rule as Spark's subscribePattern and the files transport: a full match.
            rx = re.compile(topic_pattern)
            wanted |= {t for t in existing if rx.fullmatch(t)}
    if not wanted:
        return {}
    return admin.partitions(sorted(wanted))


def _offsets(admin: Any, tps: list[tuple[str, int]], spec: str) -> Offsets:
    return admin.offsets(tps, spec) if tps else {}


def latest_offsets(
    spark: SparkSession, transport: Transport, partitions: Mapping[str, list[int]]
) -> Offsets:
    """The next offset each partition will be written at (the log end)."""
    tps = [(t, p) for t, ps in sorted(partitions.items()) for p in ps]
    with _admin(spark, transport) as admin:
        return _offsets(admin, tps, "latest")


def _default_start(
    transport: Transport, tp: tuple[str, int], earliest: int, latest: int
) -> tuple[int, bool]:
    """Where a partition with no recorded position begins, and whether it was explicit."""
    so = (transport.starting_offsets or "earliest").strip()
    if so == "earliest":
        return earliest, False
    if so == "latest":
        return latest, False
    try:
        spec = json.loads(so)
        value = spec.get(tp[0], {}).get(str(tp[1]), -2) if isinstance(spec, dict) else None
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, int) or value < -2:
        raise UserError(
            f"transport.starting_offsets {so!r} is not understood (hint: `earliest`, `latest`, "
            'or JSON like {"topic": {"0": 42}} where -2 is earliest and -1 latest)'
        )
    if value == -2:
        return earliest, False
    if value == -1:
        return latest, False
    return value, True


def _gap_error(gaps: list[tuple[tuple[str, int], int, int]], transport: Transport) -> UserError:
    parts = [
        f"topic {t} partition {p}: next offset to read is {nxt}, but the earliest offset "
        f"Kafka still has is {first} ({first - nxt} record(s) gone)"
        for (t, p), nxt, first in gaps
    ]
    return UserError(
        f"Kafka at {transport.bootstrap_servers} no longer has records ticdc-sync has not "
        "applied yet (deleted by retention or delete-records); they are not skipped: "
        + "; ".join(parts)
        + " (hint: the targets fed by these partitions may have missed changes. Raise the "
        "topic's retention.ms so this does not recur, then either rebuild those tables "
        "(load them from a TiDB export taken at a TSO and start a new changefeed with "
        "--start-ts at that TSO, into a new topic), or, accepting the loss, remove the "
        "consumed positions of these partitions from the project state so they start again "
        "at transport.starting_offsets)"
    )


def read_kafka_records(
    spark: SparkSession,
    transport: Transport,
    topics: tuple[str, ...] | None,
    topic_pattern: str | None,
    start: Mapping[tuple[str, int], int],
    on_size: Callable[[int], None] | None = None,
) -> tuple[DataFrame, Offsets]:
    """Records from `start` (next offset per partition) up to the latest offsets right now.

    Partitions not in `start` begin at `transport.starting_offsets`. Returns the records as
    a DataFrame of `events.RECORD_SCHEMA` (lazy; it reads exactly the fixed ranges, so it
    can be recomputed) and the end offsets: the next offset per partition of every topic
    read, including partitions with nothing new. A position below what Kafka still has is
    a `UserError` naming the gap; one beyond the log end (topic deleted and re-created)
    is one too. `on_size` hears how many records the ranges hold.
    """
    with _admin(spark, transport) as admin:
        parts = _partitions(admin, transport, topics, topic_pattern)
        tps = [(t, p) for t, ps in sorted(parts.items()) for p in ps]
        earliest = _offsets(admin, tps, "earliest")
        latest = _offsets(admin, tps, "latest")

    begin: Offsets = {}
    gaps: list[tuple[tuple[str, int], int, int]] = []
    ahead: list[str] = []
    for tp in tps:
        if tp in start:
            nxt, explicit = int(start[tp]), True
        else:
            nxt, explicit = _default_start(transport, tp, earliest[tp], latest[tp])
        if explicit and nxt < earliest[tp]:
            gaps.append((tp, nxt, earliest[tp]))
        elif nxt > latest[tp]:
            ahead.append(
                f"topic {tp[0]} partition {tp[1]}: next offset to read is {nxt}, but the log "
                f"ends at {latest[tp]}"
            )
        begin[tp] = nxt
    if gaps:
        raise _gap_error(gaps, transport)
    if ahead:
        raise UserError(
            f"Kafka at {transport.bootstrap_servers} has fewer records than ticdc-sync already "
            "consumed: " + "; ".join(ahead) + " (hint: the topic was probably deleted and "
            "re-created; rebuild the affected tables, or remove these partitions' positions "
            "from the project state)"
        )

    ends: Offsets = {tp: latest[tp] for tp in tps}
    todo = [tp for tp in tps if begin[tp] < latest[tp]]
    if on_size is not None:
        # Offsets count records (TiCDC topics are neither compacted nor transactional).
        on_size(sum(latest[tp] - begin[tp] for tp in todo))
    log.info(
        "kafka read %s: %d of %d partition(s) have new records; client options %s",
        transport.bootstrap_servers,
        len(todo),
        len(tps),
        redact(client_options(transport)),
    )
    if not todo:
        return spark.createDataFrame([], RECORD_SCHEMA), ends

    from pyspark.sql import functions as F

    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for t, p in todo:
        assign.setdefault(t, []).append(p)
        starting.setdefault(t, {})[str(p)] = begin[(t, p)]
        ending.setdefault(t, {})[str(p)] = latest[(t, p)]
    reader = spark.read.format("kafka")
    for k, v in sorted(spark_options(transport).items()):
        reader = reader.option(k, v)
    df = (
        reader.option("assign", json.dumps(assign, sort_keys=True))
        .option("startingOffsets", json.dumps(starting, sort_keys=True))
        .option("endingOffsets", json.dumps(ending, sort_keys=True))
        # Records deleted between the offset look-up and the read fail the read too.
        .option("failOnDataLoss", "true")
        .load()
    )
    out = df.select(
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("bigint").alias("offset"),
        F.unix_millis(F.col("timestamp")).alias("timestamp"),
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
    )
    return out, ends
