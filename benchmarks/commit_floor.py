"""The floor under a target's fixed cost: what one Spark job, one Delta commit and one small
MERGE cost in one warm JVM, per table, over many small tables.

Usage: python benchmarks/commit_floor.py [--tables 20] [--rows 2000] [--changes 200]
                                        [--rounds 3]

`--tables` small Delta tables shaped like a target (4 columns, `--rows` rows in one file,
no deletion vectors). Each round runs every variant once over every table, the variants'
order rotating each round; a variant's figure is the median over rounds of its time per
table. Each round's changes are `--changes` rows per table (half updates of existing keys,
half new keys), copied to local disk before the clock starts, as the engine copies a
MERGE source. Variants:
- `job`: a trivial Spark job (a sum over `--changes` numbers): Spark's own floor;
- `sql commit`: `ALTER TABLE ... SET TBLPROPERTIES` (a commit with no data, through SQL);
- `append`: `INSERT INTO` the table from its changes (the new keys only);
- `merge`: the MERGE of its changes, with the settings the engine gives a small target
  (no adaptive execution, one shuffle partition, files rewritten, interpreted);
- `rewrite`: the same rows landed by one `INSERT OVERWRITE` of the whole table: its rows
  whose key has no change (an anti join against the broadcast changes), then the changes;
  the same settings;
- `one write for all`: a single job that writes every table's changes as Parquet files,
  one folder per table, timed once and divided by the table count: what the tables of a
  round share if their files are written together and each table then only commits;
- `rs commit`: a commit with no data through delta-rs (`create_write_transaction`), no JVM;
- `rs rewrite`: the rows of `rewrite` landed without Delta's JVM writer: Spark reads the
  table's files as delta-rs lists them (no Delta snapshot), writes the new content as
  Parquet into the table's folder (physical column names, as column mapping keeps them), and
  delta-rs commits the removal of the old files and the new ones with a marker in one
  commit. The shape of a write that commits per table without a MERGE.

`--column-mapping` creates the tables with `delta.columnMapping.mode = name`, as targets are.

Jobs per operation are counted from the job group each variant runs in. Not part of the
test suite; it touches no ticdc-sync state, only its own temporary tables.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as R  # noqa: E402

from ticdc_sync.core.sqlgen import table_ref  # noqa: E402
from ticdc_sync.spark.apply.rows import (  # noqa: E402
    ADAPTIVE,
    MATERIALIZE,
    MERGE_DELETION_VECTORS,
    SHUFFLE_PARTITIONS,
)
from ticdc_sync.spark.runtime.conf import INTERPRETED, session_confs  # noqa: E402

# The settings `TargetWriter.merge` gives a small target's MERGE of a one-partition source.
SMALL_MERGE = {
    ADAPTIVE: "false",
    SHUFFLE_PARTITIONS: "1",
    MERGE_DELETION_VECTORS: "false",
    MATERIALIZE: "none",
    **INTERPRETED,
}


def _ref(path: Path) -> str:
    return table_ref(str(path))


def _make_tables(
    spark, root: Path, tables: int, rows: int, column_mapping: bool = False
) -> list[Path]:
    paths = []
    mapping = ", 'delta.columnMapping.mode' = 'name'" if column_mapping else ""
    for i in range(tables):
        p = root / f"t{i:03d}"
        spark.sql(
            f"CREATE TABLE {_ref(p)} (id BIGINT, name STRING, v BIGINT, _commit_ts BIGINT) "
            f"USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false'{mapping})"
        )
        spark.range(rows).selectExpr(
            "id", "concat('n', id) AS name", "id * 7 AS v", "0L AS _commit_ts"
        ).coalesce(1).write.format("delta").mode("append").save(str(p))
        paths.append(p)
    return paths


def _changes(spark, rnd: int, rows: int, changes: int):
    """`changes` rows: half updates of existing keys, half keys new in this round."""
    half = changes // 2
    df = spark.range(changes).selectExpr(
        f"CASE WHEN id < {half} THEN id * 3 + {rnd} ELSE {rows} + {rnd} * {changes} + id END AS id",
        f"concat('r{rnd}-', id) AS name",
        "id AS v",
        f"{rnd + 1}L AS _commit_ts",
    )
    return df.coalesce(1).localCheckpoint(eager=True)


class Jobs:
    """Counts the Spark jobs run under a job group."""

    def __init__(self, spark) -> None:
        self.sc = spark.sparkContext
        self.n = 0

    def group(self, name: str) -> str:
        self.n += 1
        group = f"floor-{name}-{self.n}"
        self.sc.setJobGroup(group, group)
        return group

    def count(self, group: str) -> int:
        return len(self.sc.statusTracker().getJobIdsForGroup(group))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--column-mapping", action="store_true")
    args = ap.parse_args()

    spark = R.session()
    jobs = Jobs(spark)
    root = Path(tempfile.mkdtemp(prefix="commit-floor-"))
    try:
        paths = _make_tables(spark, root / "tables", args.tables, args.rows, args.column_mapping)
        names = [
            "job",
            "sql commit",
            "append",
            "merge",
            "rewrite",
            "one write for all",
            "rs commit",
            "rs rewrite",
        ]
        times: dict[str, list[float]] = {n: [] for n in names}
        counts: dict[str, list[int]] = {n: [] for n in names}
        # A warm-up round, not counted: the first of each statement compiles and loads.
        for rnd in range(args.rounds + 1):
            sources = [_changes(spark, rnd, args.rows, args.changes) for _ in paths]
            order = names[rnd % len(names) :] + names[: rnd % len(names)]
            for name in order:
                group = jobs.group(name.replace(" ", "-"))
                t0 = time.perf_counter()
                _variant(spark, name, paths, sources, rnd, root)
                dt = time.perf_counter() - t0
                if rnd:
                    times[name].append(dt / len(paths))
                    counts[name].append(jobs.count(group))
            for s in sources:
                s.unpersist()
        print(
            f"{args.tables} tables of {args.rows:,} rows, {args.changes} changes each, "
            f"{args.rounds} rounds (median per table; jobs per table)"
            + (", column mapping" if args.column_mapping else "")
        )
        for name in names:
            per = statistics.median(times[name])
            n_jobs = statistics.median(counts[name]) / (
                1 if name == "one write for all" else len(paths)
            )
            spread = ", ".join(f"{t:.3f}" for t in times[name])
            print(f"  {name:18s} {per:6.3f} s   jobs {n_jobs:4.1f}   rounds: {spread}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


def _variant(spark, name: str, paths: list[Path], sources: list, rnd: int, root: Path) -> None:
    if name == "one write for all":
        from functools import reduce

        from pyspark.sql import functions as F

        parts = [s.withColumn("t", F.lit(i)) for i, s in enumerate(sources)]
        every = reduce(lambda a, b: a.unionByName(b), parts)
        out = root / f"all-{rnd}"
        every.write.partitionBy("t").mode("overwrite").parquet(str(out))
        return
    for path, src in zip(paths, sources, strict=True):
        if name == "rs commit":
            _rs_commit(path, [], rnd)
        elif name == "rs rewrite":
            _rs_rewrite(spark, path, src, rnd)
        elif name == "job":
            spark.range(200).selectExpr("sum(id)").collect()
        elif name == "sql commit":
            spark.sql(
                f"ALTER TABLE {_ref(path)} SET TBLPROPERTIES ('floor.round' = '{rnd}-{name}')"
            ).collect()
        elif name == "append":
            src.where("name LIKE 'r%' AND v >= 0").createOrReplaceTempView("floor_src")
            with session_confs(spark, INTERPRETED):
                spark.sql(
                    f"INSERT INTO {_ref(path)} SELECT id + 1000000000, name, v, _commit_ts "
                    "FROM floor_src"
                ).collect()
        elif name in ("merge", "rewrite"):
            src.createOrReplaceTempView("floor_src")
            with session_confs(spark, SMALL_MERGE):
                spark.sql(
                    f"MERGE INTO {_ref(path)} t USING floor_src s ON t.id = s.id "
                    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
                    if name == "merge"
                    else f"INSERT OVERWRITE {_ref(path)} "
                    f"SELECT /*+ BROADCAST(s) */ t.* FROM {_ref(path)} t "
                    "LEFT ANTI JOIN floor_src s ON t.id = s.id "
                    "UNION ALL SELECT * FROM floor_src"
                ).collect()


def _rs_commit(path: Path, actions: list, rnd: int) -> None:
    """One commit of `actions` through delta-rs, its marker in the commit's userMetadata."""
    import json

    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    dt = DeltaTable(str(path))
    dt.create_write_transaction(
        actions,
        "append",
        dt.schema(),
        commit_properties=CommitProperties(
            custom_metadata={"userMetadata": json.dumps({"floor": {"round": rnd}})}
        ),
    )


