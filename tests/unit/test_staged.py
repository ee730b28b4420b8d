"""Staged tallies: folding increments and carrying them through a commit's userMetadata."""

from __future__ import annotations

import json

from ticdc_sync.core.staged import (
    INCREMENT_FIELDS,
    PartitionTally,
    SourceTally,
    from_user_metadata,
    read_carried,
    to_user_metadata,
)


def inc(topic="t", partition=0, db="d", tbl="x", **kw) -> dict:
    row = dict.fromkeys(INCREMENT_FIELDS, None)
    row.update(topic=topic, partition=partition, db=db, tbl=tbl)
    row.update(last_offset=0, bad=0, rows=0, ddls=0, events=0)
    row.update(kw)
    return row


def test_fold_takes_maxima_and_adds_counts() -> None:
    t = SourceTally()
    n = t.fold(
        [
            inc(last_offset=9, watermark=100, rows=7, events=10),
            inc(db=None, tbl=None, last_offset=4, watermark=120, events=1),
            inc(partition=1, last_offset=3, rows=2, ddls=1, events=3),
        ]
    )
    assert n == 14
    assert t.partitions[("t", 0)] == PartitionTally("t", 0, 9, 120, None, None, 0)
    assert t.partitions[("t", 1)].watermark is None
    assert t.tables == {("d", "x"): (9, 1)}
    n = t.fold([inc(last_offset=20, watermark=90, rows=1, events=2)])
    assert n == 2
    assert t.partitions[("t", 0)].last_offset == 20
    assert t.partitions[("t", 0)].watermark == 120  # a lower watermark never lowers it
    assert t.tables[("d", "x")] == (10, 1)


def test_first_bad_is_the_oldest_and_bad_counts_add() -> None:
    t = SourceTally()
    t.fold([inc(last_offset=5, first_bad=3, bad=1, events=6)])
    t.fold([inc(last_offset=9, first_bad=7, bad=2, events=4)])
    p = t.partitions[("t", 0)]
    assert (p.first_bad, p.bad, t.bad) == (3, 3, 3)


def test_progress_ts_prefers_watermarks_then_inexact_ts() -> None:
    assert PartitionTally("t", 0, 1, watermark=5, inexact_ts=9).progress_ts == 5
    assert PartitionTally("t", 0, 1, inexact_ts=9).progress_ts == 9
    assert PartitionTally("t", 0, 1).progress_ts is None


def test_user_metadata_round_trip_is_deterministic() -> None:
    a = SourceTally()
    a.fold([inc(partition=2, last_offset=4, inexact_ts=77, rows=3, events=5)])
    a.fold([inc(partition=0, db="", tbl="", last_offset=1, ddls=1, events=1)])
    text = to_user_metadata({"s2": SourceTally(), "s1": a})
    assert text == to_user_metadata({"s1": a, "s2": SourceTally()})
    back = from_user_metadata(text)
    assert back is not None
    assert back["s1"].partitions == a.partitions
    assert back["s1"].tables == a.tables
    assert back["s2"].partitions == {}


def test_commits_written_now_count_their_own_events_and_older_ones_do_not() -> None:
    """A commit of an earlier version carried no `own_events`: its tallies end before it."""
    a = SourceTally()
    a.fold([inc(partition=0, last_offset=9, watermark=50, rows=2, events=3)])
    now = read_carried(to_user_metadata({"s": a}))
    assert now is not None and now.complete
    assert now.sources["s"].to_dict() == a.to_dict()
    older = json.dumps({"ticdc_sync_staged": {"v": 1, "sources": {"s": a.to_dict()}}})
    carried = read_carried(older)
    assert carried is not None and not carried.complete
    assert carried.sources["s"].to_dict() == a.to_dict()


def test_foreign_or_newer_metadata_is_ignored() -> None:
    assert from_user_metadata(None) is None
    assert from_user_metadata("not json") is None
    assert from_user_metadata('{"ticdc_sync_marker": {}}') is None
    assert from_user_metadata('{"ticdc_sync_staged": {"v": 99, "sources": {}}}') is None
    assert read_carried('{"ticdc_sync_staged": {"v": 99, "own_events": true}}') is None
