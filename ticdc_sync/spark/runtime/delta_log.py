"""What a Delta table's log says: whether it exists, its newest ticdc-sync marker, whether it has
data files, its columns, its newest version and that commit's information (read from
`_delta_log` files directly where that saves a Spark job or a query plan). Reads only;
never writes or removes a file (table_create.py removes a log without a commit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.core.window import Marker
from ticdc_sync.spark.runtime.remote import is_connect
from ticdc_sync.warehouse.locations import is_local, local_path

T = TypeVar("T")


def target_marker(spark: SparkSession, location: str) -> Marker | None:
    """The marker of the latest ticdc-sync commit of a target, or None if it has none."""
    return latest_user_metadata(spark, location, Marker.from_user_metadata)


def latest_user_metadata(spark: SparkSession, location: str, parse: Callable[[str | None], T]) -> T:
    """`parse` of the newest commit's userMetadata that parses to something (or None)."""
    read, found = _local_user_metadata(location, parse)
    if read:
        return found  # type: ignore[return-value]
    # The newest commits first, widening the look-back only while none parses (commits
    # by others, e.g. OPTIMIZE, carry none): the history grows with every run.
    limit = 4
    while True:
        # The command's rows are collected as they are and ordered here: a projection or
        # sort in Spark ran three small jobs per call.
        rows = spark.sql(f"DESCRIBE HISTORY {table_ref(location)} LIMIT {limit}").collect()
        for r in sorted(rows, key=lambda r: r["version"], reverse=True):
            found = parse(r["userMetadata"])
            if found is not None:
                return found
        if len(rows) < limit:
            return None  # type: ignore[return-value]
        limit *= 4


def _local_user_metadata(location: str, parse: Callable[[str | None], T]) -> tuple[bool, T | None]:
    """(True, what `latest_user_metadata` returns) read from a local table's commit files,
    newest first, without the JVM (DESCRIBE HISTORY is a Spark job, paid by every run's
    state read); (False, None) where they cannot tell it: a remote table, a log that
    cannot be listed, or a commit file a log cleanup has removed before one parsed."""
    newest = newest_version(location)
    if newest is None:
        return False, None
    log = local_path(location) / "_delta_log"
    for version in range(newest, -1, -1):
        try:
            text = (log / f"{version:020d}.json").read_text()
        except OSError:
            return False, None
        info = None
        for line in text.splitlines():
            if line.startswith('{"commitInfo"'):
                try:
                    info = json.loads(line).get("commitInfo")
                except ValueError:
                    return False, None
                break
        found = parse(info.get("userMetadata") if isinstance(info, dict) else None)
        if found is not None:
            return True, found
    return True, None


def table_exists(spark: SparkSession, location: str) -> bool:
    """Whether a table is at `location`: for a local one, a commit in its log (a run killed
    while creating it leaves a `_delta_log` folder without one, which Delta's own check
    takes for a table)."""
    found = has_commit(location)
    if found is not None:
        return found
    if is_connect(spark):
        # delta-spark's Python API needs Delta's own Connect plugin on a server: delta-rs.
        from ticdc_sync.core import lake

        return lake.exists(location)
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, location)


def has_data_files(spark: SparkSession, location: str) -> bool:
    """Whether the Delta table at `location` has data files in its latest version."""
    return data_size(spark, location)[0] > 0


def data_size(spark: SparkSession, location: str) -> tuple[int, int]:
    """(data files, bytes) of the latest version of the Delta table at `location`.

    A local table's newest version checksum (`_delta_log/<version>.crc`, whose `numFiles`
    and `tableSizeInBytes` the Delta protocol requires) answers without a Spark job; else
    `DESCRIBE DETAIL`, which rebuilds the snapshot's file list."""
    found = checksum_size(location)
    if found is not None:
        return found
    detail = spark.sql(f"DESCRIBE DETAIL {table_ref(location)}").collect()[0]
    return int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)


def checksum_num_files(location: str) -> int | None:
    """`numFiles` of the newest commit's version checksum, or None (`checksum_size`)."""
    found = checksum_size(location)
    return None if found is None else found[0]


def checksum_size(location: str) -> tuple[int, int] | None:
    """(`numFiles`, `tableSizeBytes`) of the newest commit's version checksum, or None
    where it cannot be read: a remote table, a version without a checksum, a file being
    written."""
    found = checksum_facts(location)
    return None if found is None else (found.files, found.size)


