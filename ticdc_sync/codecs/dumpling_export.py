"""Dumpling exports as Dumpling writes them: the folder's layout, the snapshot TSO, the schemas.

A Dumpling export (TiDB's logical export tool) is one folder, local or in an object store:

- `metadata`: written last, only when the export succeeded (never compressed). For TiDB its
  `SHOW MASTER STATUS:` block (`SHOW BINARY LOG STATUS:` in newer versions) records the
  snapshot TSO as `Pos:`; every row of the export is the table as of that TSO.
- `{db}-schema-create.sql`: the CREATE DATABASE.
- `{db}.{table}-schema.sql`: the table's CREATE TABLE (SHOW CREATE TABLE at the snapshot);
  a view also has `{db}.{view}-schema-view.sql` and no data.
- `{db}.{table}.{index}.{sql|csv}`: the rows, as INSERT statements or CSV; `index` is nine
  digits (thirteen with both --rows and --filesize).

Names in file names pass through Dumpling's `fn` escape (`%XX` for `.`, `/`, `%`, control
characters and a few more, and for the `-` of `-schema`), so a name can never break the
layout; `escape_name`/`unescape_name` are that escape and its inverse. Every schema file
and data file may carry a compression suffix (`.gz`, `.zst`, `.snappy`).

A table whose schema file cannot be read (it does not parse, or holds another table) is
kept aside with the reason (`Export.unreadable`): the plan refuses the targets that would load
it, and the others load. Anything else wrong with the folder makes the whole export unreadable.

This module lists the folder and reads its small files (`metadata`, the schema files); it
never reads data rows (Spark does, `spark/apply/load.py`) and never imports pyspark.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ticdc_sync.core.errors import DdlError, Issue, UserError
from ticdc_sync.core.model import DumplingOptions, ExportFiletype, InitialLoad, Project
from ticdc_sync.core.upstream import Key, TableSchema, key
from ticdc_sync.ddl.create_table import GENERATED

METADATA = "metadata"
# Compression suffixes Dumpling writes (--compress gzip|zstd|snappy) and Spark's codec names.
COMPRESSIONS = {"gz": "gzip", "zst": "zstd", "snappy": "snappy"}
# Spark reads `.gz` and `.zst` with Hadoop's codecs; Hadoop's snappy codec reads its own
# block format, not the snappy framing format Dumpling writes (the read fails or crashes).
SPARK_READS = ("gzip", "zstd", None)

_SUFFIX = r"(?:\.(gz|zst|snappy))?"
_DATA = re.compile(r"^([^.]+)\.([^.]+)\.(\d{9}|\d{13})\.(sql|csv)" + _SUFFIX + "$")
_TABLE_SCHEMA = re.compile(r"^([^.]+)\.([^.]+)-schema\.sql" + _SUFFIX + "$")
_VIEW_SCHEMA = re.compile(r"^([^.]+)\.([^.]+)-schema-view\.sql" + _SUFFIX + "$")
_DB_SCHEMA = re.compile(r"^([^.]+)-schema-create\.sql" + _SUFFIX + "$")
# Other objects Dumpling may write beside the tables; none of them holds rows.
_OTHER = re.compile(
    r"^[^.]+(?:\.[^.]+)?-(?:schema-sequence|schema-triggers|schema-post|placement-policy-create)"
    r"\.sql" + _SUFFIX + "$"
)
_LOOKS_LIKE_DATA = re.compile(r"\.(sql|csv)" + _SUFFIX + "$")
# Dumpling's `fn` template function (dumpling/export/prepare.go, filenameEscapeRegexp).
_ESCAPE = re.compile(r'[\x00-\x1f%"*./:<>?\\|]|-(?i:schema)')
_UNESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_STATUS_HEADER = re.compile(r"^SHOW (?:MASTER|BINARY LOG) STATUS:")
_POS = re.compile(r"^\s*Pos:\s*(\S*)\s*$")
# TiDB TSOs carry milliseconds since the epoch in their physical bits (<< 18): an export of a
# TiDB cluster is from after 2015 and before 2200.
_TSO_MIN = 1_420_070_400_000 << 18
_TSO_MAX = 7_258_118_400_000 << 18


class ExportError(UserError):
    """A Dumpling export that cannot be loaded; the message names the file (and line)."""


def escape_name(name: str) -> str:
    """A database or table name as Dumpling writes it into a file name (`fn`)."""
    return _ESCAPE.sub(lambda m: f"%{ord(m.group(0)[0]):02X}{m.group(0)[1:]}", name)


def unescape_name(text: str) -> str:
    return _UNESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def data_columns(schema: TableSchema) -> tuple[str, ...]:
    """The columns a data file holds, in order: every column but the generated ones (Dumpling
    selects those out, and lists the rest in its CSV header or INSERT column list)."""
    generated = {n.lower() for n in schema.extra.get(GENERATED, "").split("\t") if n}
    return tuple(c.name for c in schema.columns if c.name.lower() not in generated)


@dataclass(frozen=True, slots=True)
class DataFile:
    """One data file of one table: its name in the export folder, where Spark reads it, its
    size in bytes and its compression (Spark's codec name, None when plain)."""

    name: str
    location: str
    size: int
    compression: str | None


@dataclass(frozen=True, slots=True)
class ExportTable:
    db: str
    table: str
    schema: TableSchema  # from its `-schema.sql`, as of the snapshot
    schema_file: str
    files: tuple[DataFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True, slots=True)
class UnreadableTable:
    """A table whose schema file cannot be read (its data files are not read either)."""

    db: str
    table: str
    schema_file: str
    why: str  # the error, naming the file (and line)


@dataclass(frozen=True, slots=True)
class Export:
    """A Dumpling export as found: its snapshot TSO and its tables (views left out)."""

    location: str  # where it is (absolute path or URI); never rendered
    shown: str  # how plans show it
    snapshot_ts: int
    filetype: ExportFiletype
    tables: Mapping[Key, ExportTable] = field(default_factory=dict)
    # Tables whose schema file cannot be read (not in `tables`).
    unreadable: Mapping[Key, UnreadableTable] = field(default_factory=dict)

    def table(self, db: str, table: str) -> ExportTable | None:
        return self.tables.get(key(db, table))


# --------------------------------------------------------------------------- metadata


def parse_metadata(text: str, file: str = METADATA) -> int:
    """The snapshot TSO in a `metadata` file: `Pos:` under `SHOW MASTER STATUS:` (or `SHOW
    BINARY LOG STATUS:`). A second such block (`/* AFTER CONNECTION POOL ESTABLISHED */`)
    must agree with the first: with TiDB both are the snapshot."""
    found: list[tuple[int, str]] = []
    in_status = False
    for n, line in enumerate(text.splitlines(), 1):
        if _STATUS_HEADER.match(line):
            in_status = True
            continue
        if line and not line[0].isspace():
            in_status = False  # another block (SHOW SLAVE STATUS, Finished dump at, ...)
            continue
        m = _POS.match(line)
        if in_status and m:
            found.append((n, m.group(1)))
    if not found:
        raise ExportError(
            f"{file}: no `Pos:` under `SHOW MASTER STATUS:`, so the snapshot TSO is unknown "
            "(hint: load an export Dumpling made from TiDB, which records its snapshot there)"
        )
    values = set()
    for n, pos in found:
        if not pos.isdigit():
            raise ExportError(
                f"{file}:{n}: `Pos: {pos}` is not a TiDB TSO (hint: load an export Dumpling "
                "made from TiDB, which records its snapshot TSO as `Pos:`)"
            )
        ts = int(pos)
        if not _TSO_MIN <= ts <= _TSO_MAX:
            raise ExportError(
                f"{file}:{n}: `Pos: {pos}` is not a TiDB TSO (a MySQL binlog position?) "
                "(hint: load an export Dumpling made from TiDB)"
            )
        values.add(ts)
    if len(values) > 1:
        raise ExportError(
            f"{file}: the positions differ ({', '.join(str(v) for v in sorted(values))}): the "
            "export is not one snapshot (hint: export with Dumpling's --consistency snapshot, "
            "the default for TiDB)"
        )
    return values.pop()


# --------------------------------------------------------------------------- the folder


class _Folder:
    """A flat folder, local or in an object store (read through delta-rs's object-store
    layer, so an export in the warehouse's store needs no other credentials)."""

    def __init__(self, location: str, shown: str) -> None:
        from ticdc_sync.core import lake

        self.location = location.rstrip("/")
        self.shown = shown
        self.uri = lake.table_uri(location)
        self.local = lake.is_local(self.uri)
        self._fs = None
        if not self.local:
            import pyarrow.fs as pafs
            from deltalake.fs import DeltaStorageHandler

            handler = DeltaStorageHandler(self.uri, lake.storage_options(self.uri))
            self._fs = pafs.PyFileSystem(handler)

    def entries(self) -> list[tuple[str, int]]:
        """(name, size) of every file directly in the folder, by name."""
        try:
            if self.local:
                root = Path(self.uri)
                return sorted((p.name, p.stat().st_size) for p in root.iterdir() if p.is_file())
            import pyarrow.fs as pafs

            assert self._fs is not None
            infos = self._fs.get_file_info(pafs.FileSelector("", recursive=False))
            return sorted(
                (i.path.rsplit("/", 1)[-1], int(i.size or 0))
                for i in infos
                if i.type == pafs.FileType.File
            )
        except (OSError, ValueError) as e:
            raise ExportError(
                f"{self.shown}: cannot list the export's folder ({_first_line(e)}) (hint: "
                "check `initial_load.dumpling`; an object store needs its AWS_* variables)"
            ) from None

    def read(self, name: str) -> bytes:
        try:
            if self.local:
                return (Path(self.uri) / name).read_bytes()
            assert self._fs is not None
            with self._fs.open_input_stream(name) as f:
                return f.read()
        except OSError as e:
            raise ExportError(f"{self.shown}/{name}: cannot read it ({_first_line(e)})") from None

    def child(self, name: str) -> str:
        """Where Spark reads a file of the folder."""
        return f"{self.location}/{name}"


def _decompress(data: bytes, compression: str | None, name: str) -> bytes:
    try:
        if compression == "gzip":
            return gzip.decompress(data)
        if compression == "zstd":
            import pyarrow as pa

            return bytes(pa.CompressedInputStream(pa.BufferReader(data), "zstd").read())
    except (OSError, EOFError, ValueError) as e:
        raise ExportError(f"{name}: cannot decompress it ({_first_line(e)})") from None
    if compression == "snappy":
        raise _snappy(name)
    return data


def _snappy(name: str) -> ExportError:
    return ExportError(
        f"{name}: snappy-compressed files cannot be read: Spark's snappy codec reads Hadoop's "
        "block format, not the snappy framing format Dumpling writes (hint: export with "
        "--compress gzip or --compress zstd, or decompress the files first)"
    )


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ExportError(f"{name}:{line}: not UTF-8 text") from None


# --------------------------------------------------------------------------- discovery


def discover(location: str, shown: str, options: DumplingOptions) -> Export:
    """The export at `location` (`shown` names it in messages): its snapshot TSO, and for
    each table its schema and data files. Raises `ExportError` naming the file (and line)
    of the first problem: no `metadata` or no TSO in it, a database schema file that does
    not parse, a table with data files but no schema file, data files of the other file
    type, snappy files, files the default naming does not produce. A table schema file that
    cannot be read is no such problem: its table goes to `Export.unreadable` (its data
    files left out), and the other tables are found as usual."""
    folder = _Folder(location, shown)
    entries = folder.entries()
    names = dict(entries)

    def where(name: str) -> str:
        return f"{shown}/{name}"

    if METADATA not in names:
        raise ExportError(
            f"{where(METADATA)}: no such file: not a finished Dumpling export (Dumpling writes "
            "`metadata` last, when the export succeeded) (hint: point `initial_load.dumpling` "
            "at the export's folder, or export again)"
        )
    ts = parse_metadata(_text(folder.read(METADATA), where(METADATA)), where(METADATA))
    schemas: dict[Key, tuple[str, TableSchema]] = {}
    unreadable: dict[Key, UnreadableTable] = {}
    views: set[Key] = set()
    files: dict[Key, list[DataFile]] = {}
    other_type: list[str] = []
    for name, size in entries:
        if name == METADATA or _OTHER.match(name):
            continue
        if m := _VIEW_SCHEMA.match(name):
            views.add(key(unescape_name(m.group(1)), unescape_name(m.group(2))))
            continue
        if m := _DB_SCHEMA.match(name):
            db = unescape_name(m.group(1))
            _read_schema(folder, name, where(name), db, COMPRESSIONS.get(m.group(2) or ""))
            continue
        if m := _TABLE_SCHEMA.match(name):
            db, tbl = unescape_name(m.group(1)), unescape_name(m.group(2))
            try:
                schemas[key(db, tbl)] = (name, _table_schema(folder, name, where(name), db, tbl))
            except ExportError as e:
                unreadable[key(db, tbl)] = UnreadableTable(db, tbl, name, str(e))
            continue
        if m := _DATA.match(name):
            db, tbl = unescape_name(m.group(1)), unescape_name(m.group(2))
            if m.group(4) != options.filetype.value:
                other_type.append(name)
                continue
            compression = COMPRESSIONS.get(m.group(5) or "")
            if compression not in SPARK_READS:
                raise _snappy(where(name))
            files.setdefault(key(db, tbl), []).append(
                DataFile(name, folder.child(name), size, compression)
            )
            continue
        if _LOOKS_LIKE_DATA.search(name):
            raise ExportError(
                f"{where(name)}: not a file name Dumpling's default naming produces "
                "(`{db}.{table}.{index}.sql|csv`, `{db}.{table}-schema.sql`, ...) (hint: "
                "ticdc-sync reads exports made without --output-filename-template; move other "
                "files out of the export's folder)"
            )
    if other_type and not files:
        ext = other_type[0].split(".")[3]
        raise ExportError(
            f"{where(other_type[0])}: the export holds .{ext} data files, but "
            f"`initial_load.options.filetype` is {options.filetype.value} (hint: set "
            f"`filetype: {ext}`, as the export was made with --filetype {ext})"
        )
    if other_type:
        raise ExportError(
            f"{where(other_type[0])}: the export holds both .sql and .csv data files (hint: "
            "load one export per folder)"
        )
    for k in unreadable:
        files.pop(k, None)  # rows of a table whose schema is unknown: never read
    tables: dict[Key, ExportTable] = {}
    for k, (schema_file, schema) in sorted(schemas.items()):
        if k in views:
            continue
        tables[k] = ExportTable(
            schema.db,
            schema.table,
            schema,
            schema_file,
            tuple(sorted(files.pop(k, []), key=lambda f: f.name)),
        )
    if files:
        k, fs = sorted(files.items())[0]
        raise ExportError(
            f"{where(fs[0].name)}: data of {k[0]}.{k[1]} without its schema file "
            f"{escape_name(k[0])}.{escape_name(k[1])}-schema.sql (hint: export again without "
            "--no-schemas)"
        )
    broken = {k: v for k, v in sorted(unreadable.items()) if k not in views}
    return Export(location, shown, ts, options.filetype, tables, broken)


def data_filetype(location: str, shown: str) -> ExportFiletype | None:
    """The file type of the export's data files, as their names say (`--filetype`); None when
    it holds none, or both kinds."""
    found = {
        m.group(4) for name, _ in _Folder(location, shown).entries() if (m := _DATA.match(name))
    }
    return ExportFiletype(found.pop()) if len(found) == 1 else None


def _table_schema(folder: _Folder, name: str, shown: str, db: str, tbl: str) -> TableSchema:
    """The CREATE TABLE of `db.tbl` in its schema file `name`."""
    m = _TABLE_SCHEMA.match(name)
    assert m is not None
    parsed = _read_schema(folder, name, shown, db, COMPRESSIONS.get(m.group(3) or ""))
    found = [s for s in parsed if key(s.db, s.table) == key(db, tbl)]
    if len(parsed) != 1 or not found:
        raise ExportError(
            f"{shown}: expected the CREATE TABLE of {db}.{tbl}, found "
            f"{', '.join(s.qualified for s in parsed) or 'none'} (hint: the file is not "
            "the one Dumpling wrote; export again)"
        )
    return found[0]


def _read_schema(
    folder: _Folder, name: str, shown: str, db: str, compression: str | None
) -> list[TableSchema]:
    from ticdc_sync.ddl import parse_schema_sql

    text = _text(_decompress(folder.read(name), compression, shown), shown)
    try:
        return parse_schema_sql(text, db, shown)
    except DdlError as e:
        raise ExportError(str(e)) from None


# --------------------------------------------------------------------------- the project


def export_location(project: Project, il: InitialLoad) -> str:
    """The export's folder as an absolute path or a URI (a path is relative to the project)."""
    if "://" in il.dumpling or il.dumpling.startswith("file:"):
        return il.dumpling
    p = Path(il.dumpling)
    return str(p if p.is_absolute() else (Path(project.root) / p).resolve())


def shown_location(project: Project, il: InitialLoad) -> str:
    """The export's folder as plans and messages show it: as written in the project."""
    return il.dumpling.rstrip("/") or "."


def discover_for(project: Project, il: InitialLoad) -> Export:
    return discover(export_location(project, il), shown_location(project, il), il.options)


def check_exports(project: Project) -> list[Issue]:
    """`validate`: every source's export can be read, one Issue per broken export, at the
    source's `initial_load` (the message names the export's file and line)."""
    issues = []
    for s in sorted(project.sources, key=lambda s: s.name):
        il = s.initial_load
        if il is None:
            continue
        try:
            export = discover_for(project, il)
        except ExportError as e:
            issues.append(
                Issue(il.origin.file, il.origin.line, "initial_load", f"source {s.name}: {e}")
            )
            continue
        for u in export.unreadable.values():
            issues.append(
                Issue(il.origin.file, il.origin.line, "initial_load", f"source {s.name}: {u.why}")
            )
    return issues


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
