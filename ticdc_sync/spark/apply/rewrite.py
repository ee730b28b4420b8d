"""Land one row segment of a small target without a MERGE: the table's rows and the segment's
changes merged in ONE Spark write of new Parquet files into the table's folder, then ONE
commit (delta-rs) that removes the old files, adds the new ones and carries the marker.

Why: a small target's MERGE costs about five Spark jobs whatever its size (Delta's log
replay, finding the touched files, the write, its statistics), the fixed cost that bounded
how many tables a core can follow (benchmarks/README.md). Here the table's files are listed
by delta-rs from its log and read by Spark as plain Parquet, so Spark replays no Delta log:
one job writes, and the commit is a JSON file. The plan chose this path for the segment
(`plan.write_path`: a small target whose table features delta-rs keeps); the rules that
merge are the MERGE's own, as a DataFrame (`merge_rules`).

Exactly once, as a MERGE: new files go to a folder of their own (`rs-<version>-<id>/`),
invisible to every reader until the commit names them; the commit is the table's next
version (`_delta_log/<version>.json`, put only if absent), made after the run lease is
checked, and carries the new marker, so a run killed before it leaves the table and its
marker as they were, and the next run redoes the segment. A folder no commit names (a run
killed between its write and its commit) is deleted by the next run that rewrites the
target, before it writes (`remove_orphans`): never by age, so never a folder whose commit
is still coming.

Must not: decide which path a segment takes, or touch a table with a feature delta-rs does
not keep (the plan sent it to the MERGE).
"""

from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    PostCommitHookProperties,
    RemoveAction,
)
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from ticdc_sync.core.crash_points import reach
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.lake import is_local, spark_type, storage_options, table_uri
from ticdc_sync.core.sqlgen import quote
from ticdc_sync.core.window import Marker
from ticdc_sync.plan.model import Rows
from ticdc_sync.spark.apply.merge_rules import DELETED, INSERTED, UPDATED, merged
from ticdc_sync.spark.apply.rows import SMALL_SOURCE_ROWS
from ticdc_sync.spark.runtime import raised
from ticdc_sync.spark.runtime.conf import INTERPRETED, before_commit, session_confs

if TYPE_CHECKING:
    from ticdc_sync.spark.apply.rows import TargetWriter

