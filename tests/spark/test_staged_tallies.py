"""The tallies a staging commit carries count its own batch: a run, `plan` and a read as of
`latest` take what is staged from the newest commit alone, and it equals what the table
yields. A commit of an earlier version (tallies from before its batch) is completed by an
aggregate."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from tests.spark.engine_harness import as_staged_columns
from ticdc_sync.core.lake import LakeTable
from ticdc_sync.core.staged import STAGED_KEY, SourceTally, read_carried
from ticdc_sync.spark.runtime.conf import user_metadata
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse import read as warehouse

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


def _derived(state: Staging) -> dict:
    """The tally of every event the table holds for `src`, aggregated from the table."""
    t = SourceTally()
    t.fold(state._aggregate(state.events().where(F.col("source") == "src")))
    return t.to_dict()


def _stage_as_an_earlier_version(state: Staging, before: SourceTally, rows) -> None:
    """Stage `rows` for `src` as earlier versions did: a commit carrying the tallies from
    before its batch (`before`), without `own_events`."""
    older = json.dumps({STAGED_KEY: {"v": 1, "sources": {"src": before.to_dict()}}})
    with user_metadata(state.spark, older, "staging.tallies"):
        _batch(state.spark, state, rows).select(F.lit("src").alias("source"), "*").write.format(
            "delta"
        ).mode("append").save(state.events_path)


def _no_aggregate(self, events):
    raise AssertionError("the newest commit's tallies were not used")


def _newest_carried(state: Staging):
    return read_carried(
        state.spark.sql(f"DESCRIBE HISTORY delta.`{state.events_path}` LIMIT 1").collect()[0][
            "userMetadata"
        ]
    )


def test_a_commit_carries_its_own_batch_and_a_new_run_starts_from_it(spark, tmp_path, monkeypatch):
    wh = str(tmp_path / "wh")
    first = Staging(spark, wh)
    first.stage("src", _batch(spark, first, FIRST))
    first.stage("src", _batch(spark, first, SECOND))
    expected = first.tally("src").to_dict()
    assert expected == _derived(first)
    assert [p[2] for p in expected["partitions"]] == [3, 2]  # last offsets
    assert [p[3] for p in expected["partitions"]] == [10, 25]  # watermarks of the 2nd batch

    carried = _newest_carried(first)
    assert carried is not None and carried.complete
    assert carried.sources["src"].to_dict() == expected
    # `plan` and `status` (no JVM) read the same from the newest commit.
    tallies, complete = warehouse._newest_tallies(LakeTable(first.events_path))
    assert complete and tallies["src"].to_dict() == expected

    monkeypatch.setattr(Staging, "_aggregate", _no_aggregate)
    assert Staging(spark, wh).tally("src").to_dict() == expected


def test_a_batch_read_back_after_its_write_is_followed_by_a_commit_of_its_tallies(
    spark, tmp_path, monkeypatch
):
    """A catch-up's batch (not kept): its write carries the tallies from before it, and an
    empty commit right after carries them with it."""
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    state.stage("src", _batch(spark, state, FIRST))
    before = state.tally("src").to_dict()
    state.stage("src", _batch(spark, state, SECOND), keep=False)
    expected = state.tally("src").to_dict()
    assert expected == _derived(state)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{state.events_path}` LIMIT 2").collect()
    newest, write = (read_carried(h["userMetadata"]) for h in history)
    assert newest.complete and newest.sources["src"].to_dict() == expected
    assert history[0]["operationMetrics"]["numOutputRows"] == "0"
    assert not write.complete and write.sources["src"].to_dict() == before
    tallies, complete = warehouse._newest_tallies(LakeTable(state.events_path))
    assert complete and tallies["src"].to_dict() == expected
    monkeypatch.setattr(Staging, "_aggregate", _no_aggregate)
    assert Staging(spark, wh).tally("src").to_dict() == expected


def test_a_compaction_after_the_newest_stage_changes_nothing(spark, tmp_path, monkeypatch):
    """OPTIMIZE and VACUUM carry no tallies: readers take the newest commit that does."""
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    state.stage("src", _batch(spark, state, FIRST))
    state.stage("src", _batch(spark, state, SECOND))
    expected = state.tally("src").to_dict()
    state.compact()
    assert _newest_carried(state) is None
    assert warehouse._newest_tallies(LakeTable(state.events_path)) == (
        {"src": state.tally("src")},
        True,
    )
    monkeypatch.setattr(Staging, "_aggregate", _no_aggregate)
    assert Staging(spark, wh).tally("src").to_dict() == expected


def test_a_commit_of_an_earlier_version_is_completed_from_the_events_after_its_tallies(
    spark, tmp_path
):
    """Earlier versions' commits carried the tallies from before their own batch."""
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    state.stage("src", _batch(spark, state, FIRST))
    before = state.tally("src")
    _stage_as_an_earlier_version(state, before, SECOND)

    tallies, complete = warehouse._newest_tallies(LakeTable(state.events_path))
    assert not complete and tallies["src"].to_dict() == before.to_dict()
    fresh = Staging(spark, wh).tally("src").to_dict()
    assert fresh != before.to_dict()
    assert fresh == _derived(state)
    assert [p[2] for p in fresh["partitions"]] == [3, 2]
    # The next commit, of another source, carries `src`'s tally with that batch in it.
    upgraded = Staging(spark, wh)
    upgraded.stage("other", _batch(spark, upgraded, FIRST))
    carried = _newest_carried(upgraded)
    assert carried is not None and carried.complete
    assert carried.sources["src"].to_dict() == fresh


