"""Read Delta tables without a JVM: a table's version, commit userMetadata, schema, protocol
and properties, and the rows of small tables, from a local path or an object-store URI.

This is how `plan` and `status` learn the engine's state from the warehouse itself
(DESIGN.md §1: the state tables are the only truth). It reads through delta-rs (the
`deltalake` package). delta-rs loads the metadata of any table whose features it knows,
but reads the rows of fewer (it refuses typeWidening, for one). Where delta-rs refuses to load a table at all (a table feature newer
than it), the metadata answers come from reading `_delta_log` directly (`DeltaLog`): the
newest checkpoint plus the JSON commits after it, through delta-rs's own object-store
layer, so the same storage options reach the same stores.

Locations: a local path, a `file:` URI, `s3://` or `s3a://` (Hadoop's spelling, read as
`s3://`). Object-store credentials come from the environment only (`storage_options`),
never from project files.

Must not: import pyspark/py4j, write anything, or hold rows of large tables (`read` is
for the small state tables and the DDL rows of the staged events).

It stays one module: the delta-rs path and the `_delta_log` fallback answer the same
questions behind one `LakeTable`, which picks between them per table.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ticdc_sync.core.errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, QueryBuilder
    from deltalake.exceptions import DeltaError, TableNotFoundError
    from deltalake.fs import DeltaStorageHandler

    DELTALAKE_VERSION: str

T = TypeVar("T")


def _load_rs() -> None:
    """Import delta-rs and pyarrow (about 0.25 s of CPU, numpy with them) on first use, as
    this module's globals: `plan` and `status` of a warehouse with no table yet, and
    `validate`, never need them. Every path that touches a table calls this first."""
    global pa, pafs, pq, DeltaTable, QueryBuilder, DELTALAKE_VERSION
    global DeltaError, TableNotFoundError, DeltaStorageHandler
    if "DeltaTable" in globals():
        return
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401  (pa.compute)
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, QueryBuilder
    from deltalake import __version__ as DELTALAKE_VERSION
    from deltalake.exceptions import DeltaError, TableNotFoundError
    from deltalake.fs import DeltaStorageHandler


# Environment variables passed to delta-rs as storage options for `s3://` locations
# (the names delta-rs and the AWS tools share).
S3_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION")
S3_ENDPOINT_ENV = "AWS_ENDPOINT_URL"
# Table properties `protocol` reports: Delta's own and the ones ticdc-sync sets.
PROPERTY_PREFIXES = ("delta.", "ticdc_sync.")

# Delta type names (the protocol's schema JSON) that Spark's simpleString spells otherwise.
_SPARK_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
# Protocol versions below 7/3 imply these features (Delta protocol, "Table Features":
# legacy versions); Spark's DESCRIBE DETAIL lists them as the table's features.
_LEGACY_WRITER_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
_LEGACY_READER_FEATURES = {2: ("columnMapping",)}
_COMMIT = re.compile(r"^(\d{20})\.json$")
# Classic (`N.checkpoint.parquet`), multi-part (`N.checkpoint.I.P.parquet`) and V2
# (`N.checkpoint.<uuid>.json|parquet`) checkpoints (Delta protocol, "Checkpoints").
_CHECKPOINT = re.compile(
    r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10})|\.([0-9a-fA-F-]{36}))?\.(parquet|json)$"
)
# The domain of a clustered table's clustering columns (Delta protocol, "Clustered Table").
CLUSTERING_DOMAIN = "delta.clustering"
_OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in")

Filter = Sequence[tuple[str, str, Any]]


@dataclass(frozen=True)
class Protocol:
    """A table's protocol action and its `delta.*` / `ticdc_sync.*` properties.

    `reader_features` / `writer_features` are the protocol's explicit lists (empty below
    reader 3 / writer 7); `table_features()` adds what the legacy versions imply, as
    Spark's DESCRIBE DETAIL shows them."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...]
    writer_features: tuple[str, ...]
    properties: dict[str, str] = field(default_factory=dict)
    # Every property of the table (a table entry's `properties` too) and its description.
    configuration: dict[str, str] = field(default_factory=dict)
    description: str | None = None

    def table_features(self) -> tuple[str, ...]:
        found = set(self.reader_features) | set(self.writer_features)
        if self.min_writer_version < 7:
            for v, names in _LEGACY_WRITER_FEATURES.items():
                if self.min_writer_version >= v:
                    found.update(names)
        if self.min_reader_version < 3:
            for v, names in _LEGACY_READER_FEATURES.items():
                if self.min_reader_version >= v:
                    found.update(names)
        return tuple(sorted(found))