# The folders a rewrite writes into: `rs-<the version its commit takes>-<random id>`.
FOLDER = re.compile(r"^rs-(\d{20})-([0-9a-f]{32})$")
# How many versions past its own a folder's commit may land: delta-rs retries a commit
# that lost its version to another writer's this many times.
COMMIT_RETRIES = 8
# Whether the MERGE-free plan runs adaptively: a target this small is one partition, and
# every adaptive re-optimization would be a job of its own (benchmarks/README.md).
ADAPTIVE = "spark.sql.adaptive.enabled"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Timestamps as every reader reads them (the Parquet standard type; Spark's default is
# the legacy INT96).
TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"


@dataclass(frozen=True)
class _Column:
    name: str  # logical: what Spark, SQL and the rules see
    physical: str  # in the Parquet files (column mapping by name keeps its own)
    type: str  # Spark simpleString


class Table:
    """A target's Delta table as delta-rs loads it: its version, columns and files."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.uri = table_uri(location)
        self.options = storage_options(self.uri)
        self.rs = DeltaTable(self.uri, storage_options=self.options)
        schema = json.loads(self.rs.schema().to_json())
        self.columns = [
            _Column(
                f["name"],
                (f.get("metadata") or {}).get("delta.columnMapping.physicalName", f["name"]),
                spark_type(f["type"]),
            )
            for f in schema["fields"]
        ]

    @property
    def version(self) -> int:
        return self.rs.version()

    def files(self) -> list[tuple[str, int]]:
        """(path relative to the table, bytes) of each live data file."""
        adds = pa.table(self.rs.get_add_actions(flatten=True)).to_pydict()
        return sorted(zip(adds["path"], adds["size_bytes"], strict=True))

    def read(self, spark) -> DataFrame:
        """The table's rows as Spark reads its files as plain Parquet (logical names)."""
        ddl = ", ".join(f"{quote(c.physical)} {c.type}" for c in self.columns)
        paths = [self.file_location(p) for p, _ in self.files()]
        frame = spark.read.schema(ddl).parquet(*paths) if paths else spark.createDataFrame([], ddl)
        return frame.select(*[F.col(quote(c.physical)).alias(c.name) for c in self.columns])

    def file_location(self, path: str) -> str:
        """Where Spark finds a file the log names (relative paths are URI-encoded)."""
        return f"{self.location.rstrip('/')}/{unquote(path)}"

    def store(self) -> pafs.FileSystem:
        """The table's folder as a file system (paths relative to it), through delta-rs's
        own object-store layer: the same location means the same files."""
        return pafs.PyFileSystem(DeltaStorageHandler(self.uri, dict(self.options)))

    def delete(self, folder: str) -> None:
        """Delete a folder of the table and the files in it."""
        self.store().delete_dir(folder)
        if is_local(self.uri):
            # An object store has no folders; a local one keeps the empty one.
            shutil.rmtree(Path(self.uri) / folder, ignore_errors=True)

    def replace_files(
        self,
        old: list[tuple[str, int]],
        new: list[tuple[str, int, int]],
        marker: Marker,
        point: str,
        target: str,
    ) -> None:
        """One commit that removes the files `old` (path, bytes) and adds `new` (path,
        bytes, rows), with `marker`: crash point `point` of `target`."""
        now = int(time.time() * 1000)
        removes = [RemoveAction(p, True, now, size, {}) for p, size in old]
        adds = [AddAction(p, size, {}, now, True, _stats(rows)) for p, size, rows in new]
        self.commit([*removes, *adds], marker, point, target)

    def record_marker(self, marker: Marker, target: str) -> None:
        """Commit `marker` alone unless the newest commit carries it (a segment that changed
        nothing: the target is up to date, and says so)."""
        if _marker_of_newest(self) != marker:
            self.commit([], marker, "marker", target)

    def commit(self, actions: list, marker: Marker, point: str, target: str) -> None:
        before_commit(point, target=target)
        self.rs.create_write_transaction(
            actions,
            "append",
            self.rs.schema(),
            commit_properties=CommitProperties(
                custom_metadata={"userMetadata": marker.to_json()},
                max_commit_retries=COMMIT_RETRIES,
            ),
            # Log files are never deleted by a commit: a read as of an older TSO needs them
            # (`staging.retention` and Delta's own log retention decide, not this writer).
            post_commithook_properties=PostCommitHookProperties(
                create_checkpoint=True, cleanup_expired_logs=False
            ),
        )


def remove_orphans(table: Table) -> list[str]:
    """Delete the rewrite folders no commit names (written by a run that died before its
    commit); their names. A folder is named by the version its commit takes, so it is
    committed when that version or one of the few after it (retries) adds its files."""
    store = table.store()
    found = [
        i.path
        for i in store.get_file_info(pafs.FileSelector("", allow_not_found=True))
        if i.type == pafs.FileType.Directory and FOLDER.match(i.path.rsplit("/", 1)[-1])
    ]
    newest = table.version
    removed = []
    for folder in sorted(found):
        name = folder.rsplit("/", 1)[-1]
        version = int(FOLDER.match(name).group(1))  # type: ignore[union-attr]
        if not any(
            name in _commit_text(store, v)
            for v in range(version, min(newest, version + COMMIT_RETRIES) + 1)
        ):
            table.delete(folder)
            removed.append(name)
    return removed


def _commit_text(store: pafs.FileSystem, version: int) -> str:
    try:
        with store.open_input_stream(f"_delta_log/{version:020d}.json") as f:
            return f.read().decode("utf-8", "replace")
    except (FileNotFoundError, OSError):
        return ""


class Rewriter:
    """The rewrite path of one target's apply (one per `TargetWriter`)."""

    def __init__(self, writer: TargetWriter, checked: set[str]) -> None:
        self.w = writer
        self.checked = checked
        self.merged_instead: set[str] = set()

    def remove_orphans_once(self) -> None:
        """Remove the files a killed run wrote into the target and never committed, the
        first time this run applies the target's rows (whichever path they take: a target
        can grow past `rewrite_below` after a killed rewrite). Before any write of this
        run, under its lease: no other run's commit can still be coming."""
        w = self.w
        if w.location in self.checked or not _delta_rs_opens(w.location):
            return
        uri = table_uri(w.location)
        if DeltaTable.is_deltatable(uri, storage_options(uri)):
            removed = remove_orphans(Table(w.location))
            if removed:
                w.out(
                    f"  {w.name}: removed {len(removed)} folder(s) of files a killed run "
                    "wrote and never committed"
                )
        self.checked.add(w.location)

    def can_commit(self) -> bool:
        """Whether delta-rs can commit to the target's folder. A folder named with a `%`
        (a target left at an earlier version's %-escaped folder name, `legacy_path_segment`)
        cannot: delta-rs decodes the escape in a path and writes its log beside the table,
        file URI or not. Such a target's segments take the MERGE, which lands the same rows;
        said once per apply of the target."""
        w = self.w
        if _delta_rs_opens(w.location):
            return True
        if w.location not in self.merged_instead:
            self.merged_instead.add(w.location)
            w.out(f"  {w.name}: its folder name holds a '%'; its rows take the MERGE path")
        return False

    def segment(self, marker: Marker, step: Rows) -> Marker:
        """Land row segment `step` in one write and one commit; the target's new marker."""
        w = self.w
        try:
            table = Table(w.location)
        except Exception as e:  # noqa: BLE001 - delta-rs: no table yet
            if not DeltaTable.is_deltatable(
                table_uri(w.location), storage_options(table_uri(w.location))
            ):
                return marker  # the DDL that creates this target comes later in the window
            raise UserError(f"target {w.name}: delta-rs cannot load it: {e}") from e
        own = w.own_columns()
        target_cols = [(c.name, c.type) for c in table.columns if c.name not in own]
        changes = w.changes(step, target_cols)
        if changes is None:
            return marker
        src, keys = changes
        new_marker = Marker(step.hi, marker.ddl_ts, marker.ddl_part, marker.ddl_parts)
        counts = Observation()
        rows = merged(
            table.read(w.spark), src, w.plan.mode, keys, [n for n, _ in target_cols], counts
        )
        out = rows.select(
            *[F.col(quote(c.name)).cast(c.type).alias(c.physical) for c in table.columns]
        )
        folder = f"rs-{table.version + 1:020d}-{uuid.uuid4().hex}"
        where = f"{w.location.rstrip('/')}/{folder}"
        try:
            small = w.source_rows_staged() <= SMALL_SOURCE_ROWS
            with session_confs(w.spark, _conf(small)):
                # A small segment into a small table: one file (one read for every reader
                # after). A large one (a catch-up into a table that was small when
                # planned) keeps Spark's adaptive partitions, so its cores share the work.
                (out.coalesce(1) if small else out).write.parquet(where)
            reach("rewrite.files", target=w.name, partial_in=where)
            seen = counts.get
            changed = any(int(seen[k] or 0) for k in (INSERTED, UPDATED, DELETED))
            if not changed:
                # Nothing changed (replays only): keep the files, record the marker.
                table.delete(folder)
                table.record_marker(new_marker, w.name)
                w.result.merges += 1  # a segment landed, as a MERGE of nothing counts
                return new_marker
            written = [(f"{folder}/{n}", size, rows) for n, size, rows in _written(table, folder)]
            table.replace_files(table.files(), written, new_marker, "rewrite.commit", w.name)
        except Exception as e:  # noqa: BLE001 - surface raise_error text from the JVM
            # Not committed: its files go now (or, if this fails too, with the next run).
            with suppress(Exception):
                table.delete(folder)
            raise (raised.user_error(e) or e) from None
        w.result.inserted += int(seen[INSERTED] or 0)
        w.result.updated += int(seen[UPDATED] or 0)
        w.result.deleted += int(seen[DELETED] or 0)
        w.result.merges += 1
        return new_marker


def _delta_rs_opens(location: str) -> bool:
    """Whether delta-rs opens the table at `location` where it is: not a folder named with a
    `%`, whose escape delta-rs decodes (`Rewriter.can_commit`)."""
    return "%" not in table_uri(location)


def _conf(small: bool) -> dict[str, str]:
    """The write's session settings: for a segment whose source never staged more than
    SMALL_SOURCE_ROWS row changes, one partition, no adaptive re-planning (each would be a
    job of its own) and no code generation (`rows._interpreted_conf`)."""
    if not small:
        return {TIMESTAMP_TYPE: "TIMESTAMP_MICROS"}
    return {
        ADAPTIVE: "false",
        SHUFFLE_PARTITIONS: "1",
        TIMESTAMP_TYPE: "TIMESTAMP_MICROS",
        **INTERPRETED,
    }


def _written(table: Table, folder: str) -> Iterator[tuple[str, int, int]]:
    """(file name, bytes, rows) of each Parquet file the write left in `folder`."""
    import pyarrow.parquet as pq

    store = table.store()
    for info in sorted(store.get_file_info(pafs.FileSelector(folder)), key=lambda i: i.path):
        name = info.path.rsplit("/", 1)[-1]
        if not name.endswith(".parquet"):
            continue  # _SUCCESS and checksum files
        with store.open_input_file(info.path) as f:
            rows = pq.ParquetFile(f).metadata.num_rows
        yield name, int(info.size), rows


def _stats(rows: int) -> str:
    # The row count lets Delta answer a count from the log; no column bounds (nothing
    # to skip in a table of one file).
    return json.dumps({"numRecords": rows})


def _marker_of_newest(table: Table) -> Marker | None:
    for info in table.rs.history(1):
        return Marker.from_user_metadata(info.get("userMetadata"))
    return None
