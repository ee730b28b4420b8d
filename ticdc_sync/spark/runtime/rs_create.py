"""Create a Delta table without Spark where its first commit can be the one Delta's own
CREATE TABLE writes: the same protocol and the same metadata (schema, description,
properties), in one commit file and without a Spark job.

Why: a CREATE TABLE through Spark costs a Delta transaction, its analysis and its commit
hooks, about half a second of a warm driver's time per table (benchmarks/README.md), where
delta-rs writes the same commit in milliseconds; a first run creates every target and the
state tables, so a warehouse of many tables paid it once per table.

Only where the result is the same table: every property, the session's
`spark.databricks.delta.properties.defaults.*` included (Delta adds them to a new table),
is one that needs no table feature, and every column type is one protocol 1/2 holds, or
TIMESTAMP_NTZ. A TIMESTAMP_NTZ column takes Delta to table features (reader 3, writer 7)
and lists the legacy writer features beside it (`appendOnly`, `invariants`), which
delta-rs does not: such a table's commit is written here, for a local table only (a
file system's link is the put-if-absent a commit needs). Anything else stays with the
statement (`table_create.create_table`), and so does every create over Spark Connect, whose
server writes the warehouse. Must not: decide what a table holds (the
caller's columns and properties are the plan's), or write anything but version 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ticdc_sync import __version__
from ticdc_sync.core import lake
from ticdc_sync.spark.runtime.conf import MARKER_COMMIT_CONF
from ticdc_sync.spark.runtime.remote import is_connect
from ticdc_sync.warehouse.locations import is_local, local_path

# Properties a table keeps at protocol 1/2, in Delta and in delta-rs alike (with their
# values where another value would raise the protocol: change data feed needs writer 4).
_SAME_PROTOCOL = {
    "delta.appendOnly": None,
    "delta.dataSkippingStatsColumns": None,
    "delta.dataSkippingNumIndexedCols": None,
    "delta.checkpointInterval": None,
    "delta.logRetentionDuration": None,
    "delta.deletedFileRetentionDuration": None,
    "delta.enableChangeDataFeed": "false",
}
DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."

_PRIMITIVE = {
    "tinyint": "byte",
    "byte": "byte",
    "smallint": "short",
    "short": "short",
    "int": "integer",
    "integer": "integer",
    "bigint": "long",
    "long": "long",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
NTZ = "timestamp_ntz"
# What Delta writes for a new table with a TIMESTAMP_NTZ column (and no other feature).
NTZ_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["timestampNtz"],
    "writerFeatures": ["timestampNtz", "invariants", "appendOnly"],
}


@dataclass(frozen=True)
class PlainCreate:
    """What a CREATE TABLE statement makes: (name, Spark SQL type) columns in order, all
    nullable, the table's comment and TBLPROPERTIES."""

    columns: tuple[tuple[str, str], ...]
    description: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    partition_by: tuple[str, ...] = ()  # PARTITIONED BY: metaData's partitionColumns
    # CLUSTER BY: writer features and a domainMetadata action delta-rs does not write, so
    # such a table is left to the statement.
    cluster_by: tuple[str, ...] = ()


def delta_type(sql_type: str, ntz: bool = False) -> str | dict | None:
    """The Delta schema JSON type of a Spark SQL type (`DECIMAL(10,2)`, `MAP<STRING,
    STRING>`), None for one outside protocol 1/2's types (TIMESTAMP_NTZ too, unless `ntz`)
    or not known here."""
    t = " ".join(sql_type.strip().lower().split())
    if t in _PRIMITIVE:
        return _PRIMITIVE[t]
    if t == NTZ and ntz:
        return NTZ
    m = _DECIMAL.match(t)
    if m:
        return f"decimal({m.group(1)},{m.group(2)})"
    if t.startswith("array<") and t.endswith(">"):
        element = delta_type(t[len("array<") : -1], ntz)
        if element is None:
            return None
        return {"type": "array", "elementType": element, "containsNull": True}
    if t.startswith("map<") and t.endswith(">"):
        parts = split_outside_brackets(t[len("map<") : -1])
        if len(parts) != 2:
            return None
        key, value = delta_type(parts[0], ntz), delta_type(parts[1], ntz)
        if key is None or value is None:
            return None
        return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
    return None


