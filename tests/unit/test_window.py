"""Window planning: rows split at DDL barriers, markers resume half-done work."""

from __future__ import annotations

from ticdc_sync.window import (
    ApplyDdl,
    DdlEvent,
    Marker,
    MergeRows,
    dedupe_ddl,
    fuse_additive,
    plan_steps,
)


def ddl(ts: int, sql: str = "ALTER TABLE t ADD COLUMN c INT", partition: int = 0) -> DdlEvent:
    return DdlEvent("db", "t", ts, sql, partition=partition, offset=ts)


def test_rows_only():
    assert plan_steps(Marker(), [], 100) == [MergeRows(-1, 100)]


def test_nothing_new():
    assert plan_steps(Marker(applied_ts=100), [], 100) == []


def test_split_at_ddl():
    steps = plan_steps(Marker(applied_ts=10), [ddl(50)], 100)
    assert steps == [MergeRows(10, 49), ApplyDdl(50, (ddl(50),)), MergeRows(50, 100)]


def test_ddl_after_resolved_waits():
    assert plan_steps(Marker(applied_ts=10), [ddl(150)], 100) == [MergeRows(10, 100)]


def test_ddl_done_is_skipped_and_half_done_ddl_resumes():
    m = Marker(applied_ts=49, ddl_ts=50, ddl_part=0, ddl_parts=2)
    assert not m.ddl_done(50)
    assert m.parts_done(50) == 1
    steps = plan_steps(m, [ddl(50)], 100)
    assert steps == [ApplyDdl(50, (ddl(50),)), MergeRows(50, 100)]
    done = Marker(applied_ts=50, ddl_ts=50, ddl_part=1, ddl_parts=2)
    assert plan_steps(done, [ddl(50)], 100) == [MergeRows(50, 100)]


def test_late_ddl_at_watermark_still_runs():
    # tiflow #4845: the watermark equal to a DDL's commit_ts can arrive before the DDL.
    steps = plan_steps(Marker(applied_ts=50, ddl_ts=-1), [ddl(50)], 60)
    assert steps == [ApplyDdl(50, (ddl(50),)), MergeRows(50, 60)]


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
    steps = plan_steps(Marker(applied_ts=10), [ddl(50), ddl(70)], 100)
    fused = fuse_additive(steps, lambda s: True)
    assert fused == [
        ApplyDdl(50, (ddl(50),), ahead=True),
        ApplyDdl(70, (ddl(70),), ahead=True),
        MergeRows(10, 100),
    ]


def test_fuse_additive_keeps_other_ddl_as_barrier():
    barrier = ddl(70, "ALTER TABLE t DROP COLUMN c")
    steps = plan_steps(Marker(applied_ts=10), [ddl(50), barrier], 100)
    fused = fuse_additive(steps, lambda s: "ADD" in s.ddls[0].sql)
    assert fused == [
        ApplyDdl(50, (ddl(50),), ahead=True),
        MergeRows(10, 69),
        ApplyDdl(70, (barrier,)),
        MergeRows(70, 100),
    ]


def test_fuse_additive_without_rows_before_changes_nothing():
    # The marker is just below the DDL: no segment to join, the DDL runs in place.
    steps = plan_steps(Marker(applied_ts=49), [ddl(50)], 100)
    assert fuse_additive(steps, lambda s: True) == steps


def test_resume_after_ddl_ahead_is_one_segment():
    # Killed after the moved ADD COLUMN committed (applied_ts kept at 10), before the MERGE.
    m = Marker(applied_ts=10, ddl_ts=50, ddl_part=1, ddl_parts=2)
    assert m.ddl_done(50)
    assert plan_steps(m, [ddl(50)], 100) == [MergeRows(10, 100)]
