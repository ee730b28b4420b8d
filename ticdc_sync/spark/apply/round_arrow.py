"""One target of a round, inside the round's Spark job (`applyInArrow`): its collapsed changes
(canonical text, `round_query`) merged with its table's rows in Arrow, written as ONE new
Parquet file into a folder of its own in the table (`rs-<version>-<id>/`), and the file's
facts returned for the driver's commit (`rounds`).

The rules are the mirror MERGE's (`merge_rules._mirror`, `sqlgen.merge_sql`): keys match
null-safely; a change lands only where the table's row is not newer (`_commit_ts`, the
never-regress guard); an upsert inserts or replaces its key's row, a delete removes it, a
delete of a key the table does not hold does nothing. Counts are the MERGE's (inserted,
updated, deleted), so a run's summary is the same whichever path a segment took.

Must not: commit anything (the driver does, after the lease check), import pyspark (this
runs in Spark's Python workers), or write a target whose changes hold a bad row (`bad`:
the rewrite lands it under its `on_bad_message`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

# What a target's function returns: one row.
RESULT = (
    "tid INT, status STRING, path STRING, size BIGINT, rows BIGINT, inserted BIGINT, "
    "updated BIGINT, deleted BIGINT"
)
# In the name of the files a round writes (Spark's own end in `-c000`): how a reader of the
# log tells which path landed a segment.
ROUND_FILE = "r000"
WRITTEN = "written"  # a new file replaces the table's files
SAME = "same"  # the changes change nothing (replays, older changes, deletes of absent keys)
BAD = "bad"  # a row does not fit: not written here


@dataclass(frozen=True)
class TargetFiles:
    """What a target's function needs of its table, read by the driver before the job.
    `columns`: every column of the table in its order (logical name, physical name, Spark
    type); `values`: where each upstream column of the changes' `v` is among them; `keys`:
    where each key is; `commit_ts`: where `_commit_ts` is."""

    tid: int
    uri: str
    options: tuple[tuple[str, str], ...]
    folder: str
    files: tuple[str, ...]
    columns: tuple[tuple[str, str, str], ...]
    values: tuple[int, ...]
    keys: tuple[int, ...]
    commit_ts: int


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type of a Spark simpleString of `write_path.ROUND_TYPES`."""
    simple = {
        "tinyint": pa.int8(),
        "smallint": pa.int16(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "boolean": pa.bool_(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    if spark_type in simple:
        return simple[spark_type]
    if spark_type.startswith("decimal("):
        p, s = spark_type[len("decimal(") : -1].split(",")
        return pa.decimal128(int(p), int(s))
    raise ValueError(f"the round does not carry type {spark_type}")


def from_text(text: pa.Array, spark_type: str) -> pa.Array:
    """The canonical text of values (`round_query.canonical`) as their Arrow type."""
    t = arrow_type(spark_type)
    if pa.types.is_timestamp(t):  # microseconds since the epoch
        return text.cast(pa.int64()).cast(t)
    if pa.types.is_date32(t):  # days since the epoch
        return text.cast(pa.int32()).cast(t)
    return text.cast(t)


def _join_key(arrays: list[pa.Array]) -> pa.Array:
    """One text per row that is equal exactly when every key is equal, NULL equal to NULL
    (the MERGE's `<=>`): each key as `length:text`, or `-` for NULL."""
    parts = []
    for a in arrays:
        s = a.cast(pa.string())
        sized = pc.binary_join_element_wise(pc.utf8_length(s).cast(pa.string()), s, ":")
        parts.append(pc.fill_null(sized, "-"))
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "|")


def _read(store: pafs.FileSystem, f: TargetFiles) -> pa.Table:
    """The table's rows, logical names, Arrow types (a file written before an ADD COLUMN
    lacks it: NULL)."""
    names = [logical for logical, _, _ in f.columns]
    types = [arrow_type(t) for _, _, t in f.columns]
    tables = []
    for path in f.files:
        with store.open_input_file(unquote(path)) as handle:
            pf = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us")
            have = set(pf.schema_arrow.names)
            wanted = [physical for _, physical, _ in f.columns if physical in have]
            got = pf.read(columns=wanted)
        cols = [
            got.column(physical).cast(t) if physical in have else pa.nulls(got.num_rows, type=t)
            for (_, physical, _), t in zip(f.columns, types, strict=True)
        ]
        tables.append(pa.table(cols, names=names))
    if not tables:
        return pa.table([pa.array([], type=t) for t in types], names=names)
    return pa.concat_tables(tables)


def land(changes: pa.Table, facts: dict[int, TargetFiles]) -> pa.Table:
    """One target's changes merged into its table and written (not committed)."""
    tid = changes.column("tid")[0].as_py()
    f = facts[tid]

    def result(status: str, path: str = "", size: int = 0, rows: int = 0, counts=(0, 0, 0)):
        return pa.table(
            {
                "tid": pa.array([tid], pa.int32()),
                "status": [status],
                "path": [path],
                "size": pa.array([size], pa.int64()),
                "rows": pa.array([rows], pa.int64()),
                "inserted": pa.array([counts[0]], pa.int64()),
                "updated": pa.array([counts[1]], pa.int64()),
                "deleted": pa.array([counts[2]], pa.int64()),
            }
        )

    if pc.any(changes.column("bad")).as_py():
        return result(BAD)
    store = pafs.PyFileSystem(_handler(f))
    current = _read(store, f)
    types = {i: t for i, (_, _, t) in enumerate(f.columns)}
    k = changes.column("k").combine_chunks()
    src_keys = [from_text(pc.list_element(k, j), types[i]) for j, i in enumerate(f.keys)]
    src_jk = _join_key(src_keys)
    cur_jk = _join_key([current.column(i) for i in f.keys])
    n = changes.num_rows
    s = pa.table(
        {
            "jk": src_jk,
            "s_ts": changes.column("commit_ts"),
            "op": changes.column("op"),
            "i": pa.array(range(n), pa.int64()),
        }
    )
    t = pa.table(
        {
            "jk": cur_jk,
            "t_ts": current.column(f.commit_ts).cast(pa.int64()),
            "there": pa.array([True] * current.num_rows, pa.bool_()),
        }
    )
    j = s.join(t, "jk", join_type="left outer")
    there = pc.fill_null(j.column("there"), False)
    t_ts = j.column("t_ts")
    # The MERGE's guard: a matched row changes only when the table's is not newer.
    takes = pc.or_(pc.is_null(t_ts), pc.less_equal(t_ts, j.column("s_ts")))
    takes = pc.fill_null(takes, True)
    upsert = pc.equal(j.column("op"), "U")
    inserted = pc.sum(pc.and_(takes, pc.and_(upsert, pc.invert(there)))).as_py() or 0
    updated = pc.sum(pc.and_(takes, pc.and_(upsert, there))).as_py() or 0
    deleted = pc.sum(pc.and_(takes, pc.and_(pc.invert(upsert), there))).as_py() or 0
    if not (inserted or updated or deleted):
        return result(SAME)
    landing = j.filter(takes)
    landed_keys = landing.column("jk").combine_chunks()
    kept = current.filter(pc.invert(pc.is_in(cur_jk, value_set=landed_keys)))
    ups = landing.filter(pc.equal(landing.column("op"), "U")).column("i").combine_chunks()
    rows = changes.take(ups)
    v = rows.column("v").combine_chunks()
    position = {i: p for p, i in enumerate(f.values)}
    new_cols = []
    for i, (_, _, spark_type) in enumerate(f.columns):
        if i == f.commit_ts:
            new_cols.append(rows.column("commit_ts").cast(arrow_type(spark_type)))
        elif i in position:
            new_cols.append(from_text(pc.list_element(v, position[i]), spark_type))
        else:
            new_cols.append(pa.nulls(rows.num_rows, type=arrow_type(spark_type)))
    new = pa.table(new_cols, names=kept.column_names)
    out = pa.concat_tables([kept, new])
    out = out.rename_columns([physical for _, physical, _ in f.columns])
    path = f"{f.folder}/part-00000-{uuid.uuid4()}-{ROUND_FILE}.snappy.parquet"
    with store.open_output_stream(path) as sink:
        pq.write_table(out, sink, compression="snappy")
    size = store.get_file_info(path).size
    return result(WRITTEN, path, int(size or 0), out.num_rows, (inserted, updated, deleted))


def _handler(f: TargetFiles):
    from deltalake.fs import DeltaStorageHandler

    return DeltaStorageHandler(f.uri, dict(f.options))


def task(facts: dict[int, TargetFiles]):
    """The function `applyInArrow` runs for each target's group: `land` over `facts`."""

    def land_target(changes: pa.Table) -> pa.Table:
        return land(changes, facts)

    return land_target
