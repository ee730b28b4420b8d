"""A target's steps: rows split at DDL barriers, additive DDL fused, markers resume half-done work.

Built through the real planner (project + warehouse state -> Plan -> steps), as a run does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ticdc_sync.core.model import Defaults, Output, Project, Protocol, Source, TableEntry
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker, dedupe_ddl
from ticdc_sync.ddl import parse_schema_sql
from ticdc_sync.plan import build_plan
from ticdc_sync.plan.model import Ddl, Rows
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

SEED = parse_schema_sql("CREATE TABLE db.t (id INT PRIMARY KEY, c0 INT)", None, "s.sql")[0]
PROJECT = Project(
    name="p",
    root=Path("/nonexistent"),
    output=Output("dev"),
    defaults=Defaults(),
    sources=(Source("src", Protocol.CANAL_JSON, ("topic",)),),
    tables=(TableEntry("db.t", "t"),),
    seed_schemas={("db", "t"): SEED},
)


def ddl(ts: int, sql: str = "ALTER TABLE t ADD COLUMN c{ts} INT", partition: int = 0) -> DdlEvent:
    return DdlEvent("db", "t", ts, sql.format(ts=ts), partition=partition, offset=ts)


def steps(
    marker: Marker, events: list[DdlEvent], resolved: int, features: tuple[str, ...] = ()
) -> list[tuple]:
    tally = SourceTally(
        partitions={("topic", 0): PartitionTally("topic", 0, 1, watermark=resolved)},
        tables={("db", "t"): (1, len(events))},
    )
    state = WarehouseState(
        sources={"src": SourceState("src", tally=tally, ddl_events=tuple(events))},
        targets={
            "t": TargetState(
                "t",
                True,
                marker,
                columns=(("id", "int"), ("c0", "int")),
                writer_features=("appendOnly", "invariants", *features),
            )
        },
    )
    plan = build_plan(PROJECT, state)
    out = []
    for s in plan.target_plan("t").steps:
        if isinstance(s, Rows):
            out.append(("rows", s.lo, s.hi))
        elif isinstance(s, Ddl):
            out.append(("ddl", s.commit_ts, s.ahead))
        else:
            out.append((type(s).__name__.lower(), getattr(s, "ddl", None) and s.ddl.commit_ts))
    return out


def test_rows_only():
    assert steps(Marker(), [], 100) == [("rows", -1, 100)]


def test_nothing_new():
    assert steps(Marker(applied_ts=100), [], 100) == []


def test_split_at_ddl():
    drop = ddl(50, "ALTER TABLE t DROP COLUMN c0")
    assert steps(Marker(applied_ts=10), [drop], 100) == [
        ("rows", 10, 49),
        ("ddl", 50, False),
        ("rows", 50, 100),
    ]


def test_ddl_after_resolved_waits():
    assert steps(Marker(applied_ts=10), [ddl(150)], 100) == [("rows", 10, 100)]


def test_ddl_done_is_skipped_and_half_done_ddl_resumes():
    drop = ddl(50, "ALTER TABLE t DROP COLUMN c0")
    # Stopped after its first commit, which enabled column mapping.
    m = Marker(applied_ts=49, ddl_ts=50, ddl_part=0, ddl_parts=2)
    assert not m.ddl_done(50)
    assert m.parts_done(50) == 1
    cm = ("columnMapping",)
    assert steps(m, [drop], 100, cm) == [("ddl", 50, False), ("rows", 50, 100)]
    done = Marker(applied_ts=50, ddl_ts=50, ddl_part=1, ddl_parts=2)
    assert steps(done, [drop], 100) == [("rows", 50, 100)]


def test_late_ddl_at_watermark_still_runs():
    # tiflow #4845: the watermark equal to a DDL's commit_ts can arrive before the DDL.
    drop = ddl(50, "ALTER TABLE t DROP COLUMN c0")
    assert steps(Marker(applied_ts=50, ddl_ts=-1), [drop], 60) == [
        ("ddl", 50, False),
        ("rows", 50, 60),
    ]


def test_dedupe_broadcast_copies_keeps_lowest_partition():
    events = [ddl(5, partition=2), ddl(5, partition=0), ddl(5, partition=1), ddl(3)]
    out = dedupe_ddl(events)
    assert [(e.commit_ts, e.partition) for e in out] == [(3, 0), (5, 0)]


def test_marker_round_trip():
    m = Marker(applied_ts=7, ddl_ts=5, ddl_part=0, ddl_parts=1)
    assert Marker.from_user_metadata(m.to_json()) == m
    assert Marker.from_user_metadata("not json") is None
    assert Marker.from_user_metadata('{"other": 1}') is None


def test_fuse_additive_moves_ddl_ahead_and_joins_segments():
    assert steps(Marker(applied_ts=10), [ddl(50), ddl(70)], 100) == [
        ("ddl", 50, True),
        ("ddl", 70, True),
        ("rows", 10, 100),
    ]


def test_fuse_additive_keeps_other_ddl_as_barrier():
    barrier = ddl(70, "ALTER TABLE t DROP COLUMN c0")
    assert steps(Marker(applied_ts=10), [ddl(50), barrier], 100) == [
        ("ddl", 50, True),
        ("rows", 10, 69),
        ("ddl", 70, False),
        ("rows", 70, 100),
    ]


def test_fuse_additive_keeps_a_ddl_no_rows_follow_after_the_rows_before_it():
    # Rows stop at the ADD's commit_ts (or a barrier follows it at once): the segment before
    # it is typed without the ADD, so the ADD's backfill must come after its rows.
    assert steps(Marker(applied_ts=10), [ddl(50)], 50) == [("rows", 10, 49), ("ddl", 50, False)]
    barrier = ddl(51, "ALTER TABLE t DROP COLUMN c0")
    assert steps(Marker(applied_ts=10), [ddl(50), barrier], 100) == [
        ("rows", 10, 49),
        ("ddl", 50, False),
        ("ddl", 51, False),
        ("rows", 51, 100),
    ]


def test_fuse_additive_without_rows_before_changes_nothing():
    # The marker is just below the DDL: no segment to join, the DDL runs in place.
    assert steps(Marker(applied_ts=49), [ddl(50)], 100) == [("ddl", 50, False), ("rows", 50, 100)]


def test_resume_after_ddl_ahead_is_one_segment():
    # Killed after the moved ADD COLUMN committed (applied_ts kept at 10), before the MERGE.
    m = Marker(applied_ts=10, ddl_ts=50, ddl_part=1, ddl_parts=2)
    assert m.ddl_done(50)
    assert steps(m, [ddl(50)], 100) == [("rows", 10, 100)]


def test_a_blocked_ddl_stops_the_rows_just_before_it():
    narrow = ddl(50, "ALTER TABLE t MODIFY COLUMN c0 TINYINT")
    assert steps(Marker(applied_ts=10), [narrow, ddl(70)], 100) == [("rows", 10, 49), ("stop", 50)]


def _rows(project: Project, ddl_events: list[DdlEvent]) -> list[Rows]:
    tally = SourceTally(
        partitions={("topic", 0): PartitionTally("topic", 0, 1, watermark=40)},
        tables={("db", "t"): (1, len(ddl_events))},
    )
    state = WarehouseState(
        sources={"src": SourceState("src", tally=tally, ddl_events=tuple(ddl_events))},
        targets={"t": TargetState("t", True, Marker(5), columns=(("id", "int"), ("c0", "int")))},
    )
    t = build_plan(project, state).target_plan("t")
    assert t is not None
    return [s for s in t.steps if isinstance(s, Rows)]


def test_a_segment_that_cannot_be_merged_carries_why():
    # No primary key and no NOT NULL unique key upstream: the segment fails with the hint.
    seed = parse_schema_sql("CREATE TABLE db.t (id INT, c0 INT)", None, "s.sql")[0]
    keyless = replace(PROJECT, seed_schemas={("db", "t"): seed})
    (rows,) = _rows(keyless, [])
    assert rows.keys == () and "has no primary key" in (rows.error or "")
    # Keys set on the entry win over the upstream key, and must be columns of every span.
    named = replace(PROJECT, tables=(TableEntry("db.t", "t", keys=("c0",)),))
    (rows,) = _rows(named, [])
    assert (rows.keys, rows.keys_from, rows.error) == (("c0",), "entry", None)
    before, after = _rows(named, [ddl(20, "ALTER TABLE t DROP COLUMN c0")])
    assert before.error is None
    assert "key column c0 is not a column of db.t" in (after.error or "")