def table_uri(location: str) -> str:
    """What delta-rs opens for a location: `s3a://` becomes `s3://` (one store, Hadoop's
    name for it), a `file:` URI or a relative path an absolute local path."""
    if location.startswith("s3a://"):
        return "s3://" + location.removeprefix("s3a://")
    if location.startswith("file:"):
        rest = location.removeprefix("file:")
        # file:///p and file://localhost/p name /p; file:/p (Spark's spelling) too.
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[rest.index("/") :] if "/" in rest else "/"
        return rest
    if "://" in location:
        return location
    return str(Path(location).absolute())


def is_local(uri: str) -> bool:
    return "://" not in uri


def storage_options(uri: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """delta-rs storage options for `uri`, from the environment (never from files).

    For `s3://`: the AWS_* credentials and region that are set, and `AWS_ENDPOINT_URL` for
    an S3-compatible server; an `http://` endpoint (a local server) is allowed plain HTTP,
    and any endpoint is addressed path-style (`<endpoint>/<bucket>/<key>`), which such
    servers expect. Other schemes get none: delta-rs reads its own environment there."""
    env = os.environ if env is None else env
    if not uri.startswith("s3://"):
        return {}
    opts = {k: env[k] for k in S3_ENV if env.get(k)}
    if "AWS_REGION" not in opts and env.get("AWS_DEFAULT_REGION"):
        opts["AWS_REGION"] = env["AWS_DEFAULT_REGION"]
    endpoint = env.get(S3_ENDPOINT_ENV)
    if endpoint:
        opts[S3_ENDPOINT_ENV] = endpoint
        opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if endpoint.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    return opts


def spark_type(t: Any) -> str:
    """Spark's simpleString of a type in the Delta protocol's schema JSON."""
    if isinstance(t, str):
        return _SPARK_NAMES.get(t, t)
    kind = t.get("type")
    if kind == "struct":
        return (
            "struct<" + ",".join(f"{f['name']}:{spark_type(f['type'])}" for f in t["fields"]) + ">"
        )
    if kind == "array":
        return f"array<{spark_type(t['elementType'])}>"
    if kind == "map":
        return f"map<{spark_type(t['keyType'])},{spark_type(t['valueType'])}>"
    raise ValueError(f"unknown Delta type {t!r}")


class LakeTable:
    """One Delta table, loaded once: every answer is as of the version it loaded first
    (`version`: that one; None: its newest).

    delta-rs loads it where it can (`read` needs that); otherwise the metadata comes from
    `DeltaLog`, and `read` says why it cannot read."""

    def __init__(
        self, location: str, env: Mapping[str, str] | None = None, *, version: int | None = None
    ) -> None:
        self.location = location
        self.uri = table_uri(location)
        self.options = storage_options(self.uri, env)
        self._version = version
        self._table: DeltaTable | None = None
        self._log: DeltaLog | None = None
        self._refused: str | None = None  # why delta-rs did not load it

    # --- opening ------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether a Delta table is at the location (a commit in its `_delta_log`)."""
        if is_local(self.uri):
            try:
                os.stat(os.path.join(self.uri, "_delta_log"))
            except (FileNotFoundError, NotADirectoryError):
                return False  # no log, no table: asked without loading delta-rs
            except OSError:
                pass  # delta-rs says what is wrong
        _load_rs()
        try:
            return DeltaTable.is_deltatable(self.uri, storage_options=self.options)
        except (DeltaError, OSError) as e:
            raise self._error("cannot tell whether a Delta table is here", e) from e

    def _snapshot(self) -> _Snapshot:
        _load_rs()
        if self._table is not None:
            return _RsSnapshot(self._table)
        if self._log is not None:
            return self._log
        try:
            self._table = DeltaTable(self.uri, storage_options=self.options, version=self._version)
            return _RsSnapshot(self._table)
        except TableNotFoundError as e:
            raise UserError(
                f"{self.location}: no Delta table here ({_first_line(e)}) (hint: check the "
                "warehouse location in the profile; a table appears with the first "
                "`ticdc-sync run` that writes it)"
            ) from e
        except OSError as e:
            raise self._error("cannot read the table", e) from e
        except DeltaError as e:
            if self._version is not None:
                # `DeltaLog` reads the newest version only.
                raise self._error(f"cannot read version {self._version}", e) from e
            # delta-rs refuses tables with a feature it does not know; their log is
            # still plain JSON and Parquet.
            self._refused = _first_line(e)
        log = DeltaLog(self.uri, self.options)
        try:
            log.load()
        except (OSError, ValueError, KeyError) as e:
            raise self._error(f"delta-rs refused it ({self._refused}), and its log", e) from e
        self._log = log
        return log

    def _error(self, what: str, e: BaseException) -> UserError:
        hint = "check that the location exists and is readable"
        if not is_local(self.uri):
            hint += (
                f"; object-store credentials come from the environment ({', '.join(S3_ENV)}, "
                f"{S3_ENDPOINT_ENV} for an S3-compatible server)"
            )
        return UserError(f"{self.location}: {what}: {_first_line(e)} (hint: {hint})")

    # --- metadata -------------------------------------------------------------------

    def version(self) -> int:
        return self._snapshot().version()

    def protocol(self) -> Protocol:
        return self._snapshot().protocol()

    def data_bytes(self) -> int:
        """The bytes of the table's data files (the sum of its live `add` actions' sizes):
        what rewriting the table reads."""
        try:
            return self._snapshot().data_bytes()
        except (DeltaError, OSError, ValueError, KeyError) as e:
            raise self._error("cannot list its data files", e) from e

    def data_files(self) -> tuple[int, int] | None:
        """(data files, bytes) of the loaded version, from its live `add` actions, where
        delta-rs loads the table; None where it does not (ask Delta then)."""
        snapshot = self._snapshot()
        if not isinstance(snapshot, _RsSnapshot):
            return None
        try:
            adds = pa.table(snapshot.table.get_add_actions(flatten=True))
        except (DeltaError, OSError, ValueError, KeyError) as e:
            raise self._error("cannot list its data files", e) from e
        if not adds.num_rows:
            return 0, 0
        return adds.num_rows, int(pa.compute.sum(adds.column("size_bytes")).as_py() or 0)

    def schema(self) -> list[tuple[str, str]]:
        """(name, Spark simpleString type) of each column in table order; with column
        mapping, the logical names (the ones Spark shows)."""
        fields = json.loads(self._snapshot().schema_json())["fields"]
        return [(f["name"], spark_type(f["type"])) for f in fields]

    def layout(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(partition columns, clustering columns) of the table: its metaData's
        `partitionColumns`, and the `delta.clustering` domain's columns of a table with the
        `clustering` writer feature (delta-rs does not show domains: read from the log)."""
        snapshot = self._snapshot()
        parts = tuple(snapshot.partition_columns())
        if "clustering" not in snapshot.protocol().writer_features:
            return parts, ()
        log = snapshot if isinstance(snapshot, DeltaLog) else DeltaLog(self.uri, self.options)
        try:
            return parts, tuple(log.load().clustering_columns())
        except (OSError, ValueError, KeyError) as e:
            raise self._error("cannot read its clustering columns", e) from e

    def newest_user_metadata(self, parse: Callable[[str | None], T | None]) -> T | None:
        """`parse` of the newest commit's userMetadata that parses to something, or None.

        Commits by others (OPTIMIZE, VACUUM, a user's ALTER) carry none, so older commits
        are read, newest first, until one parses."""
        try:
            for info in self._snapshot().commit_infos():
                found = parse(info.get("userMetadata"))
                if found is not None:
                    return found
        except (DeltaError, OSError, ValueError, KeyError) as e:
            # ValueError/KeyError: a log file that is not Delta's JSON (read by DeltaLog).
            raise self._error("cannot read the commit history", e) from e
        return None

    def commits(self) -> list[dict[str, Any]]:
        """Every commit's commitInfo still in the log (with its `version`), newest first."""
        try:
            return list(self._snapshot().commit_infos())
        except (DeltaError, OSError, ValueError, KeyError) as e:
            raise self._error("cannot read the commit history", e) from e

    def oldest_reachable(self) -> int:
        """The oldest version time travel can still rebuild: version 0 while its commit is in
        the log, else the oldest checkpoint followed by every commit up to the newest (a
        log cleanup removes commits and checkpoints before one checkpoint)."""
        log = DeltaLog(self.uri, self.options).load()
        newest = log.version()
        if 0 in log.commits and all(v in log.commits for v in range(newest + 1)):
            return 0
        for c in sorted(log.checkpoints):
            if all(v in log.commits for v in range(c + 1, newest + 1)):
                return c
        return newest

    def files_present(self, version: int) -> bool:
        """Whether every data file of `version` is still there (VACUUM removes the files
        only old versions use)."""
        _load_rs()
        table = DeltaTable(self.uri, storage_options=self.options, version=version)
        fs = pafs.PyFileSystem(DeltaStorageHandler(self.uri, dict(self.options)))
        root = self.uri.rstrip("/")
        paths = [u[len(root) + 1 :] if u.startswith(root) else u for u in table.file_uris()]
        infos = fs.get_file_info(paths) if paths else []
        return all(i.type != pafs.FileType.NotFound for i in infos)

    def count(self, where: Filter = ()) -> int:
        """How many rows match every `(column, op, value)` in `where` (see `read`)."""
        self._snapshot()
        if self._table is None:
            raise self._unreadable(f"delta-rs {DELTALAKE_VERSION} cannot load it ({self._refused})")
        sql = "SELECT COUNT(*) AS n FROM t"
        if where:
            sql += " WHERE " + " AND ".join(_condition(c, op, v) for c, op, v in where)
        try:
            reader = QueryBuilder().register("t", self._table).execute(sql)
            table = pa.RecordBatchReader.from_stream(reader).read_all()
        except (DeltaError, OSError) as e:
            raise self._error("cannot count its rows", e) from e
        return int(table.column("n")[0].as_py())

    # --- rows ------------------------------------------------------------------------

    def read(
        self,
        columns: Sequence[str] | None = None,
        where: Filter = (),
        *,
        order_by: Sequence[str] = (),
        limit: int | None = None,
    ) -> pa.Table:
        """The rows matching every `(column, op, value)` in `where` (ops: = != < <= > >=,
        `in` / `not in` with a list), with `columns` (default all), in no particular
        order unless `order_by` (ascending, NULLs last) is given; at most `limit` of them.
        The filter is pushed down to delta-rs, which skips files and row groups by their
        statistics, and the first `limit` rows of an order are found there too, without
        bringing the rest into Python. Column mapping and deletion vectors are honoured."""
        self._snapshot()
        if self._table is None:
            raise self._unreadable(f"delta-rs {DELTALAKE_VERSION} cannot load it ({self._refused})")
        names = [n for n, _ in self.schema()]
        wanted = list(columns) if columns is not None else names
        for c in [*wanted, *(c for c, _, _ in where), *order_by]:
            if c not in names:
                raise UserError(
                    f"{self.location}: no column {c!r} (it has {', '.join(names)}) (hint: "
                    "check that the location holds the table ticdc-sync expects there)"
                )
        sql = f"SELECT {', '.join(_ident(c) for c in wanted)} FROM t"
        if where:
            sql += " WHERE " + " AND ".join(_condition(c, op, v) for c, op, v in where)
        if order_by:
            sql += " ORDER BY " + ", ".join(f"{_ident(c)} ASC NULLS LAST" for c in order_by)
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        try:
            reader = QueryBuilder().register("t", self._table).execute(sql)
            # Not `pa.table(reader)`: it first asks whether its argument is a pandas
            # DataFrame, importing pandas (~0.4 s) into every `plan` that reads state.
            table = pa.RecordBatchReader.from_stream(reader).read_all()
        except (DeltaError, OSError) as e:
            if "Unsupported" in str(e):
                raise self._unreadable(_first_line(e)) from e
            raise self._error("cannot read its rows", e) from e
        return _plain(table)

    def _unreadable(self, why: str) -> UserError:
        features = ", ".join(self.protocol().reader_features) or "none"
        return UserError(
            f"{self.location}: cannot read its rows without Spark: {why} (reader features: "
            f"{features}) (hint: read it with Spark, or drop the feature with ALTER TABLE "
            "... DROP FEATURE if the table's readers need it gone)"
        )


class _Snapshot:
    """What the metadata answers need from a loaded table (delta-rs or `DeltaLog`)."""

    def version(self) -> int:
        raise NotImplementedError

    def protocol(self) -> Protocol:
        raise NotImplementedError

    def schema_json(self) -> str:
        raise NotImplementedError

    def data_bytes(self) -> int:
        raise NotImplementedError

    def commit_infos(self) -> Iterator[dict[str, Any]]:
        """commitInfo of each commit, newest first."""
        raise NotImplementedError

    def partition_columns(self) -> list[str]:
        raise NotImplementedError


class _RsSnapshot(_Snapshot):
    def __init__(self, table: DeltaTable) -> None:
        self.table = table

    def version(self) -> int:
        return self.table.version()

    def protocol(self) -> Protocol:
        p = self.table.protocol()
        meta = self.table.metadata()
        return Protocol(
            min_reader_version=p.min_reader_version,
            min_writer_version=p.min_writer_version,
            reader_features=tuple(sorted(p.reader_features or ())),
            writer_features=tuple(sorted(p.writer_features or ())),
            properties=_properties(meta.configuration),
            configuration=dict(sorted(meta.configuration.items())),
            description=meta.description or None,
        )

    def schema_json(self) -> str:
        return self.table.schema().to_json()

    def partition_columns(self) -> list[str]:
        return list(self.table.metadata().partition_columns)

    def data_bytes(self) -> int:
        adds = pa.table(self.table.get_add_actions(flatten=True))
        return int(pa.compute.sum(adds.column("size_bytes")).as_py() or 0) if adds.num_rows else 0

    def commit_infos(self) -> Iterator[dict[str, Any]]:
        # The newest few first, widening the look-back only while needed: the history
        # grows with every run, and each commit read is a file read.
        seen = 0
        limit = 4
        while True:
            infos = self.table.history(limit)
            yield from infos[seen:]
            if len(infos) < limit:
                return
            seen = len(infos)
            limit *= 4


class DeltaLog(_Snapshot):
    """A table's metadata read from `_delta_log` itself: the newest complete checkpoint and
    the JSON commits after it (Delta protocol, "Delta Log Entries" and "Checkpoints").

    For tables delta-rs will not load. Files are read through delta-rs's object-store
    layer (`DeltaStorageHandler`), so a location and its storage options mean what they
    mean to delta-rs. Reads only the protocol, metaData and commitInfo actions: a
    checkpoint's Parquet is read for its `protocol` and `metaData` columns only."""

    def __init__(self, uri: str, options: Mapping[str, str] | None = None) -> None:
        _load_rs()
        self.uri = uri
        self.fs = pafs.PyFileSystem(DeltaStorageHandler(uri, dict(options or {})))
        self.commits: dict[int, str] = {}
        self.checkpoint: tuple[int, list[str]] | None = None
        self.checkpoints: list[int] = []  # every complete checkpoint's version
        self._protocol: dict[str, Any] | None = None
        self._metadata: dict[str, Any] | None = None

    def load(self) -> DeltaLog:
        """List the log; raises FileNotFoundError where there is no table."""
        infos = self.fs.get_file_info(pafs.FileSelector("_delta_log", allow_not_found=True))
        parts: dict[tuple[int, str], list[tuple[int, int, str]]] = {}
        for info in infos:
            name = info.base_name
            if m := _COMMIT.match(name):
                self.commits[int(m.group(1))] = info.path
            elif m := _CHECKPOINT.match(name):
                version = int(m.group(1))
                if m.group(2):  # multi-part: complete only with all its parts
                    key = (version, f"multi-{int(m.group(3))}")
                    parts.setdefault(key, []).append((int(m.group(2)), int(m.group(3)), info.path))
                else:
                    parts.setdefault((version, name), []).append((1, 1, info.path))
        complete = [
            (version, [p for _, _, p in sorted(found)])
            for (version, _), found in parts.items()
            if len(found) == found[0][1]
        ]
        if complete:
            self.checkpoint = max(complete)
            self.checkpoints = sorted({version for version, _ in complete})
        if not self.commits and self.checkpoint is None:
            raise FileNotFoundError(f"no commits in {self.uri}/_delta_log")
        floor = self.checkpoint[0] if self.checkpoint else -1
        needed = range(floor + 1, self.version() + 1)
        missing = [v for v in needed if v not in self.commits]
        if missing or (floor < 0 and 0 not in self.commits):
            raise FileNotFoundError(
                f"{self.uri}/_delta_log lacks commit {missing[0] if missing else 0} and "
                "has no checkpoint after it"
            )
        return self

    def version(self) -> int:
        return max([*self.commits, self.checkpoint[0] if self.checkpoint else -1])

    def protocol(self) -> Protocol:
        self._replay()
        p = self._protocol or {}
        config = (self._metadata or {}).get("configuration") or {}
        return Protocol(
            min_reader_version=int(p.get("minReaderVersion", 1)),
            min_writer_version=int(p.get("minWriterVersion", 2)),
            reader_features=tuple(sorted(p.get("readerFeatures") or ())),
            writer_features=tuple(sorted(p.get("writerFeatures") or ())),
            properties=_properties(config),
            configuration=dict(sorted(config.items())),
            description=(self._metadata or {}).get("description") or None,
        )

    def schema_json(self) -> str:
        self._replay()
        return (self._metadata or {})["schemaString"]

    def partition_columns(self) -> list[str]:
        self._replay()
        return list((self._metadata or {}).get("partitionColumns") or ())

    def clustering_columns(self) -> list[str]:
        """The columns of the newest `delta.clustering` domainMetadata (none: [])."""
        floor = self.checkpoint[0] if self.checkpoint else -1
        found: list[dict[str, Any]] = []
        for version in sorted((v for v in self.commits if v > floor), reverse=True):
            found = [
                a["domainMetadata"]
                for a in self._actions(self.commits[version])
                if (a.get("domainMetadata") or {}).get("domain") == CLUSTERING_DOMAIN
            ]
            if found:
                break
        for path in self.checkpoint[1] if self.checkpoint and not found else ():
            if path.endswith(".json"):
                rows = [a for a in self._actions(path) if a.get("domainMetadata")]
            else:
                with self.fs.open_input_file(path) as f:
                    if "domainMetadata" not in set(pq.read_schema(f).names):
                        continue
                    rows = pq.read_table(f, columns=["domainMetadata"]).to_pylist()
            found += [
                r["domainMetadata"]
                for r in rows
                if (r.get("domainMetadata") or {}).get("domain") == CLUSTERING_DOMAIN
            ]
        if not found or found[-1].get("removed"):
            return []
        config = json.loads(found[-1].get("configuration") or "{}")
        # Each column is a path of field names (a nested field's); top-level ones here.
        return [".".join(c) for c in config.get("clusteringColumns") or ()]

    def data_bytes(self) -> int:
        # The checkpoint's live files, then each later commit's adds and removes in order.
        live: dict[str, int] = {}
        floor = -1
        if self.checkpoint is not None:
            floor = self.checkpoint[0]
            for path in self.checkpoint[1]:
                for add in self._checkpoint_adds(path):
                    live[add["path"]] = int(add.get("size") or 0)
        for version in sorted(v for v in self.commits if v > floor):
            for action in self._actions(self.commits[version]):
                if action.get("add"):
                    live[action["add"]["path"]] = int(action["add"].get("size") or 0)
                elif action.get("remove"):
                    live.pop(action["remove"]["path"], None)
        return sum(live.values())

    def _checkpoint_adds(self, path: str) -> list[dict[str, Any]]:
        if path.endswith(".json"):
            return [a["add"] for a in self._actions(path) if a.get("add")]
        with self.fs.open_input_file(path) as f:
            if "add" not in set(pq.read_schema(f).names):
                return []
            table = pq.read_table(f, columns=["add"])
        return [r["add"] for r in table.to_pylist() if r.get("add")]

    def commit_infos(self) -> Iterator[dict[str, Any]]:
        # Only commit files carry commitInfo; those a log cleanup removed are gone.
        for version in sorted(self.commits, reverse=True):
            for action in self._actions(self.commits[version]):
                if "commitInfo" in action:
                    yield {"version": version, **action["commitInfo"]}
                    break

    def _replay(self) -> None:
        """The newest protocol and metaData: from the commits after the checkpoint,
        newest first, else from the checkpoint."""
        if self._protocol is not None and self._metadata is not None:
            return
        floor = self.checkpoint[0] if self.checkpoint else -1
        for version in sorted((v for v in self.commits if v > floor), reverse=True):
            self._take(self._actions(self.commits[version]))
            if self._protocol is not None and self._metadata is not None:
                return
        if self.checkpoint is not None:
            for path in self.checkpoint[1]:
                self._take(self._checkpoint_actions(path))
        if self._protocol is None or self._metadata is None:
            raise ValueError(f"{self.uri}/_delta_log has no protocol or metaData action")

    def _take(self, actions: list[dict[str, Any]]) -> None:
        # Within one commit (or checkpoint) there is at most one of each.
        for action in actions:
            if self._protocol is None and action.get("protocol"):
                self._protocol = action["protocol"]
            if self._metadata is None and action.get("metaData"):
                self._metadata = action["metaData"]

    def _actions(self, path: str) -> list[dict[str, Any]]:
        with self.fs.open_input_file(path) as f:
            text = f.read().decode("utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _checkpoint_actions(self, path: str) -> list[dict[str, Any]]:
        if path.endswith(".json"):  # a V2 checkpoint's top-level file may be JSON
            return self._actions(path)
        with self.fs.open_input_file(path) as f:
            have = set(pq.read_schema(f).names)
            table = pq.read_table(f, columns=[c for c in ("protocol", "metaData") if c in have])
        out = []
        for row in table.to_pylist():
            if row.get("metaData") and isinstance(row["metaData"].get("configuration"), list):
                # A Parquet map reads as (key, value) pairs.
                row["metaData"]["configuration"] = dict(row["metaData"]["configuration"])
            out.append({k: v for k, v in row.items() if v is not None})
        return out


def _properties(configuration: Mapping[str, str]) -> dict[str, str]:
    return {k: configuration[k] for k in sorted(configuration) if k.startswith(PROPERTY_PREFIXES)}


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0].strip()


def _ident(name: str) -> str:
    """A DataFusion SQL identifier: double-quoted (keeps case), a quote inside doubled."""
    return '"' + name.replace('"', '""') + '"'


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"unsupported filter value {value!r}")


def _condition(column: str, op: str, value: Any) -> str:
    if op not in _OPS:
        raise ValueError(f"unsupported filter operator {op!r} (one of {', '.join(_OPS)})")
    if op in ("in", "not in"):
        items = ", ".join(_literal(v) for v in value)
        return f"{_ident(column)} {op.upper()} ({items})"
    return f"{_ident(column)} {op} {_literal(value)}"


def _plain_type(t: pa.DataType) -> pa.DataType:
    """The type without DataFusion's view layouts (string_view -> string, ...)."""
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain_type(t.key_type), _plain_type(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(pa.field(t.value_field.name, _plain_type(t.value_type)))
    return t


def _plain(table: pa.Table) -> pa.Table:
    """Plain Arrow types and no Delta field metadata (physical column names)."""
    schema = pa.schema([pa.field(f.name, _plain_type(f.type), f.nullable) for f in table.schema])
    return table.cast(schema)


# --- one-shot helpers ------------------------------------------------------------------


def exists(location: str) -> bool:
    return LakeTable(location).exists()


def version(location: str) -> int:
    return LakeTable(location).version()


def newest_user_metadata(location: str, parse: Callable[[str | None], T | None]) -> T | None:
    return LakeTable(location).newest_user_metadata(parse)


def schema(location: str) -> list[tuple[str, str]]:
    return LakeTable(location).schema()


def protocol(location: str) -> Protocol:
    return LakeTable(location).protocol()


def read(location: str, columns: Sequence[str] | None = None, where: Filter = ()) -> pa.Table:
    return LakeTable(location).read(columns, where)
