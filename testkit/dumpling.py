"""Write Dumpling exports exactly as Dumpling lays them out, from logical rows (tests, example).

`write_export(folder, tables, snapshot_ts, ...)` writes `metadata` (with the snapshot TSO as
`Pos:` under `SHOW MASTER STATUS:`), `{db}-schema-create.sql`, `{db}.{table}-schema.sql`
(SHOW CREATE TABLE text) and the data files `{db}.{table}.{index}.{sql|csv}` (nine digits, or
thirteen with both `-r` and `-F`: the chunk's nine, then the file's four within it), with
Dumpling's value rendering (dumpling/export/sql_type.go): numbers bare, strings quoted and
escaped, binary types (BINARY, VARBINARY, BLOB, BIT) as `x'..'` in SQL and as raw bytes in
CSV, NULL as `NULL` / the CSV null value; backslash escapes (`--escape-backslash`, the
default); CSV header, separator, delimiter, null value and line terminator as Dumpling's
flags set them; `.gz`/`.zst`/`.snappy` compression. Values are the workload's logical Python
values (`values`), rendered as TiDB's text protocol shows them. Deterministic bytes.
Pure Python; no pyspark.
"""

from __future__ import annotations

import datetime as dt
import gzip
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ticdc_sync.codecs.dumpling_export import data_columns, escape_name
from ticdc_sync.core.datatypes import BINARY_TYPES, INTEGER_TYPES
from ticdc_sync.core.upstream import Column, TableSchema

from . import values as V
from .gojson import f32, format_float_json

SET_NAMES = "/*!40101 SET NAMES binary*/;"


@dataclass(frozen=True)
class DumplingFlags:
    """The Dumpling flags an export is written with (Dumpling's defaults)."""

    filetype: str = "sql"
    csv_separator: str = ","
    csv_delimiter: str = '"'
    csv_null_value: str = "\\N"
    csv_line_terminator: str = "\r\n"
    no_header: bool = False
    escape_backslash: bool = True
    compress: str | None = None  # gzip | zstd | snappy
    time_zone: str = "UTC"  # the export session's time_zone
    rows_per_file: int | None = None  # --rows / --filesize: more than one file per table
    # Both --rows and --filesize: chunks (-r) cut into files (-F), each file named by its
    # chunk's index (nine digits) then its own index in the chunk (four): 13 digits.
    rows_and_filesize: bool = False
    rows_per_statement: int = 200  # --statement-size, in rows here


# --------------------------------------------------------------------------- SHOW CREATE TABLE


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _default_sql(col: Column) -> str:
    d = col.default
    assert d is not None
    b = V.base_of(col)
    if d.upper().startswith("CURRENT_TIMESTAMP") or d.startswith(("b'", "x'", "(")):
        return d
    if b in INTEGER_TYPES or b in ("float", "double", "decimal", "year"):
        return f"'{d}'"
    return "'" + d.replace("\\", "\\\\").replace("'", "''") + "'"


