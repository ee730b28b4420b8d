"""A trim of the staging table never holds a poll back, and never takes a staged change from a
reader that may still need it.

Its bound travels first, in the tallies of the next staging commit (`Staging.intend_trim`, a
poll's commit or one of its own); its DELETE runs afterwards, beside the polls
(`maintenance.Maintenance`), in a commit without tallies, and deletes only events the
publishing commit had counted. A read as of a TSO reads staged changes as of the staging
version whose tallies it took, so a DELETE committed meanwhile cannot remove what it reads.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.staged_batches import BATCH_EVENTS, SOURCE, batch
from tests.spark.test_plan_is_program import MT, ddl
from ticdc_sync.core.lake import LakeTable
from ticdc_sync.core.staged import read_carried
from ticdc_sync.read import snapshot as snap
from ticdc_sync.spark import runner
from ticdc_sync.spark.as_of import as_of
from ticdc_sync.spark.staging import trim
from ticdc_sync.spark.staging.maintenance import Maintenance
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.spark.staging.trim import TrimJob
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = pytest.mark.spark

# `tests.spark.staged_batches.batch`: event at offset o has commit_ts 1000 + o.
TS0 = 1000


def history(spark, staging: Staging) -> list:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{staging.events_path}`").collect()
    return sorted(rows, key=lambda r: r["version"])


def trims(spark, staging: Staging) -> list:
    """The commits of trims (`trim.delete`)."""
    return [c for c in history(spark, staging) if c["operation"] == "DELETE"]


def offsets(spark, staging: Staging) -> list[int]:
    df = spark.read.format("delta").load(staging.events_path)
    return sorted(r["offset"] for r in df.select("offset").collect())


def fresh_trimmed(staging: Staging) -> int | None:
    """The trimmed bound a new process reads (the newest commit with tallies)."""
    return Staging(staging.spark, staging.warehouse).tally(SOURCE).trimmed


def test_a_trim_is_published_by_the_next_stage_then_deleted_in_a_commit_of_its_own(spark, tmp_path):
    staging = Staging(spark, str(tmp_path / "wh"))
    staging.stage(SOURCE, batch(spark, 0))
    bound = TS0 + 9
    assert staging.intend_trim(SOURCE, bound)
    assert not staging.intend_trim(SOURCE, bound)  # not lower, not twice
    # Nothing is deleted, and no reader knows of the bound, until a commit carries it.
    assert fresh_trimmed(staging) is None
    assert staging.published(SOURCE).trimmed is None  # type: ignore[union-attr]
    assert TrimJob.of(SOURCE, staging.published(SOURCE)) is None  # type: ignore[arg-type]
    staging.stage(SOURCE, batch(spark, BATCH_EVENTS))
    assert fresh_trimmed(staging) == bound
    published = staging.published(SOURCE)
    assert published is not None and published.trimmed == bound
    assert offsets(spark, staging) == list(range(2 * BATCH_EVENTS))

    tally = Staging(spark, staging.warehouse).tally(SOURCE).to_dict()
    job = TrimJob.of(SOURCE, published)
    assert job is not None
    assert trim.may_delete(staging.events_path, SOURCE, job.upto_ts)
    assert trim.delete(spark, staging.events_path, job) == 10
    assert offsets(spark, staging) == list(range(10, 2 * BATCH_EVENTS))
    (trimmed,) = trims(spark, staging)
    assert trimmed["userMetadata"] is None
    # The tallies a new process reads are those of the stage before it: nothing moved.
    assert Staging(spark, staging.warehouse).tally(SOURCE).to_dict() == tally
    assert not trim.may_delete(staging.events_path, SOURCE, job.upto_ts)


def test_a_poll_that_stages_nothing_still_publishes_a_trim(spark, tmp_path):
    staging = Staging(spark, str(tmp_path / "wh"))
    staging.stage(SOURCE, batch(spark, 0))
    empty = batch(spark, 0).limit(0)
    before = len(history(spark, staging))
    staging.stage(SOURCE, empty)
    assert len(history(spark, staging)) == before  # nothing new: no commit
    staging.intend_trim(SOURCE, TS0 + 4)
    staging.stage(SOURCE, empty)
    assert len(history(spark, staging)) == before + 1
    assert fresh_trimmed(staging) == TS0 + 4
    # A run's last trim publishes its bound in a commit of its own.
    staging.intend_trim(SOURCE, TS0 + 6)
    assert staging.publish()
    assert not staging.publish()
    assert fresh_trimmed(staging) == TS0 + 6
    (last,) = history(spark, staging)[-1:]
    carried = read_carried(last["userMetadata"])
    assert carried is not None and carried.complete


def test_a_trim_deletes_no_event_staged_after_its_bound_was_published(spark, tmp_path):
    """A change older than the bound staged after the commit that published it (TiCDC sends
    changes again after a restart) is not the trim's: its tallies were taken without it."""
    staging = Staging(spark, str(tmp_path / "wh"))
    staging.stage(SOURCE, batch(spark, 0))
    staging.intend_trim(SOURCE, TS0 + 9)
    staging.stage(SOURCE, batch(spark, BATCH_EVENTS, 5))
    job = TrimJob.of(SOURCE, staging.published(SOURCE))  # type: ignore[arg-type]
    assert job is not None
    # Staged after it: offsets past the tally's, commit_ts at or below the bound.
    late = batch(spark, BATCH_EVENTS + 5, 3).withColumn("commit_ts", F.lit(TS0 + 1).cast("long"))
    staging.stage(SOURCE, late)
    assert trim.delete(spark, staging.events_path, job) == 10
    kept = offsets(spark, staging)
    assert kept[:3] == [10, 11, 12] and kept[-3:] == [BATCH_EVENTS + 5 + i for i in range(3)]