def test_a_batch_of_nothing_completes_an_earlier_version_s_tallies(spark, tmp_path):
    """A warehouse an earlier version staged last, then a run with nothing new: its empty
    batch commits the complete tallies (`plan` no longer notes the newest batch as not
    counted); on a table whose tallies are complete, nothing new makes no commit."""
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    before = state.tally("src")
    _stage_as_an_earlier_version(state, before, FIRST)
    table = LakeTable(state.events_path)
    assert not warehouse._newest_tallies(table)[1]
    upgraded = Staging(spark, wh)
    upgraded.stage("src", _batch(spark, upgraded, []))
    tallies, complete = warehouse._newest_tallies(LakeTable(state.events_path))
    assert complete and tallies["src"].to_dict() == _derived(state)
    version = LakeTable(state.events_path).version()
    Staging(spark, wh).stage("src", _batch(spark, upgraded, []))
    assert LakeTable(state.events_path).version() == version


def test_a_new_staging_table_has_empty_tallies_without_a_read_and_counts_its_first_batch(
    spark, tmp_path, monkeypatch
):
    """A staging table holding only its CREATE (a new warehouse: every first run) has empty
    tallies, known without reading it; opened again after a batch, it is read as before."""
    wh = str(tmp_path / "wh")
    with monkeypatch.context() as m:
        m.setattr(Staging, "_aggregate", _no_aggregate)
        new = Staging(spark, wh)
        assert new.tally("src").to_dict() == Staging(spark, wh).tally("src").to_dict()
        assert new.tally("src").partitions == {}
    new.stage("src", _batch(spark, new, FIRST))
    assert new.tally("src").to_dict() == _derived(new)
    assert sorted(new.tally("src").partitions) == [("t", 0), ("t", 1)]
    # The other sources of that warehouse stay empty; a later open reads the table.
    assert new.tally("other").partitions == {}
    assert Staging(spark, wh).tally("src").to_dict() == _derived(new)


@pytest.mark.parametrize("keep", [True, False])
def test_a_failed_stage_leaves_the_tallies_as_the_table_has_them(spark, tmp_path, keep):
    """A batch that fails (a bad line, raised inside its job): the tally is the table's,
    and the next batch is staged on it."""
    wh = str(tmp_path / "wh")
    state = Staging(spark, wh)
    state.stage("src", _batch(spark, state, FIRST), keep=keep)
    first = state.tally("src").to_dict()
    broken = _batch(spark, state, SECOND).withColumn(
        "kind", F.when(F.col("offset") == 3, F.raise_error(F.lit("broken"))).otherwise("row")
    )
    with pytest.raises(Exception, match="broken"):
        state.stage("src", broken, keep=keep)
    assert state.tally("src").to_dict() == first == _derived(state)
    state.stage("src", _batch(spark, state, SECOND), keep=keep)
    assert state.tally("src").to_dict() == _derived(state)
    assert Staging(spark, wh).tally("src").to_dict() == _derived(state)