def _rs_rewrite(spark, path: Path, src, rnd: int) -> None:
    """The table's rows whose key has no change, then the changes, written as Parquet by one
    Spark job into the table's folder and committed by delta-rs in place of its old files."""
    import os
    import uuid

    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction

    dt = DeltaTable(str(path))
    physical = {
        f.name: f.metadata.get("delta.columnMapping.physicalName", f.name)
        for f in dt.schema().fields
    }
    old = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    current = spark.read.schema(
        ", ".join(f"`{p}` {t}" for p, t in zip(physical.values(), _TYPES, strict=True))
    ).parquet(*[str(path / a["path"]) for a in old])
    current = current.toDF(*physical)
    changes = src.select(*physical)
    rows = current.join(changes.select("id").hint("broadcast"), "id", "left_anti").unionByName(
        changes
    )
    folder = f"rs-{uuid.uuid4().hex}"
    rows.toDF(*physical.values()).coalesce(1).write.parquet(str(path / folder))
    now = int(time.time() * 1000)
    adds = [
        AddAction(f"{folder}/{f.name}", f.stat().st_size, {}, now, True, "")
        for f in sorted(os.scandir(path / folder), key=lambda e: e.name)
        if f.name.endswith(".parquet")
    ]
    removes = [RemoveAction(a["path"], True, now, a["size_bytes"], {}) for a in old]
    _rs_commit(path, removes + adds, rnd)


# The tables' column types, in order (`_make_tables`).
_TYPES = ("BIGINT", "STRING", "BIGINT", "BIGINT")


if __name__ == "__main__":
    main()
