"""Split a target's resolved window into steps: row segments separated by DDL barriers.

Pure: it sees only the (few) DDL events of a target and its progress marker, never rows.
The Spark runner executes the steps in order; each step is one Delta commit that carries
the new marker, so progress is recorded atomically with the data (DESIGN.md §3).
"""

from __future__ import annotations

import json
from collections.abc import Callable
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


@dataclass(frozen=True, slots=True)
class MergeRows:
    """Apply row changes with lo < commit_ts <= hi in one MERGE."""

    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class ApplyDdl:
    """Apply the DDL events sharing one commit_ts (a split multi-table RENAME shares it).

    `ahead`: applied before the rows that precede it (see `fuse_additive`); its commits
    then keep the marker's `applied_ts`, since those rows are not in the table yet.
    """

    commit_ts: int
    ddls: tuple[DdlEvent, ...]
    ahead: bool = False


Step = MergeRows | ApplyDdl


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


def plan_steps(marker: Marker, ddls: list[DdlEvent], resolved: int) -> list[Step]:
    """The steps that bring a target from `marker` to `resolved`.

    Rows before a DDL are merged with the old schema, then the DDL, then the rows after
    it (DESIGN.md §2). A DDL whose commit_ts is at or below `applied_ts` but not yet
    handled still runs: TiCDC may send the watermark equal to a DDL's commit_ts before the
    DDL itself (tiflow #4845), and rows never share a commit_ts with a DDL.
    """
    steps: list[Step] = []
    lo = marker.applied_ts
    by_ts: dict[int, list[DdlEvent]] = {}
    for d in ddls:
        if d.commit_ts <= resolved and not marker.ddl_done(d.commit_ts):
            by_ts.setdefault(d.commit_ts, []).append(d)
    for ts in sorted(by_ts):
        group = sorted(by_ts[ts], key=lambda e: (e.partition, e.offset, e.db, e.tbl))
        if ts - 1 > lo:
            steps.append(MergeRows(lo, ts - 1))
            lo = ts - 1
        steps.append(ApplyDdl(ts, tuple(group)))
        lo = max(lo, ts)
    if resolved > lo:
        steps.append(MergeRows(lo, resolved))
    return steps


def fuse_additive(steps: list[Step], additive: Callable[[ApplyDdl], bool]) -> list[Step]:
    """Fewer MERGEs: move each purely additive DDL (`additive(step)`: ADD COLUMN or no Delta
    change) ahead of the row segment before it, so the segments on both sides become one.

    The merged segment types each row with the schema in force at its commit_ts and gives
    an added column, for rows older than the ADD, the value the ADD's backfill would have
    written; the result is the table the unfused steps produce. A moved DDL commits with
    the old `applied_ts`, so a run killed between it and the MERGE redoes the whole segment.
    Any other DDL stays a barrier between segments.
    """
    out: list[Step] = []
    pending: MergeRows | None = None
    for step in steps:
        if isinstance(step, MergeRows):
            pending = step if pending is None else MergeRows(pending.lo, step.hi)
        elif pending is not None and additive(step):
            out.append(ApplyDdl(step.commit_ts, step.ddls, ahead=True))
        else:
            if pending is not None:
                out.append(pending)
                pending = None
            out.append(step)
    if pending is not None:
        out.append(pending)
    return out
