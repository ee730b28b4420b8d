"""Create a Delta table where none is: remove what a create killed before its first commit
left (a `_delta_log` without a commit, which is no table), issue the CREATE (or have the
commit it would write written without it, `rs_create`), and confirm that a commit landed.
Issues no statement but the caller's CREATE; never removes a folder that holds a commit, a
checkpoint or a file under `_commits/`.

Why the confirmation: Delta's CREATE TABLE IF NOT EXISTS of a path table does nothing when
the path exists and lists anything at all (DeltaCatalog.tableExists is `fs.exists(path) &&
fs.listStatus(path).nonEmpty`), not only when a table is there. A folder left with such an
entry would make every later run fail on a table that was never created; this module
makes that an error naming the folder instead.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ticdc_sync.core.errors import TicdcSyncError
from ticdc_sync.spark.runtime import rs_create
from ticdc_sync.spark.runtime.delta_log import has_commit, is_log_entry
from ticdc_sync.spark.runtime.remote import is_connect
from ticdc_sync.spark.runtime.rs_create import PlainCreate
from ticdc_sync.warehouse.locations import is_local, local_path

# An object store's listing may still show a folder marker just deleted (S3Proxy's
# filesystem store lists an emptied folder for a moment): the CREATE waits that long, and
# is tried again that often, before the folder is reported.
SETTLE_TRIES = 20
SETTLE_PAUSE_S = 0.25
CREATE_TRIES = 3


@dataclass(frozen=True)
class LogListing:
    """What a table's folder holds, as far as a create needs to know."""

    committed: bool  # a commit, a checkpoint or a file under `_commits/`
    log_files: tuple[str, ...]  # every file under `_delta_log/`, relative to it
    entries: tuple[str, ...]  # the names directly in the table's folder


def create_table(
    spark: SparkSession, location: str, create_sql: str, plain: PlainCreate | None = None
) -> None:
    """Run `create_sql` (a CREATE TABLE IF NOT EXISTS of `location`) unless a table is
    there, after clearing a log without a commit; raise a TicdcSyncError naming the folder
    when no commit landed. `plain`: what the statement makes, for its commit to be written
    without it where that makes the same table (`rs_create`)."""
    if clear_uncommitted_log(spark, location):
        return
    # Only into an empty folder: one that holds files is the statement's, which reports
    # them below (delta-rs would make a table beside them).
    if (
        plain is not None
        and not listing(spark, location).entries
        and rs_create.try_create(spark, location, plain)
        and listing(spark, location).committed
    ):
        return
    for _ in range(CREATE_TRIES):
        spark.sql(create_sql)
        found = listing(spark, location)
        if found.committed:
            return
        # Nothing committed: the statement took the folder for a table. Clear again (which
        # waits for the store to list it settled) and try once more.
        clear_uncommitted_log(spark, location)
    found = listing(spark, location)
    shown = ", ".join(found.entries[:5]) + (", ..." if len(found.entries) > 5 else "")
    raise TicdcSyncError(
        f"Delta did not create the table at {location}: its folder is not empty "
        f"({shown or 'an entry the store lists'}) but holds no Delta commit, and CREATE TABLE "
        "IF NOT EXISTS takes such a folder for a table. Nothing in it is a table (a create or "
        "a first write killed before its commit leaves such files): remove the folder and "
        "run again."
    )


def clear_uncommitted_log(spark: SparkSession, location: str) -> bool:
    """Whether a table is at `location` (a commit in its log); if none, remove a
    `_delta_log` left without one: locally the folder; on an object store its files and
    the folder markers Delta's `mkdirs` wrote (`_delta_log/`, `_delta_log/_commits/`),
    deepest first (a store kept on a file system cannot remove a folder before its
    contents, and a bulk delete does not keep their order)."""
    if is_local(location):
        if has_commit(location):
            return True
        log = local_path(location) / "_delta_log"
        if log.is_dir():
            shutil.rmtree(log)
        return False
    found = listing(spark, location)
    if found.committed:
        return True
    if "_delta_log" not in found.entries and not found.log_files:
        return False
    if is_connect(spark):
        _clear_remote_log(location, found)
    else:
        _clear_hadoop_log(spark, location)
    _settle(spark, location)
    return False


