"""The rewrite path (`spark.apply.rewrite`) against the MERGE it stands in for.

- The rules (`merge_rules.merged`) give the rows and counts of each mode's MERGE statement
  (`MERGE_SQL`), over random segments with replays, deletes of unknown keys, older changes
  than the table holds, and key moves, applied round after round to the same table.
- A run leaves folders that no commit names (a killed run's) removed before its first
  write, and every committed file in place; a table delta-rs wrote a hundred commits and a
  checkpoint to stays readable by Spark and takes a MERGE.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

from ticdc_sync.core.model import Mode
from ticdc_sync.core.sqlgen import COMMIT_TS, OP_COL, table_ref
from ticdc_sync.core.sqlgen_history import HAS_ROW, MERGE_SQL, MODE_COLUMNS
from ticdc_sync.core.window import Marker
from ticdc_sync.spark.apply import mode_rows
from ticdc_sync.spark.apply.merge_rules import DELETED, INSERTED, UPDATED, merged
from ticdc_sync.spark.apply.rewrite import Table, remove_orphans

pytestmark = [pytest.mark.spark]

COLUMNS = ["id", "name", "v"]
CHANGE = "id INT, name STRING, v INT, __op STRING, __rank INT"


def _changes(spark, rnd: random.Random, ts0: int, keys: range):
    """Random per-key changes as `rows.TargetWriter.collapse` explodes them: position
    columns and `__c` (the row, `__op` U or D, `__rank`); some at a commit_ts older than
    the table holds (replays), some deletes of keys that were never there."""
    rows = []
    for i in range(rnd.randint(5, 25)):
        k = rnd.choice(keys)
        ts = ts0 + rnd.randint(-30, 30)
        if rnd.random() < 0.3:
            rows.append((ts, 0, i, 0, (k, None, None, "D", 0)))
        else:
            rows.append((ts, 0, i, 0, (k, f"n{rnd.randint(0, 9)}", rnd.randint(0, 99), "U", 1)))
    return spark.createDataFrame(
        rows,
        f"commit_ts BIGINT, partition INT, offset BIGINT, idx INT, __c STRUCT<{CHANGE}>",
    )


def _mirror_source(both):
    """The mirror's collapse: each key's last change (`rows.TargetWriter.collapse`)."""
    from pyspark.sql import Window

    c = F.col("__c")
    w = Window.partitionBy(c["id"]).orderBy(
        F.col("commit_ts").desc(), c["__rank"].desc(), F.col("offset").desc()
    )
    last = both.withColumn("__n", F.row_number().over(w)).where("__n = 1")
    return last.select(
        *[c[n].alias(n) for n in COLUMNS],
        F.col("commit_ts").alias(COMMIT_TS),
        c[OP_COL].alias(OP_COL),
    )


def _source(mode: Mode, both):
    if mode is Mode.MIRROR:
        return _mirror_source(both)
    return mode_rows.source(mode, both, ["id"], COLUMNS)


def _rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize("mode", [Mode.MIRROR, Mode.SOFT_DELETE, Mode.HISTORY])
def test_the_rules_give_the_merge_statement_s_rows_and_counts(spark, tmp_path, mode):
    rnd = random.Random(f"rules-{mode.value}")
    extra = ", ".join(f"`{n}` {t}" for n, t in MODE_COLUMNS[mode])
    ddl = f"id INT, name STRING, v INT, {COMMIT_TS} BIGINT" + (f", {extra}" if extra else "")
    loc = str(tmp_path / "t")
    spark.createDataFrame([], ddl).write.format("delta").save(loc)
    for rnd_i in range(4):
        both = _changes(spark, rnd, 1000 * (rnd_i + 1), range(12))
        src = _source(mode, both).localCheckpoint()
        before = spark.read.format("delta").load(loc).localCheckpoint()
        counts = Observation()
        expected = _rows(merged(before, src, mode, ["id"], COLUMNS, counts))
        seen = counts.get
        src.createOrReplaceTempView("rules_src")
        metrics = spark.sql(
            MERGE_SQL[mode](table_ref(loc), "rules_src", ["id"], COLUMNS)
        ).collect()[0]
        after = _rows(spark.read.format("delta").load(loc))
        assert after == expected, f"round {rnd_i}"
        for name in (INSERTED, UPDATED, DELETED):
            assert int(seen[name]) == int(metrics[name]), (rnd_i, name, seen, metrics)
    assert after, "the rounds left rows to compare"


def test_rules_of_a_soft_delete_keep_the_row_a_delete_without_values_marks(spark, tmp_path):
    """A soft-delete source row without the row's values (`__has_row` false) marks the
    table's row and keeps its values; for a key the table does not hold, it is nothing."""
    target = spark.createDataFrame(
        [(1, "a", 10, 5, False, None, None)],
        f"id INT, name STRING, v INT, {COMMIT_TS} BIGINT, _is_deleted BOOLEAN, "
        "_deleted_ts BIGINT, _deleted_at TIMESTAMP",
    )
    src = spark.createDataFrame(
        [(1, None, None, 9, "D", False), (2, None, None, 9, "D", False)],
        f"id INT, name STRING, v INT, {COMMIT_TS} BIGINT, {OP_COL} STRING, {HAS_ROW} BOOLEAN",
    )
    (row,) = merged(target, src, Mode.SOFT_DELETE, ["id"], COLUMNS).collect()
    assert (row["id"], row["name"], row["v"], row[COMMIT_TS]) == (1, "a", 10, 9)
    assert row["_is_deleted"] is True and row["_deleted_ts"] == 9