@dataclass(frozen=True)
class TableFacts:
    """A table's newest version as its version checksum states it."""

    files: int
    size: int
    # (name, Spark type as `DataType.simpleString`) of every column, in table order.
    columns: tuple[tuple[str, str], ...]
    # The table's properties (the metadata's `configuration`), by key.
    properties: tuple[tuple[str, str], ...] = ()


def checksum_facts(location: str) -> TableFacts | None:
    """The data files, bytes and columns of a local table's newest version, from that
    version's checksum (`_delta_log/<version>.crc`: `numFiles`, `tableSizeBytes` and
    `metadata` are required fields of it in the Delta protocol), or a version 0 without
    one from its commit, without the JVM; None where it cannot be read (a remote table, no
    table, a later version without a checksum, a file being written): ask Delta then. The
    columns are the metadata's schema, which is what a read of the table would show."""
    found = _newest_log_file(location, ".crc")
    if found is None:
        return _created_facts(location)
    try:
        crc = json.loads(found[1])
        return _facts(crc["metadata"], int(crc["numFiles"]), int(crc["tableSizeBytes"]))
    except (ValueError, KeyError, TypeError):
        return None


def _facts(metadata: dict, files: int, size: int) -> TableFacts:
    schema = StructType.fromJson(json.loads(metadata["schemaString"]))
    columns = tuple((f.name, f.dataType.simpleString()) for f in schema.fields)
    properties = tuple(sorted((metadata.get("configuration") or {}).items()))
    return TableFacts(files, size, columns, properties)


def _created_facts(location: str) -> TableFacts | None:
    """The facts of a table whose only commit is its creation without a checksum (delta-rs
    writes none: `rs_create`): that commit's metadata, and the files it adds (none)."""
    found = _newest_log_file(location, ".json")
    if found is None or found[0] != 0:
        return None
    metadata, files, size = None, 0, 0
    try:
        for line in found[1].splitlines():
            action = json.loads(line) if line.strip() else {}
            if "metaData" in action:
                metadata = action["metaData"]
            elif "add" in action:
                files, size = files + 1, size + int(action["add"]["size"])
        return _facts(metadata, files, size) if metadata is not None else None
    except (ValueError, KeyError, TypeError):
        return None


def newest_version(location: str) -> int | None:
    """The version of a local table's newest commit file, or None (a remote table, no
    commit yet, a log that cannot be listed)."""
    if not is_local(location):
        return None
    try:
        log = local_path(location) / "_delta_log"
        versions = [int(f.name[:20]) for f in log.iterdir() if _is_commit_file(f.name)]
    except OSError:
        return None
    return max(versions, default=None)


def newest_commit_info(location: str) -> dict | None:
    """The `commitInfo` action of a local table's newest commit (`operation`,
    `operationMetrics` with string values, `userMetadata`, ...), or None where it cannot be
    read without Spark: a remote table, no commit, a commit without one. What `DESCRIBE
    HISTORY ... LIMIT 1` shows, without its job."""
    found = _newest_log_file(location, ".json")
    if found is None:
        return None
    for line in found[1].splitlines():
        try:
            action = json.loads(line)
        except ValueError:
            return None
        if isinstance(action, dict) and isinstance(action.get("commitInfo"), dict):
            return action["commitInfo"]
    return None


def has_commit(location: str) -> bool | None:
    """Whether a local table has a commit (a table exists there): a commit file, or a
    checkpoint (whose older commits a log cleanup may have removed); None for a remote one."""
    if not is_local(location):
        return None
    try:
        names = [f.name for f in (local_path(location) / "_delta_log").iterdir()]
    except OSError:
        return False
    return any(is_log_entry(n) for n in names)


def is_log_entry(name: str) -> bool:
    """A file of `_delta_log` that makes a table: a commit, a checkpoint (whose older
    commits a log cleanup may have removed), `_last_checkpoint`."""
    return (
        _is_commit_file(name)
        or (name[:20].isdigit() and ".checkpoint" in name)
        or name == "_last_checkpoint"
    )


def _newest_log_file(location: str, suffix: str) -> tuple[int, bytes] | None:
    """(version, bytes of `_delta_log/<version><suffix>`) for a local table's newest commit,
    or None: a remote table, no commit yet, a file that cannot be read."""
    version = newest_version(location)
    if version is None:
        return None
    try:
        return version, (
            local_path(location) / "_delta_log" / f"{version:020d}{suffix}"
        ).read_bytes()
    except OSError:
        return None


def _is_commit_file(name: str) -> bool:
    return len(name) == 25 and name.endswith(".json") and name[:20].isdigit()
