"""The tallies a run saves beside the staging table: the next run starts from them only
while they describe the table's newest commit, and they equal what the table yields."""

from __future__ import annotations

import shutil

import pytest
from pyspark.sql import functions as F

from tests.spark.engine_harness import as_staged_columns
from ticdc_sync.locations import local_path, state_location
from ticdc_sync.spark.delta_log import latest_commit
from ticdc_sync.spark.staging import Staging

pytestmark = pytest.mark.spark

EVENT_COLUMNS = (
    "topic STRING, `partition` INT, `offset` BIGINT, idx INT, kind STRING, commit_ts BIGINT, "
    "exact_ts BOOLEAN, db STRING, tbl STRING, op STRING"
)


def _batch(spark, state: Staging, rows: list[tuple[int, int, str, int]]):
    """Decoded events (partition, offset, kind, commit_ts) in the staged columns."""
    df = spark.createDataFrame(
        [
            ("t", p, o, 0, k, ts, True, "shop", "pos", "I" if k == "row" else None)
            for p, o, k, ts in rows
        ],
        EVENT_COLUMNS,
    )
    return as_staged_columns(state, df)


FIRST = [(0, 0, "row", 10), (0, 1, "watermark", 10), (1, 0, "row", 11), (1, 1, "watermark", 11)]
SECOND = [(0, 2, "row", 20), (0, 3, "ddl", 21), (1, 2, "watermark", 25)]


def _derived(spark, wh: str) -> dict:
    """The tally a run derives from the table alone (no saved tallies)."""
    saved = local_path(state_location(wh, "events_tallies.json"))
    kept = saved.read_bytes() if saved.exists() else None
    saved.unlink(missing_ok=True)
    try:
        return Staging(spark, wh).tally("src").to_dict()
    finally:
        if kept is not None:
            saved.write_bytes(kept)


def _no_aggregate(self, source, known):
    raise AssertionError("the saved tallies were not used")


def test_a_new_run_starts_from_the_tallies_saved_at_the_newest_commit(spark, tmp_path, monkeypatch):
    wh = str(tmp_path / "wh")
    first = Staging(spark, wh)
    first.stage("src", _batch(spark, first, FIRST))
    first.stage("src", _batch(spark, first, SECOND))
    expected = first.tally("src").to_dict()
    assert expected == _derived(spark, wh)
    assert [p[2] for p in expected["partitions"]] == [3, 2]  # last offsets

    monkeypatch.setattr(Staging, "_increments", _no_aggregate)
    assert Staging(spark, wh).tally("src").to_dict() == expected


def test_saved_tallies_are_stale_after_any_later_commit(spark, tmp_path):
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    state.stage("src", _batch(spark, state, FIRST))
    saved_at = Staging(spark, wh).tally("src").to_dict()
    # A commit the tallies were not saved at (as a rewrite or a user's OPTIMIZE would be).
    state.events().limit(0).write.format("delta").mode("append").save(state.events_path)
    _batch(spark, state, SECOND).select(F.lit("src").alias("source"), "*").write.format(
        "delta"
    ).mode("append").save(state.events_path)

    fresh = Staging(spark, wh).tally("src").to_dict()
    assert fresh != saved_at
    assert fresh == _derived(spark, wh)
    assert [p[2] for p in fresh["partitions"]] == [3, 2]


def test_saved_tallies_of_a_table_made_anew_are_ignored(spark, tmp_path):
    """Same version number, other table: the commit file's bytes tell them apart."""
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    state.stage("src", _batch(spark, state, FIRST + SECOND))
    saved = local_path(state_location(wh, "events_tallies.json"))
    old_bytes, old_at = saved.read_bytes(), latest_commit(spark, state.events_path)
    old_tally = Staging(spark, wh).tally("src").to_dict()

    shutil.rmtree(local_path(state.events_path))
    anew = Staging(spark, wh)
    for _ in range(10):
        if latest_commit(spark, anew.events_path)[0] >= old_at[0]:
            break
        anew.stage("src", _batch(spark, anew, FIRST))
    assert latest_commit(spark, anew.events_path)[0] == old_at[0]
    saved.write_bytes(old_bytes)

    fresh = Staging(spark, wh).tally("src").to_dict()
    assert fresh != old_tally
    assert fresh == _derived(spark, wh)


def test_a_new_staging_table_has_empty_tallies_without_a_read_and_counts_its_first_batch(
    spark, tmp_path, monkeypatch
):
    """A staging table holding only its CREATE (a new warehouse: every first run) has empty
    tallies, known without reading it; opened again after a batch, it is read as before."""
    wh = str(tmp_path / "wh")
    with monkeypatch.context() as m:
        m.setattr(Staging, "_increments", _no_aggregate)
        m.setattr(Staging, "_stored_tallies", lambda self: _no_aggregate(self, None, None))
        new = Staging(spark, wh)
        assert new.tally("src").to_dict() == Staging(spark, wh).tally("src").to_dict()
        assert new.tally("src").partitions == {}
    new.stage("src", _batch(spark, new, FIRST))
    assert new.tally("src").to_dict() == _derived(spark, wh)
    assert sorted(new.tally("src").partitions) == [("t", 0), ("t", 1)]
    # The other sources of that warehouse stay empty; a later open reads the table.
    assert new.tally("other").partitions == {}
    assert Staging(spark, wh).tally("src").to_dict() == _derived(spark, wh)