def _target_with_rows(spark, tmp_path: Path) -> str:
    from ticdc_sync.spark.runtime.conf import commit_marker

    loc = str(tmp_path / "t")
    spark.createDataFrame(
        [(1, "a", 1, 1)], f"id INT, name STRING, v INT, {COMMIT_TS} BIGINT"
    ).write.format("delta").save(loc)
    with commit_marker(spark, Marker(1), "merge"):
        spark.sql(f"INSERT INTO {table_ref(loc)} VALUES (2, 'b', 2, 1)")
    return loc


def test_orphan_folders_go_and_committed_ones_stay(spark, tmp_path):
    loc = _target_with_rows(spark, tmp_path)
    table = Table(loc)
    version = table.version
    # A committed rewrite: files in an rs- folder that the next commit adds.
    committed = f"rs-{version + 1:020d}-{uuid.uuid4().hex}"
    spark.read.format("delta").load(loc).coalesce(1).write.parquet(f"{loc}/{committed}")
    name = next(p.name for p in (Path(loc) / committed).iterdir() if p.name.endswith(".parquet"))
    from deltalake.transaction import AddAction, RemoveAction

    size = (Path(loc) / committed / name).stat().st_size
    removes = [RemoveAction(p, True, 0, s, {}) for p, s in table.files()]
    table.commit(
        [*removes, AddAction(f"{committed}/{name}", size, {}, 0, True, '{"numRecords":2}')],
        Marker(2),
        "rewrite.commit",
        "t",
    )
    # Two that no commit names: one for the next version, one for a version long taken.
    table = Table(loc)
    ahead = f"rs-{table.version + 1:020d}-{uuid.uuid4().hex}"
    taken = f"rs-{version:020d}-{uuid.uuid4().hex}"
    for orphan in (ahead, taken):
        (Path(loc) / orphan).mkdir()
        (Path(loc) / orphan / "part-0.parquet").write_bytes(b"not committed")
    assert sorted(remove_orphans(table)) == sorted([ahead, taken])
    assert (Path(loc) / committed / name).exists()
    assert not (Path(loc) / ahead).exists() and not (Path(loc) / taken).exists()
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(loc).collect())
    assert rows == [(1, "a", 1, 1), (2, "b", 2, 1)]
    assert remove_orphans(Table(loc)) == []


def test_a_table_delta_rs_committed_to_a_hundred_times_stays_spark_s(spark, tmp_path):
    """delta-rs writes a checkpoint every hundred commits (and no `.crc`): Spark reads the
    table, its history's markers and takes a MERGE on it after them."""
    loc = _target_with_rows(spark, tmp_path)
    for i in range(105):
        Table(loc).commit([], Marker(10 + i), "marker", "t")
    assert any(p.name.endswith(".checkpoint.parquet") for p in (Path(loc) / "_delta_log").iterdir())
    from ticdc_sync.spark.runtime.delta_log import target_marker

    assert target_marker(spark, loc) == Marker(114)
    spark.createDataFrame(
        [(2, "B", 3, 200, "U")], f"id INT, name STRING, v INT, {COMMIT_TS} BIGINT, {OP_COL} STRING"
    ).createOrReplaceTempView("hundred_src")
    spark.sql(MERGE_SQL[Mode.MIRROR](table_ref(loc), "hundred_src", ["id"], COLUMNS)).collect()
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(loc).collect())
    assert rows == [(1, "a", 1, 1), (2, "B", 3, 200)]