def test_polls_go_on_beside_a_trim_and_lose_nothing(spark, tmp_path):
    staging = Staging(spark, str(tmp_path / "wh"))
    offset = 0
    for _ in range(3):
        staging.stage(SOURCE, batch(spark, offset))
        offset += BATCH_EVENTS
    bound = TS0 + BATCH_EVENTS + 4
    staging.intend_trim(SOURCE, bound)
    staging.stage(SOURCE, batch(spark, offset))
    offset += BATCH_EVENTS
    job = TrimJob.of(SOURCE, staging.published(SOURCE))  # type: ignore[arg-type]
    assert job is not None
    maintenance = Maintenance(staging, spark.newSession)
    started = history(spark, staging)[-1]["version"]
    assert maintenance.start([job], compact_above=None)
    # Stage while it runs, as a `--follow` run's polls do, back to back (bounded: it ends
    # on its own).
    for _ in range(40):
        if not maintenance.busy():
            break
        staging.stage(SOURCE, batch(spark, offset))
        offset += BATCH_EVENTS
    assert maintenance.wait(timeout=300)
    (ended,) = maintenance.ended()
    assert ended.trimmed == {SOURCE: (bound, BATCH_EVENTS + 5)}, ended
    assert not ended.failed
    assert ended.compacted is None

    # Stages committed while it ran, and it committed after them all the same.
    commits = history(spark, staging)
    (d,) = trims(spark, staging)
    beside = [
        c["version"]
        for c in commits
        if c["operation"] == "WRITE" and started < c["version"] < d["version"]
    ]
    assert beside, [(c["version"], c["operation"], c["readVersion"]) for c in commits]
    staging.stage(SOURCE, batch(spark, offset))
    offset += BATCH_EVENTS
    assert offsets(spark, staging) == list(range(BATCH_EVENTS + 5, offset))
    fresh = Staging(spark, staging.warehouse).tally(SOURCE)
    (p,) = fresh.partitions.values()
    assert p.last_offset == offset - 1
    assert fresh.tables[("shop", "a")][0] == offset  # every row counted once, trimmed too
    assert fresh.trimmed == bound


def test_a_read_takes_the_staged_changes_of_its_own_tallies_while_a_trim_deletes(
    spark, tmp_path, monkeypatch
):
    """A read as of a TSO whose version needs staged changes, and a trim past them published
    and deleted between the read's tallies and its frames: the read still holds them."""
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables='  - upstream: "shop.*"\n    name: "{table}"\n',
    )
    cols = "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))"
    first = [
        ddl("orders", 100, cols, "CREATE"),
        canal_row("shop", "orders", "INSERT", 200, {"id": "1", "v": "a"}, MT, ["id"]),
        wm(300),
    ]
    more = [
        canal_row(
            "shop",
            "orders",
            "UPDATE",
            400,
            {"id": "1", "v": "b"},
            MT,
            ["id"],
            {"id": "1", "v": "a"},
        ),
        canal_row("shop", "orders", "INSERT", 410, {"id": "2", "v": "c"}, MT, ["id"]),
        wm(500),
    ]
    write_captures(root, "t", [(0, i, None, m) for i, m in enumerate(first)])
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda _s: None) == 0
    write_captures(root, "t", [(0, len(first) + i, None, m) for i, m in enumerate(more)])
    assert runner.run(project, spark=spark, out=lambda _s: None) == 0

    staging = Staging(spark, warehouse_path(project))
    real = snap.snapshot

    def then_trimmed(*args, **kwargs):
        found = real(*args, **kwargs)
        # The run that trims, between the read's snapshot and its frames: 400 and 410 go.
        staging.intend_trim("src", 420)
        assert staging.publish()
        job = TrimJob.of("src", staging.published("src"))  # type: ignore[arg-type]
        assert job is not None and trim.delete(spark, staging.events_path, job) > 0
        return found

    monkeypatch.setattr(snap, "snapshot", then_trimmed)
    read = as_of(spark, project, 450)
    assert read.applied["orders"] == 300 and read.pending["orders"] == 2
    got = sorted((r["id"], r["v"]) for r in read.frames["orders"].collect())
    assert got == [(1, "b"), (2, "c")]
    monkeypatch.undo()
    kept = LakeTable(staging.events_path).read(["commit_ts"], [("kind", "=", "row")])
    assert kept.num_rows == 0  # trimmed indeed: 200, 400 and 410
    # A read after the trim knows of it: the version at 300 cannot be read at 450 now.
    with pytest.raises(Exception, match="were trimmed"):
        as_of(spark, project, 450)


def test_without_a_jvm_the_trim_is_one_sql_delete_of_the_same_events(spark, tmp_path):
    """A Spark Connect session has no JVM to reach: its trim is a SQL DELETE, of the same
    events (and, lost to a poll, raises `LostToPolls` to be tried again)."""
    kept = []
    for way in (trim._delete_apart, trim._delete_sql):
        staging = Staging(spark, str(tmp_path / way.__name__))
        staging.stage(SOURCE, batch(spark, 0))
        staging.intend_trim(SOURCE, TS0 + 9)
        staging.stage(SOURCE, batch(spark, BATCH_EVENTS, 5))
        job = TrimJob.of(SOURCE, staging.published(SOURCE))  # type: ignore[arg-type]
        assert job is not None
        late = batch(spark, BATCH_EVENTS + 5, 3).withColumn("commit_ts", F.lit(TS0).cast("long"))
        staging.stage(SOURCE, late)
        assert way(spark, staging.events_path, job) == 10
        kept.append(offsets(spark, staging))
    assert (
        kept[0]
        == kept[1]
        == [*range(10, BATCH_EVENTS + 5), *range(BATCH_EVENTS + 5, BATCH_EVENTS + 8)]
    )