def split_outside_brackets(text: str) -> list[str]:
    """`text` split at its commas outside `<...>` and `(...)` (`STRING, DECIMAL(10, 2)`)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return [*out, text[start:]]


def schema_json(columns: Sequence[tuple[str, str]], ntz: bool = False) -> str | None:
    """The Delta schema string of nullable `columns`, as Delta writes it; None if a type is
    not one `delta_type` knows."""
    fields = []
    for name, sql_type in columns:
        t = delta_type(sql_type, ntz)
        if t is None:
            return None
        fields.append({"name": name, "type": t, "nullable": True, "metadata": {}})
    return json.dumps({"type": "struct", "fields": fields})


def configuration(plain: PlainCreate, defaults: Mapping[str, str]) -> dict[str, str] | None:
    """The new table's properties as Delta sets them (the session's defaults, then the
    statement's), or None where one of them would take the table past protocol 1/2."""
    props = {**defaults, **dict(plain.properties)}
    for key, value in props.items():
        if key.startswith("parquet."):
            continue
        if key not in _SAME_PROTOCOL:
            return None
        wanted = _SAME_PROTOCOL[key]
        if wanted is not None and value.lower() != wanted:
            return None
    return props


_defaults: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def session_defaults(spark: SparkSession) -> dict[str, str]:
    """`delta.<key>` for each `spark.databricks.delta.properties.defaults.<key>` the session
    has: what Delta adds to every table it creates. Static settings: read once a session."""
    try:
        return _defaults[spark]
    except (KeyError, TypeError):
        pass
    found = {
        "delta." + k.removeprefix(DEFAULTS_PREFIX): v
        for k, v in spark.conf.getAll.items()
        if k.startswith(DEFAULTS_PREFIX)
    }
    with contextlib.suppress(TypeError):  # a session that takes no weak reference
        _defaults[spark] = found
    return found


def try_create(spark: SparkSession, location: str, plain: PlainCreate) -> bool:
    """Create the table at `location` (where no table is) as Delta's CREATE would, through
    delta-rs or (TIMESTAMP_NTZ, a local table) by writing its commit; whether it did. False
    leaves no commit, for the statement: a table that needs it, or a store not reached."""
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import CommitProperties

    if is_connect(spark) or plain.cluster_by:
        # The server writes the warehouse (docs/operations.md, Spark Connect); a clustered
        # table's first commit has what delta-rs does not write.
        return False
    config = configuration(plain, session_defaults(spark))
    if config is None:
        return False
    # The marker a commit made here would carry (`conf.commit_marker`): a target created by
    # an upstream CREATE TABLE is applied up to it from its first version on.
    marker = spark.conf.get(MARKER_COMMIT_CONF, None)
    schema = schema_json(plain.columns)
    if schema is None:
        with_ntz = schema_json(plain.columns, ntz=True)
        if with_ntz is None or not is_local(location):
            return False
        return _write_first_commit(
            location, with_ntz, plain.description, config, marker, plain.partition_by
        )
    uri = lake.table_uri(location)
    try:
        DeltaTable.create(
            uri,
            Schema.from_json(schema),
            mode="error",
            description=plain.description,
            partition_by=list(plain.partition_by) or None,
            configuration=config,
            storage_options=lake.storage_options(uri) or None,
            commit_properties=(
                CommitProperties(custom_metadata={"userMetadata": marker}) if marker else None
            ),
            # Delta's own keys and Parquet's writer options (`parquet.*`), which delta-rs
            # does not know but keeps, as Delta does.
            raise_if_key_not_exists=False,
        )
    except Exception:  # noqa: BLE001 - the statement then creates it, or says why not
        return False
    return True


def _write_first_commit(
    location: str,
    schema: str,
    description: str | None,
    config: dict[str, str],
    marker: str | None,
    partition_by: tuple[str, ...] = (),
) -> bool:
    """Version 0 of a local table, as Delta's CREATE TABLE writes it: put in place whole
    (a link fails where the commit exists: another create won), or not at all."""
    now = int(time.time() * 1000)
    metadata: dict = {"id": str(uuid.uuid4())}
    if description:
        metadata["description"] = description
    metadata.update(
        format={"provider": "parquet", "options": {}},
        schemaString=schema,
        partitionColumns=list(partition_by),
        configuration=config,
        createdTime=now,
    )
    info = {
        "timestamp": now,
        "operation": "CREATE TABLE",
        "operationParameters": {
            "partitionBy": json.dumps(list(partition_by)),
            "clusterBy": "[]",
            **({"description": description} if description else {}),
            "isManaged": "false",
            "properties": json.dumps(config),
        },
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": f"ticdc-sync/{__version__}",
        "txnId": str(uuid.uuid4()),
        **({"userMetadata": marker} if marker else {}),
    }
    actions = [{"commitInfo": info}, {"metaData": metadata}, {"protocol": NTZ_PROTOCOL}]
    log = local_path(location) / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    temp = log / f".{0:020d}.json.{uuid.uuid4().hex}.tmp"
    temp.write_text("".join(json.dumps(a) + "\n" for a in actions), encoding="utf-8")
    try:
        os.link(temp, log / f"{0:020d}.json")
    except OSError:  # the commit exists (another create won), or no links here: the statement
        return False
    finally:
        temp.unlink()
    return True