def listing(spark: SparkSession, location: str) -> LogListing:
    """What `location`'s folder and its `_delta_log` hold now."""
    if is_local(location):
        folder = local_path(location)
        log = folder / "_delta_log"
        files = (
            [str(p.relative_to(log)) for p in log.rglob("*") if p.is_file()] if log.is_dir() else []
        )
        entries = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        return _listing(files, entries)
    if is_connect(spark):
        return _remote_listing(location)
    return _hadoop_listing(spark, location)


def _listing(log_files: list[str], entries: list[str]) -> LogListing:
    committed = any(
        is_log_entry(f.rsplit("/", 1)[-1]) or f.startswith("_commits/") for f in log_files
    )
    return LogListing(committed, tuple(sorted(log_files)), tuple(sorted(entries)))


def _settle(spark: SparkSession, location: str) -> bool:
    """Wait, a bounded time, until the folder lists no `_delta_log`; whether it did."""
    for _ in range(SETTLE_TRIES):
        found = listing(spark, location)
        if "_delta_log" not in found.entries and not found.log_files:
            return True
        time.sleep(SETTLE_PAUSE_S)
    return False


def _hadoop_fs(spark: SparkSession, location: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/"))
    return jvm, path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def _hadoop_listing(spark: SparkSession, location: str) -> LogListing:
    jvm, folder, fs = _hadoop_fs(spark, location)
    if not fs.exists(folder):
        return _listing([], [])
    entries = [s.getPath().getName() for s in fs.listStatus(folder)]
    log = jvm.org.apache.hadoop.fs.Path(folder, "_delta_log")
    files: list[str] = []
    if "_delta_log" in entries:
        prefix = len(str(fs.makeQualified(log))) + 1
        it = fs.listFiles(log, True)  # files only: folder markers are not among them
        while it.hasNext():
            files.append(str(it.next().getPath())[prefix:])
            if _listing(files[-1:], []).committed:
                break  # a table: the rest of a long log need not be listed
    return _listing(files, entries)


def _clear_hadoop_log(spark: SparkSession, location: str) -> None:
    jvm, folder, fs = _hadoop_fs(spark, location)
    log = jvm.org.apache.hadoop.fs.Path(folder, "_delta_log")
    folders, todo = [], [log]
    while todo:
        current = todo.pop()
        folders.append(current)
        with contextlib.suppress(Exception):  # gone meanwhile: nothing to walk
            todo.extend(s.getPath() for s in fs.listStatus(current) if s.isDirectory())
    for f in sorted(folders, key=lambda p: p.depth(), reverse=True):
        fs.delete(f, True)


def _remote_fs(location: str):
    """delta-rs's object store for `location` (over Spark Connect, whose client has no
    Hadoop file system)."""
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    from ticdc_sync.core.lake import storage_options, table_uri

    uri = table_uri(location)
    return pafs, pafs.PyFileSystem(DeltaStorageHandler(uri, storage_options(uri)))


def _remote_listing(location: str) -> LogListing:
    pafs, fs = _remote_fs(location)
    top = fs.get_file_info(pafs.FileSelector("", allow_not_found=True))
    entries = [i.base_name for i in top if i.base_name]
    infos = fs.get_file_info(pafs.FileSelector("_delta_log", recursive=True, allow_not_found=True))
    # The folder markers are listed as files without their trailing slash: not log files.
    markers = {"_delta_log", "_delta_log/_commits"}
    files = [
        i.path.removeprefix("_delta_log/") for i in infos if i.is_file and i.path not in markers
    ]
    return _listing(files, entries)


def _clear_remote_log(location: str, found: LogListing) -> None:
    """The log's files. Not the folder markers: delta-rs's store drops a key's trailing
    slash, so the client cannot name them; a folder still listed for them makes
    `create_table` report it."""
    _, fs = _remote_fs(location)
    for name in found.log_files:
        with contextlib.suppress(OSError, FileNotFoundError):
            fs.delete_file(f"_delta_log/{name}")
