"""Test helpers for the real local broker: load scripts/kafka.py, produce exact records.

Records are produced through Spark's Kafka sink with an explicit `partition` column, so
each lands in the partition a TiCDC dispatcher would pick; keys and values are raw bytes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ticdc_sync.core.model import Transport, TransportKind

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka.py"


def broker_module() -> ModuleType:
    """scripts/kafka.py as a module (it is a script, not part of the package)."""
    name = "ticdc_sync_scripts_kafka"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def transport(bootstrap: str, **options: str) -> Transport:
    return Transport(TransportKind.KAFKA, bootstrap_servers=bootstrap, kafka_options=options)


def produce(
    spark, bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]]
) -> None:
    """Write (partition, key, value) records to `topic`, in list order per partition."""
    if not records:
        return
    # One Spark partition: the sink writes them in list order, so offsets follow the list.
    df = spark.createDataFrame(
        [(p, k, v) for p, k, v in records], "partition INT, key BINARY, value BINARY"
    ).coalesce(1)
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        # Exactly once per record on a healthy local broker: no duplicate offsets in tests.
        .option("kafka.enable.idempotence", "true")
        .option("kafka.acks", "all")
        .option("kafka.linger.ms", "0")
        .save()
    )


def kafka_profiles(
    bootstrap: str,
    *,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    options: dict[str, str] | None = None,
) -> str:
    """profiles.yml text for a project reading from the local broker (profile `test`, target `dev`)."""
    import yaml

    spark: dict = {"master": master}
    if conf:
        spark["conf"] = dict(conf)
    tr: dict = {"type": "kafka", "bootstrap_servers": bootstrap}
    if options:
        tr["options"] = dict(options)
    out = {"spark": spark, "warehouse": "warehouse", "transport": tr}
    return yaml.safe_dump({"test": {"target": "dev", "outputs": {"dev": out}}}, sort_keys=True)


def kafka_project(
    root: Path,
    bootstrap: str,
    *,
    protocol: str,
    topic: str,
    schema_sql: str,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    options: dict[str, str] | None = None,
) -> Path:
    """A project (tables `app.*` -> `{table}`) whose profile reads `topic` from Kafka."""
    from tests.spark.engine_harness import make_project

    make_project(
        root,
        protocol=protocol,
        topic=topic,
        schema_sql=schema_sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    (root / "profiles.yml").write_text(
        kafka_profiles(bootstrap, master=master, conf=conf, options=options)
    )
    return root


def produce_records(spark, bootstrap: str, topic: str, records) -> None:
    """Produce generated `workload.encode.Record`s (keys and partitions as generated)."""
    produce(spark, bootstrap, topic, [(r.partition, r.key, r.value) for r in records])
