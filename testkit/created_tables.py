"""A Canal-JSON (TiDB extension) stream whose tables are created in it, as a changefeed
started before its tables brings them: per table a CREATE TABLE at its own commit_ts, then
(optionally) an ALTER TABLE ADD COLUMN per table, then row events spread over the tables,
and a watermark past the end. For tests and benchmarks: `records()` gives capture records
(partition, offset, key, value), `truth()` the rows each table ends with."""

from __future__ import annotations

import json
from dataclasses import dataclass

DB = "app"
MYSQL = {"id": "int", "v": "varchar", "n": "bigint", "extra": "int"}


def _message(table: str, ts: int, **fields) -> bytes:
    body = {
        "id": 0,
        "database": DB,
        "table": table,
        "pkNames": None,
        "isDdl": False,
        "type": "",
        "es": ts >> 18,
        "ts": 0,
        "sql": "",
        "sqlType": None,
        "mysqlType": None,
        "data": None,
        "old": None,
        "_tidb": {"commitTs": ts},
    }
    body.update(fields)
    return json.dumps(body, separators=(",", ":")).encode()


def ddl(table: str, ts: int, sql: str, kind: str) -> bytes:
    return _message(table, ts, isDdl=True, type=kind, sql=sql)


def insert(table: str, ts: int, row: dict[str, str | None]) -> bytes:
    mt = {k: MYSQL[k] for k in row}
    return _message(
        table,
        ts,
        type="INSERT",
        pkNames=["id"],
        sqlType={k: 12 for k in row},
        mysqlType=mt,
        data=[row],
    )


def watermark(ts: int) -> bytes:
    """A TIDB_WATERMARK (codec facts 1.6): a message of no table, its TSO as `watermarkTs`."""
    return _message("", ts, database="", type="TIDB_WATERMARK", _tidb={"watermarkTs": ts})


@dataclass(frozen=True)
class CreatedTables:
    """`tables` tables `t0000`... of database `app`, each created by a CREATE TABLE at its
    own commit_ts, in one partition; `events` row inserts spread over them round-robin (keys 0, 1, ... per
    table); with `add_column`, an ALTER TABLE ADD COLUMN on each table after every CREATE
    and before any row (its rows then carry the column). `start` the first commit_ts."""

    tables: int
    events: int
    add_column: bool = False
    start: int = 1 << 20

    def names(self) -> list[str]:
        return [f"t{i:04d}" for i in range(self.tables)]

    def records(self) -> list[tuple[int, int, None, bytes]]:
        ts = self.start
        values: list[bytes] = []
        for name in self.names():
            values.append(
                ddl(
                    name,
                    ts,
                    f"CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(20), n BIGINT)",
                    "CREATE",
                )
            )
            ts += 1
        if self.add_column:
            for name in self.names():
                values.append(ddl(name, ts, f"ALTER TABLE {name} ADD COLUMN extra INT", "ALTER"))
                ts += 1
        names = self.names()
        for i in range(self.events):
            name = names[i % self.tables]
            row: dict[str, str | None] = {"id": str(i // self.tables), "v": f"v{i}", "n": str(i)}
            if self.add_column:
                row["extra"] = str(i % 7)
            values.append(insert(name, ts, row))
            ts += 1
        values.append(watermark(ts + 1))
        return [(0, offset, None, v) for offset, v in enumerate(values)]

    def truth(self) -> dict[str, set[tuple]]:
        """Each table's rows (id, v, n[, extra])."""
        rows: dict[str, set[tuple]] = {n: set() for n in self.names()}
        names = self.names()
        for i in range(self.events):
            name = names[i % self.tables]
            row = (i // self.tables, f"v{i}", i)
            rows[name].add((*row, i % 7) if self.add_column else row)
        return rows
