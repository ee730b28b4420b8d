"""The Spark, Delta Lake and Kafka connector versions ticdc-sync runs on, and what a Spark
Connect server must have for it: one place for the local session's jar coordinates
(`spark.runtime.session`), the server's launch (`spark.runtime.remote`) and what `validate`
and `plan` tell a user of a remote profile; and whether this Python has what a Spark Connect
client needs (`connect_extra_missing`: looked up, never imported).

Pure data; must not import pyspark or start anything.
"""

from __future__ import annotations

import importlib.util

SCALA = "2.13"
SPARK_VERSION = "4.2.0"
# delta-spark's pip package is 4.4.x for Spark 4.2; the JVM artifact carries the Spark
# version in its name. 4.4.0 is the newest of it on Maven Central.
DELTA_VERSION = "4.4.0"
DELTA_PACKAGE = f"io.delta:delta-spark_4.2_{SCALA}:{DELTA_VERSION}"
KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{SPARK_VERSION}"

# Settings only a server can have (static: a client's session cannot set them): Delta's
# session extension and catalog.
DELTA_SERVER_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def minor(version: str) -> str:
    """`4.2` of `4.2.0` (or of `4.2.0-SNAPSHOT`)."""
    return ".".join(version.split("-")[0].split(".")[:2])


def remote_needs(kafka: bool) -> str:
    """What a Spark Connect server needs for a run, in one sentence."""
    jars = DELTA_PACKAGE + (f" and {KAFKA_PACKAGE}" if kafka else "")
    conf = ", ".join(f"{k}={v}" for k, v in DELTA_SERVER_CONF.items())
    return (
        f"the server must run Spark {minor(SPARK_VERSION)} with Delta Lake "
        f"{minor(DELTA_VERSION)} ({jars}; {conf}), and its Python workers the client's "
        "Python version with pyarrow (docs/operations.md, Spark Connect)"
    )


# What a Spark Connect client imports beyond ticdc-sync's own dependencies, with the package
# that brings each: pyspark's `connect` extra (its gRPC client: the modules pyspark checks
# before it opens a remote session, pyspark.sql.connect.utils.check_dependencies; pandas
# and pyarrow are dependencies of ticdc-sync's own) and, for a Kafka transport,
# confluent-kafka (the client reads topic metadata and offsets). ticdc-sync's `connect`
# extra installs them all.
CONNECT_CLIENT_MODULES = (
    ("grpc", "grpcio"),
    ("grpc_status", "grpcio-status"),
    ("google.rpc", "googleapis-common-protos"),
    ("zstandard", "zstandard"),
)
KAFKA_CLIENT_MODULES = (("confluent_kafka", "confluent-kafka"),)
CONNECT_EXTRA_INSTALL = "pip install 'ticdc-sync[connect]'"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent package is missing, or broken
        return False


def connect_extra_missing(kafka: bool) -> list[str]:
    """The packages of ticdc-sync's `connect` extra that a Spark Connect client (with a
    Kafka transport: `kafka`) needs and that this Python cannot import."""
    wanted = CONNECT_CLIENT_MODULES + (KAFKA_CLIENT_MODULES if kafka else ())
    return [package for module, package in wanted if not _importable(module)]


def connect_extra_error(remote: str, kafka: bool) -> str | None:
    """Why this Python cannot be a client of the Spark Connect server `remote` (None: it
    can), in one line with the install command."""
    missing = connect_extra_missing(kafka)
    if not missing:
        return None
    return (
        f"Spark Connect ({remote}) needs ticdc-sync's `connect` extra, which is not installed "
        f"in this Python ({', '.join(missing)} missing) (hint: {CONNECT_EXTRA_INSTALL}; from "
        "a checkout, pip install -e '.[connect]')"
    )
