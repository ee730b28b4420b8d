"""The Spark, Delta Lake and Kafka connector versions ticdc-sync runs on, and what a Spark
Connect server must have for it: one place for the local session's jar coordinates
(`spark.runtime.session`), the server's launch (`spark.runtime.remote`) and what `validate`
and `plan` tell a user of a remote profile.

Pure data; must not import pyspark or start anything.
"""

from __future__ import annotations

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
