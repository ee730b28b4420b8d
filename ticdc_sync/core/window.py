"""A target's progress marker, and the DDL events as staged (broadcast copies removed).

A target's progress is the `Marker` in the userMetadata of each Delta commit it makes, so it
is recorded atomically with the data (DESIGN.md §3). Pure: no rows, no pyspark.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

MARKER_KEY = "ticdc_sync"


@dataclass(frozen=True, slots=True)
class Marker:
    """A target's progress, stored in the userMetadata of each Delta commit it makes.

    `applied_ts`: every row change with commit_ts <= this is in the table.
    `ddl_ts`/`ddl_part`/`ddl_parts`: the last DDL handled and how many of its Delta
    statements are done (a multi-clause ALTER becomes several commits).
    """

    applied_ts: int = -1
    ddl_ts: int = -1
    ddl_part: int = -1
    ddl_parts: int = 0

    def ddl_done(self, commit_ts: int) -> bool:
        if commit_ts < self.ddl_ts:
            return True
        return commit_ts == self.ddl_ts and self.ddl_part >= self.ddl_parts - 1

    def parts_done(self, commit_ts: int) -> int:
        """How many Delta statements of the DDL at `commit_ts` are already committed."""
        if commit_ts == self.ddl_ts:
            return self.ddl_part + 1
        return 0

    def to_json(self) -> str:
        return json.dumps({MARKER_KEY: asdict(self)}, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_user_metadata(text: str | None) -> Marker | None:
        if not text:
            return None
        try:
            d = json.loads(text)
        except ValueError:
            return None
        if not isinstance(d, dict) or not isinstance(d.get(MARKER_KEY), dict):
            return None
        m = d[MARKER_KEY]
        return Marker(
            applied_ts=int(m.get("applied_ts", -1)),
            ddl_ts=int(m.get("ddl_ts", -1)),
            ddl_part=int(m.get("ddl_part", -1)),
            ddl_parts=int(m.get("ddl_parts", 0)),
        )


@dataclass(frozen=True, slots=True)
class DdlEvent:
    """One upstream DDL as staged (broadcast copies already removed)."""

    db: str
    tbl: str
    commit_ts: int
    sql: str
    hint: str | None = None
    table_changes: str | None = None
    topic: str = ""
    partition: int = 0
    offset: int = 0

    def where(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def from_staged(cls, r) -> DdlEvent:
        """From a staged DDL row (a mapping of the staging table's columns)."""
        return cls(
            db=r["db"] or "",
            tbl=r["tbl"] or "",
            commit_ts=r["commit_ts"],
            sql=r["ddl_sql"] or "",
            hint=r["ddl_hint"],
            table_changes=r["table_changes"],
            topic=r["topic"],
            partition=r["partition"],
            offset=r["offset"],
        )


def staged_order(r) -> tuple:
    """The order staged DDL rows are read in: commit_ts, then position."""
    return (r["commit_ts"], r["topic"], r["partition"], r["offset"])


def dedupe_ddl(events: list[DdlEvent]) -> list[DdlEvent]:
    """Drop broadcast copies (codec facts 0.5, 4.3): one event per (db, tbl, commit_ts, sql),
    keeping the copy from the lowest (partition, offset); sorted by commit_ts."""
    best: dict[tuple[str, str, int, str], DdlEvent] = {}
    for e in events:
        k = (e.db, e.tbl, e.commit_ts, e.sql)
        cur = best.get(k)
        if cur is None or (e.partition, e.offset) < (cur.partition, cur.offset):
            best[k] = e
    return sorted(best.values(), key=lambda e: (e.commit_ts, e.partition, e.offset))
