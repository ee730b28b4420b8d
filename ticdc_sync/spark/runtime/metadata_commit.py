"""A metadata-only DDL part (ADD COLUMNS, a recorded DDL's SET TBLPROPERTIES) committed
without Spark: the commit Delta's own statement writes (its `metaData` action with the new
schema or properties, and its commitInfo with the run's marker), put in place whole.

Why: each such statement through Spark is a Delta transaction with its analysis and commit
hooks, about a second of a warm driver's time per table (benchmarks/README.md, #73): a
schema-wide ALTER on every shard of a sharded schema paid it once per table, where the
commit itself is one small file.

Only where it is the same table Delta's statement leaves: a local table (a file system's
link is the put-if-absent a commit needs), outside Spark Connect (its server writes the
warehouse), at protocol 1/2 or with no feature beyond what `rs_create` writes
(TIMESTAMP_NTZ), without column mapping, a column type protocol 1/2 holds, a property of
ticdc-sync's own. Anything else, and a column already there (a resumed run), stays with the
statement, which knows those cases. Must not: decide what changes (the plan's part says),
or commit anything but metadata.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import SparkSession

from ticdc_sync import __version__
from ticdc_sync.core import lake
from ticdc_sync.ddl.changes import AddColumn
from ticdc_sync.spark.runtime.conf import MARKER_COMMIT_CONF
from ticdc_sync.spark.runtime.remote import is_connect
from ticdc_sync.spark.runtime.rs_create import NTZ_PROTOCOL, delta_type
from ticdc_sync.warehouse.locations import is_local, local_path

# Features a table may list for a commit written here: the ones `rs_create` writes for a
# TIMESTAMP_NTZ column. `invariants` constrains only columns that carry an invariant, which
# no target's column does; `appendOnly` only while its property is true (checked).
_KNOWN_WRITER_FEATURES = frozenset(NTZ_PROTOCOL["writerFeatures"])
_KNOWN_READER_FEATURES = frozenset(NTZ_PROTOCOL["readerFeatures"])
OWN_PROPERTY_PREFIX = "ticdc_sync."
# Characters Delta refuses in a column name without column mapping: the statement says so.
_INVALID_NAME_CHARS = " ,;{}()\n\t="


def try_add_column(spark: SparkSession, location: str, column: AddColumn) -> bool:
    """Commit `column` to the table at `location` as `ALTER TABLE ... ADD COLUMNS` would;
    whether it did (False: no commit, for the statement)."""
    t = delta_type(column.delta_type)
    if t is None or any(ch in column.name for ch in _INVALID_NAME_CHARS):
        return False

    def change(schema: dict[str, Any]) -> dict[str, Any] | None:
        fields = schema["fields"]
        names = [f["name"].lower() for f in fields]
        if column.name.lower() in names:
            return None  # already there: the statement says so, and tolerates it
        field = {
            "name": column.name,
            "type": t,
            "nullable": True,
            "metadata": {"comment": column.comment} if column.comment else {},
        }
        at = len(fields)
        if column.position is not None:
            if column.position.first:
                at = 0
            elif column.position.after and column.position.after.lower() in names:
                at = names.index(column.position.after.lower()) + 1
            else:
                return None
        return {**schema, "fields": [*fields[:at], field, *fields[at:]]}

    params = {"columns": json.dumps([{"column": {"name": column.name}}])}
    return _commit(spark, location, "ADD COLUMNS", params, schema_change=change)


def try_set_properties(spark: SparkSession, location: str, props: Mapping[str, str]) -> bool:
    """Commit ticdc-sync's own `props` to the table's properties as `ALTER TABLE ... SET
    TBLPROPERTIES` would; whether it did."""
    if not props or not all(k.startswith(OWN_PROPERTY_PREFIX) for k in props):
        return False
    params = {"properties": json.dumps(dict(props))}
    return _commit(spark, location, "SET TBLPROPERTIES", params, properties=props)


def _commit(
    spark: SparkSession,
    location: str,
    operation: str,
    params: dict[str, str],
    *,
    schema_change: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    properties: Mapping[str, str] | None = None,
) -> bool:
    from deltalake import DeltaTable

    if is_connect(spark) or not is_local(location):
        return False
    try:
        dt = DeltaTable(lake.table_uri(location))
    except Exception:  # noqa: BLE001 - not a table delta-rs reads: the statement says why
        return False
    protocol = dt.protocol()
    metadata = dt.metadata()
    config = dict(metadata.configuration)
    if not _plain(protocol, config):
        return False
    schema = json.loads(dt.schema().to_json())
    if schema_change is not None:
        schema = schema_change(schema)
        if schema is None:
            return False
    if properties is not None:
        config.update(properties)
    version = dt.version()
    now = int(time.time() * 1000)
    meta: dict[str, Any] = {"id": metadata.id}
    if metadata.name:
        meta["name"] = metadata.name
    if metadata.description:
        meta["description"] = metadata.description
    meta.update(
        format={"provider": "parquet", "options": {}},
        schemaString=json.dumps(schema),
        partitionColumns=list(metadata.partition_columns),
        configuration=config,
        createdTime=metadata.created_time,
    )
    marker = spark.conf.get(MARKER_COMMIT_CONF, None)
    info = {
        "timestamp": now,
        "operation": operation,
        "operationParameters": params,
        "readVersion": version,
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": f"ticdc-sync/{__version__}",
        "txnId": str(uuid.uuid4()),
        **({"userMetadata": marker} if marker else {}),
    }
    actions = [{"commitInfo": info}, {"metaData": meta}]
    return _put_if_absent(location, version + 1, actions)


def _plain(protocol: Any, config: Mapping[str, str]) -> bool:
    """Whether a commit written here keeps every rule the table's protocol sets."""
    if config.get("delta.columnMapping.mode", "none") != "none":
        return False
    if config.get("delta.appendOnly", "false").lower() == "true":
        return False
    if protocol.min_reader_version <= 1 and protocol.min_writer_version <= 2:
        return True
    return (
        protocol.min_reader_version == 3
        and protocol.min_writer_version == 7
        and set(protocol.reader_features or ()) <= _KNOWN_READER_FEATURES
        and set(protocol.writer_features or ()) <= _KNOWN_WRITER_FEATURES
    )


def _put_if_absent(location: str, version: int, actions: list[dict]) -> bool:
    """Commit `version`, whole, unless it exists (another writer committed it first)."""
    log = local_path(location) / "_delta_log"
    temp = log / f".{version:020d}.json.{uuid.uuid4().hex}.tmp"
    temp.write_text("".join(json.dumps(a) + "\n" for a in actions), encoding="utf-8")
    try:
        os.link(temp, log / f"{version:020d}.json")
    except OSError:  # taken, or no links here: the statement then
        return False
    finally:
        temp.unlink()
    return True