def create_table_sql(schema: TableSchema) -> str:
    """The table as TiDB's SHOW CREATE TABLE writes it (what Dumpling puts in -schema.sql)."""
    lines = []
    generated = set(schema.column_names()) - set(data_columns(schema))
    for c in schema.columns:
        t = c.type_sql()
        if V.base_of(c) in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext") and (
            c.binary
        ):
            t += " CHARACTER SET binary"
        text = f"  {_q(c.name)} {t}"
        if c.name in generated:
            # The expression itself is not kept in `TableSchema`; any one reads back alike.
            text += " GENERATED ALWAYS AS (0) STORED"
        if not c.nullable:
            text += " NOT NULL"
        # TiDB shows `DEFAULT NULL` for nullable columns without a default too; leaving it
        # out keeps the schema read back equal to `schema` (has_default stays False).
        if c.has_default:
            text += " DEFAULT " + (_default_sql(c) if c.default is not None else "NULL")
        if c.comment:
            text += " COMMENT '" + c.comment.replace("'", "''") + "'"
        lines.append(text)
    if schema.primary_key:
        pk = ",".join(_q(k) for k in schema.primary_key)
        lines.append(f"  PRIMARY KEY ({pk}) /*T![clustered_index] CLUSTERED */")
    for i, uk in enumerate(schema.unique_keys):
        lines.append(f"  UNIQUE KEY {_q(f'uk_{i}')} ({','.join(_q(k) for k in uk)})")
    body = ",\n".join(lines)
    return (
        f"CREATE TABLE {_q(schema.table)} (\n{body}\n) ENGINE=InnoDB DEFAULT "
        "CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    )


# --------------------------------------------------------------------------- values


_NUMBER = (*INTEGER_TYPES, "float", "double", "decimal")


def _kind(col: Column) -> str:
    """Dumpling's receiver for the column's type: number, bytes or string (sql_type.go)."""
    b = V.base_of(col)
    if b in _NUMBER:
        return "number"
    if b in BINARY_TYPES or b == "bit" or (V.is_binary(col)):
        return "bytes"
    return "string"


def value_bytes(col: Column, v: Any, tz: dt.tzinfo) -> bytes | None:
    """A logical value as the bytes TiDB's text protocol returns for it (None: NULL)."""
    if v is None:
        return None
    b = V.base_of(col)
    if b == "float":
        return format_float_json(f32(float(v)), 32).encode()
    if b == "double":
        return format_float_json(float(v), 64).encode()
    if b == "enum":
        if isinstance(v, int):
            return (col.members[v - 1] if v else "").encode()
        low = {m.lower(): m for m in col.members}
        return low.get(str(v).lower(), str(v)).encode()
    if b == "set":
        names = {n.lower() for n in V.set_names(v)}
        return ",".join(m for m in col.members if m.lower() in names).encode()
    if b == "bit":
        n = int.from_bytes(v, "big") if isinstance(v, (bytes, bytearray)) else int(v)
        return n.to_bytes(max(1, ((col.length or 1) + 7) // 8), "big")
    internal = V.internal(col, v, tz)
    if isinstance(internal, bytes):
        return internal
    if isinstance(internal, Decimal):
        return V.fmt_decimal(internal, int(col.scale or 0)).encode()
    return str(internal).encode()


_SQL_ESCAPES = {0: b"\\0", 10: b"\\n", 13: b"\\r", 92: b"\\\\", 39: b"\\'", 34: b'\\"', 26: b"\\Z"}


def escape_sql(data: bytes) -> bytes:
    """escapeBackslashSQL (dumpling/export/sql_type.go)."""
    return b"".join(_SQL_ESCAPES.get(x, bytes([x])) for x in data)


def escape_csv(data: bytes, flags: DumplingFlags) -> bytes:
    """escapeBackslashCSV: NUL, CR, LF, backslash, and the delimiter's first byte (or the
    separator's, without a delimiter) get a backslash."""
    spec = (flags.csv_delimiter or flags.csv_separator).encode()[:1]
    out = bytearray()
    for x in data:
        if x == 0:
            out += b"\\0"
        elif x == 13:
            out += b"\\r"
        elif x == 10:
            out += b"\\n"
        elif x == 92:
            out += b"\\\\"
        elif spec and x == spec[0]:
            out += b"\\" + spec
        else:
            out.append(x)
    return bytes(out)


def sql_field(col: Column, v: Any, tz: dt.tzinfo) -> bytes:
    raw = value_bytes(col, v, tz)
    if raw is None:
        return b"NULL"
    kind = _kind(col)
    if kind == "number":
        return raw
    if kind == "bytes":
        return b"x'" + raw.hex().encode() + b"'"
    return b"'" + escape_sql(raw) + b"'"


def csv_field(col: Column, v: Any, tz: dt.tzinfo, flags: DumplingFlags) -> bytes:
    raw = value_bytes(col, v, tz)
    if raw is None:
        return flags.csv_null_value.encode()
    if _kind(col) == "number":
        return raw
    d = flags.csv_delimiter.encode()
    return d + escape_csv(raw, flags) + d


# --------------------------------------------------------------------------- files


def _compress(data: bytes, how: str | None) -> bytes:
    if how is None:
        return data
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    if how == "zstd":
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.CompressedOutputStream(sink, "zstd") as s:
            s.write(data)
        return sink.getvalue().to_pybytes()
    if how == "snappy":
        return snappy_framed(data)
    raise ValueError(how)


_SUFFIX = {None: "", "gzip": ".gz", "zstd": ".zst", "snappy": ".snappy"}


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def snappy_framed(data: bytes) -> bytes:
    """The snappy framing format (what Dumpling's --compress snappy writes), with
    uncompressed chunks: valid for any framing reader."""
    out = bytearray(b"\xff\x06\x00\x00sNaPpY")
    for i in range(0, max(len(data), 1), 65536):
        chunk = data[i : i + 65536]
        c = _crc32c(chunk)
        masked = ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        body = masked.to_bytes(4, "little") + chunk
        out += b"\x01" + len(body).to_bytes(3, "little") + body
    return bytes(out)


def metadata_text(snapshot_ts: int) -> str:
    """`metadata` as Dumpling writes it for TiDB (dumpling/export/metadata.go)."""
    at = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=snapshot_ts >> 18)
    started = at.strftime("%Y-%m-%d %H:%M:%S")
    finished = (at + dt.timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"Started dump at: {started}\n"
        "SHOW MASTER STATUS:\n"
        "\tLog: tidb-binlog\n"
        f"\tPos: {snapshot_ts}\n"
        "\tGTID:\n\n"
        f"Finished dump at: {finished}\n"
    )


def _data_files(
    schema: TableSchema, rows: Sequence[Mapping[str, Any]], flags: DumplingFlags
) -> list[bytes]:
    tz = V.zone(flags.time_zone)
    names = data_columns(schema)
    cols = [schema.column(n) for n in names]
    per_file = flags.rows_per_file or max(len(rows), 1)
    chunks = [rows[i : i + per_file] for i in range(0, len(rows), per_file)]
    out = []
    for chunk in chunks:
        if flags.filetype == "csv":
            term = flags.csv_line_terminator.encode()
            sep = flags.csv_separator.encode()
            d = flags.csv_delimiter.encode()
            lines = []
            if not flags.no_header:
                lines.append(sep.join(d + escape_csv(n.encode(), flags) + d for n in names))
            for r in chunk:
                lines.append(
                    sep.join(csv_field(c, r.get(c.name), tz, flags) for c in cols if c is not None)
                )
            out.append(b"".join(line + term for line in lines))
        else:
            generated = len(names) != len(schema.columns)
            col_list = " (" + ",".join(_q(n) for n in names) + ")" if generated else ""
            head = f"INSERT INTO {_q(schema.table)}{col_list} VALUES\n".encode()
            parts = [SET_NAMES.encode() + b"\n"]
            stmt = flags.rows_per_statement
            for i in range(0, len(chunk), stmt):
                part = chunk[i : i + stmt]
                parts.append(head)
                for j, r in enumerate(part):
                    values = b",".join(
                        sql_field(c, r.get(c.name), tz) for c in cols if c is not None
                    )
                    parts.append(b"(" + values + (b");\n" if j == len(part) - 1 else b"),\n"))
            out.append(b"".join(parts))
    return out


def write_export(
    folder: str | Path,
    tables: Iterable[tuple[TableSchema, Sequence[Mapping[str, Any]]]],
    snapshot_ts: int,
    flags: DumplingFlags | None = None,
) -> list[Path]:
    """Write a Dumpling export of `tables` ((schema, rows) each) as of `snapshot_ts` into
    `folder` (created). Returns the files written, by name."""
    flags = flags or DumplingFlags()
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    suffix = _SUFFIX[flags.compress]
    written: list[Path] = []

    def put(name: str, data: bytes, compress: bool = True) -> None:
        p = root / (name + (suffix if compress else ""))
        p.write_bytes(_compress(data, flags.compress) if compress else data)
        written.append(p)

    dbs: set[str] = set()
    for schema, rows in tables:
        db, tbl = escape_name(schema.db), escape_name(schema.table)
        if schema.db not in dbs:
            dbs.add(schema.db)
            put(
                f"{db}-schema-create.sql",
                f"{SET_NAMES}\nCREATE DATABASE {_q(schema.db)} /*!40100 DEFAULT CHARACTER SET "
                "utf8mb4 */;\n".encode(),
            )
        put(f"{db}.{tbl}-schema.sql", f"{SET_NAMES}\n{create_table_sql(schema)};\n".encode())
        for i, data in enumerate(_data_files(schema, rows, flags)):
            index = f"{i // 2:09d}{i % 2:04d}" if flags.rows_and_filesize else f"{i:09d}"
            put(f"{db}.{tbl}.{index}.{flags.filetype}", data)
    # Dumpling writes `metadata` last, and only when the export succeeded.
    put("metadata", metadata_text(snapshot_ts).encode(), compress=False)
    return sorted(written)
