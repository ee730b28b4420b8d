"""Commit one planned DDL to one target: its Delta parts, each its own commit with the marker.

The plan decided everything (`plan.target_ddl` and `plan.ddl_parts`: the changes, the
decisions, the parts); this module only carries the parts out. Every part is a Delta commit
carrying the target's marker with the part's index, so a run killed half-way through a
multi-clause ALTER resumes at the next part. The upstream schema versions the DDL made are
recorded in the schema history first. Must not decide policy, and must not touch any target
but its own, except to read (time travel) the rows of a target whose upstream table was
renamed onto this one.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from ticdc_sync.core.errors import BlockedError
from ticdc_sync.core.sqlgen import COMMIT_TS, quote, sql_string, table_ref
from ticdc_sync.core.upstream import key
from ticdc_sync.core.window import Marker
from ticdc_sync.plan.model import (
    COPY_SOURCE,
    OP_BACKFILL,
    OP_COPY_FROM,
    OP_CREATE,
    OP_REBUILD,
    OP_RECORD,
    DeltaPart,
    TargetDdl,
)
from ticdc_sync.spark.apply.relayout import keep_clustering
from ticdc_sync.spark.runtime import metadata_commit
from ticdc_sync.spark.runtime.conf import commit_marker
from ticdc_sync.spark.runtime.delta_log import has_data_files, table_exists
from ticdc_sync.warehouse.locations import find_target

# The schema history marks a table that is gone (dropped, renamed away) with its last
# schema and this comment (`warehouse.DROPPED` reads it).
DROPPED = "\x00ticdc_sync:dropped"


def blocked_error(target: str, d: TargetDdl) -> BlockedError:
    hint = f" (hint: set {d.setting}, then run again)" if d.setting else ""
    return BlockedError(
        f"target {target} is blocked at commit_ts {d.commit_ts} ({d.where}) by DDL "
        f"`{d.sql}`: {d.reason}{hint}"
    )


def apply_ddl(w, marker: Marker, d: TargetDdl, ahead: bool, recorded: bool = False) -> Marker:
    """Apply `d` to the target of writer `w` from `marker`; the new marker. `recorded`: its
    versions are in the schema history already (a round records those of all its targets'
    DDL in one commit, `history_rows`)."""
    ts = d.commit_ts
    if d.rename_from:
        _check_caught_up(w, d.rename_from, ts)
    if not recorded:
        rows = history_rows(w, d)
        if rows:
            w.state.history.append(rows)
    n = len(d.parts)
    for k in range(marker.parts_done(ts), n):
        last = k == n - 1
        # A DDL moved ahead of its rows (fuse_additive) must not claim them as applied.
        applied = marker.applied_ts if ahead else ts if last else ts - 1
        m = Marker(applied_ts=max(marker.applied_ts, applied), ddl_ts=ts, ddl_part=k, ddl_parts=n)
        _execute(w, d.parts[k], m, ts)
        marker = m
    described = [s.decision.describe for s in d.steps] or [f"recorded: {d.sql}"]
    w.result.ddl_applied.extend(described)
    for text in described:
        w.out(f"  {w.name}: DDL at {ts}: {text}")
    return marker


def apply_features(w, marker: Marker, parts: tuple[DeltaPart, ...]) -> None:
    """The commits that bring the target's table features to its `table_features` setting.
    Each carries the marker unchanged (no row or DDL is applied by them); a run killed half
    way repeats what the next plan still finds (DROP FEATURE resumes where it stopped)."""
    for part in parts:
        _execute(w, part, marker, marker.ddl_ts)
        w.out(f"  {w.name}: {part.describe}")


def history_rows(w, d: TargetDdl) -> list[tuple]:
    """The upstream versions this DDL made, for the tables of this target, as schema history
    rows (upstream truth: a resumed run or another target may record the same version
    again; readers keep one)."""
    from ticdc_sync.core.upstream import TableSchema

    rows = []
    mine = {key(db, t) for db, t in w.plan.upstreams}
    for e in d.group.effects:
        for name, schema in ((e.old, e.before), (e.new, e.after)):
            if name is None or key(*name) not in mine:
                continue
            if name == e.new and schema is not None:
                rows.append((name[0], name[1], d.commit_ts, e.sql, schema.to_json(), w.source.name))
            elif name == e.old and (e.new is None or key(*e.new) != key(*name)) and e.before:
                gone: TableSchema = e.before.with_(comment=DROPPED)
                rows.append((name[0], name[1], d.commit_ts, e.sql, gone.to_json(), w.source.name))
    return rows


def _check_caught_up(w, source_target: str, ts: int) -> None:
    """Rows move in from `source_target` as of just before `ts`: it must have got there."""
    from ticdc_sync.spark.runtime.delta_log import target_marker

    loc = find_target(w.state.warehouse, source_target, lambda p: table_exists(w.spark, p))
    if not table_exists(w.spark, loc):
        return
    m = target_marker(w.spark, loc)
    if m is not None and (m.applied_ts >= ts - 1 or m.ddl_ts >= ts):
        return
    raise BlockedError(
        f"target {w.name} waits at commit_ts {ts}: its rows come from target {source_target} "
        f"(RENAME TABLE or EXCHANGE PARTITION), which has not reached commit_ts {ts - 1} "
        f"(applied up to {m.applied_ts if m else -1}) (hint: unblock {source_target} first; "
        f"with --select, select it too)"
    )


def _execute(w, part: DeltaPart, m: Marker, ts: int) -> None:
    spark = w.spark
    if part.op == OP_CREATE:
        assert part.schema is not None
        with commit_marker(spark, m, "ddl.part", target=w.name):
            w.create(part.schema, part.properties, part.partition_by, part.cluster_by)
        return
    if part.op == OP_BACKFILL:
        # Skipped on a target without data files (a DDL moved ahead of the first rows):
        # no commit; the next one carries the marker, and until then a resumed run re-checks.
        if not has_data_files(spark, w.location):
            return
        with commit_marker(spark, m, "ddl.part", target=w.name):
            spark.sql(part.sql)
        return
    if part.op == OP_REBUILD:
        _rebuild(w, part, m)
        return
    if part.op == OP_COPY_FROM:
        with commit_marker(spark, m, "ddl.part", target=w.name):
            _copy_from(w, part.source_target or "", ts, part.sql)
        return
    with commit_marker(spark, m, "ddl.part", target=w.name):
        if _metadata_only(w, part):
            return
        try:
            assert part.sql is not None
            spark.sql(part.sql)
        except Exception as e:  # noqa: BLE001 - tolerated "already done" cases only
            if not any(t in str(e) for t in part.tolerate):
                raise
            # Already applied (a shard's twin DDL, or a resumed run): still commit the marker.
            spark.sql(
                f"ALTER TABLE {w.ref} SET TBLPROPERTIES ('ticdc_sync.last_ddl_ts' = "
                f"{sql_string(str(ts))})"
            )


def _metadata_only(w, part: DeltaPart) -> bool:
    """Whether `part`, a metadata-only commit, was made without Spark (`metadata_commit`:
    the commit the statement writes, for the tables where it is the same)."""
    if part.added is not None:
        return metadata_commit.try_add_column(w.spark, w.location, part.added)
    if part.op == OP_RECORD and part.properties:
        return metadata_commit.try_set_properties(w.spark, w.location, dict(part.properties))
    return False


def _copy_from(w, source_target: str, ts: int, sql: str | None = None) -> None:
    """Rows of `source_target` as of just before `ts` (time travel to its newest version
    whose marker has not started the DDL at `ts`), into this target: the plan's `sql` with
    that version in place of `COPY_SOURCE` (EXCHANGE PARTITION), else every row, column by
    column (RENAME TABLE). A source target that does not exist has no rows to give."""
    spark = w.spark
    loc = find_target(w.state.warehouse, source_target, lambda p: table_exists(spark, p))
    version = _version_before(spark, loc, ts) if table_exists(spark, loc) else None
    if version is None:
        spark.sql(
            f"ALTER TABLE {w.ref} SET TBLPROPERTIES ('ticdc_sync.last_ddl_ts' = {sql_string(str(ts))})"
        )
        return
    if sql is not None:
        spark.sql(sql.replace(COPY_SOURCE, f"{table_ref(loc)} VERSION AS OF {version}"))
        return
    mine = {f.name for f in spark.read.format("delta").load(w.location).schema}
    old = spark.read.format("delta").option("versionAsOf", version).load(loc)
    cols = ", ".join(quote(c) for c in old.columns if c in mine)
    spark.sql(
        f"INSERT INTO {w.ref} ({cols}) SELECT {cols} FROM {table_ref(loc)} VERSION AS OF "
        f"{version} WHERE {quote(COMMIT_TS)} < {ts}"
    )


def _version_before(spark, location: str, ts: int) -> int | None:
    """The newest version of a target whose marker has not started the DDL at `ts`."""
    rows = spark.sql(f"DESCRIBE HISTORY {table_ref(location)}").collect()
    best = None
    for r in sorted(rows, key=lambda r: r["version"], reverse=True):
        m = Marker.from_user_metadata(r["userMetadata"])
        if m is None:
            continue
        if m.ddl_ts < ts:
            best = r["version"]
            break
    if best is None and rows:
        # No marker at all before `ts`: the table as first created (no rows yet).
        best = min(r["version"] for r in rows)
    return best


def _rebuild(w, part: DeltaPart, m: Marker) -> None:
    """Rewrite the table with one column changed, in one commit: cast (a narrowing, opted in
    with `narrow_column: rebuild`, or a widening without type widening), renamed or left
    out (without column mapping: `table_features`). A column that is not there any more
    (a shard's twin DDL) leaves the table as it is; the commit still records the marker."""
    spark = w.spark
    df = spark.read.format("delta").load(w.location)
    assert part.column is not None
    col = part.column.lower()
    if not any(c.lower() == col for c in df.columns):
        with commit_marker(spark, m, "ddl.part", target=w.name):
            spark.sql(
                f"ALTER TABLE {w.ref} SET TBLPROPERTIES ('ticdc_sync.last_ddl_ts' = "
                f"{sql_string(str(m.ddl_ts))})"
            )
        return
    cols = []
    for c in df.columns:
        if c.lower() != col:
            cols.append(F.col(quote(c)))
        elif part.drop_column:
            continue
        elif part.new_name is not None:
            cols.append(F.col(quote(c)).alias(part.new_name))
        else:
            assert part.new_type is not None
            cols.append(F.col(quote(c)).cast(part.new_type).alias(c))
    writer = df.select(*cols).write.format("delta").mode("overwrite")
    writer = writer.option("overwriteSchema", "true")
    if w.plan.partition_by:
        # The table's own partitioning, which an overwrite of the schema would drop (a DDL
        # never drops or renames a partition column: `policy.layout_column`).
        writer = writer.partitionBy(*w.plan.partition_by)
    with commit_marker(spark, m, "ddl.part", target=w.name):
        writer.save(w.location)
    keep_clustering(w, w.plan.cluster_by)
