"""Read a Delta table the way other engines' users do (polars, delta-rs, DuckDB) and compare
with Spark.

A reader "reads a target" when it returns Spark's column names in Spark's order and Spark's
rows, value for value: an error and a silently wrong answer (delta-rs's pyarrow path gives
NULLs on some column-mapped tables) both fail. Values are brought to one Python form first:
an instant as naive UTC, binary as bytes.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from ticdc_sync.spark.runtime.delta_log import table_exists

Table = tuple[list[str], list[tuple]]


def duckdb_reads() -> bool:
    """Whether DuckDB and its Delta extension are installed (the `dev` extra installs them
    on Linux x86-64, the only platform the extension's package is built for)."""
    try:
        import duckdb  # noqa: F401
        import duckdb_extension_delta  # noqa: F401
    except ImportError:
        return False
    return True


# DuckDB where it is installed (`READERS` and the tests' reader lists take it then).
WITH_DUCKDB = ("duckdb",) if duckdb_reads() else ()


def _duckdb(location: str) -> pa.Table:
    """`SELECT * FROM delta_scan(...)`, with the extension the PyPI package ships (DuckDB
    would download it from its own site, which this machine does not reach)."""
    import duckdb
    import duckdb_extension_delta

    ext = Path(duckdb_extension_delta.__file__).parent / "extensions" / f"v{duckdb.__version__}"
    con = duckdb.connect()
    try:
        con.execute(f"LOAD '{ext / 'delta.duckdb_extension'}'")
        return con.execute("SELECT * FROM delta_scan(?)", [location]).to_arrow_table()
    finally:
        con.close()


# How each reader is asked, as its users ask it.
READERS = {
    "polars": lambda loc: _arrow(pl.read_delta(loc).to_arrow()),
    "delta-rs sql": lambda loc: _arrow(
        pa.table(QueryBuilder().register("t", DeltaTable(loc)).execute("SELECT * FROM t"))
    ),
    "delta-rs pyarrow": lambda loc: _arrow(DeltaTable(loc).to_pyarrow_table()),
    "delta-rs pandas": lambda loc: _arrow(_from_pandas(DeltaTable(loc))),
    "delta-rs pandas arrow dtypes": lambda loc: _arrow(_from_pandas(DeltaTable(loc), arrow=True)),
}
if WITH_DUCKDB:
    READERS["duckdb"] = lambda loc: _arrow(_duckdb(loc))

# What a soft_delete or history target's readers use: its nullable TSO columns
# (`_deleted_ts`, `_valid_to`) exceed 2**53, which pandas' default nullable-integer-as-float
# conversion cannot hold exactly (docs/history.md says so and what to call instead).
MODE_READERS = tuple(r for r in READERS if r != "delta-rs pandas")


def _from_pandas(table: DeltaTable, arrow: bool = False) -> pa.Table:
    """`to_pandas()` (with `arrow`: `types_mapper=pd.ArrowDtype`), brought back to the
    table's Arrow types to compare values: pandas holds a nullable integer column as floats
    and a missing value as NaN or NaT."""
    import pandas as pd

    df = table.to_pandas(types_mapper=pd.ArrowDtype) if arrow else table.to_pandas()
    return pa.Table.from_pandas(
        df, schema=pa.schema(table.schema().to_arrow()), preserve_index=False
    )


def _value(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    return v


def _sorted(columns: list[str], rows: list[tuple]) -> Table:
    rows = [tuple(_value(v) for v in r) for r in rows]
    return columns, sorted(rows, key=lambda r: tuple((v is None, repr(v)) for v in r))


def _arrow(t: pa.Table) -> Table:
    cols = t.column_names
    return _sorted(cols, [tuple(r[c] for c in cols) for r in t.to_pylist()])


def spark_table(spark, location: str) -> Table:
    df = spark.read.format("delta").load(location)
    return _sorted(df.columns, [tuple(r) for r in df.collect()])


def read(reader: str, location: str) -> Table:
    return READERS[reader](location)


def assert_reads_as_spark(spark, location: str, readers: tuple[str, ...]) -> None:
    """Every reader in `readers` returns exactly what Spark returns for the table."""
    assert table_exists(spark, location), location
    want = spark_table(spark, location)
    for reader in readers:
        got = read(reader, location)
        assert got[0] == want[0], f"{reader} on {location}: columns {got[0]} != {want[0]}"
        assert got[1] == want[1], f"{reader} on {location}: rows differ from Spark's"


def reader_features(location: str) -> set[str]:
    """The protocol's reader features (delta-rs reads the metadata of every table here)."""
    return set(DeltaTable(location).protocol().reader_features or ())


def features(spark, location: str) -> set[str]:
    """The table features as Spark lists them."""
    from ticdc_sync.core.sqlgen import table_ref

    return set(spark.sql(f"DESCRIBE DETAIL {table_ref(location)}").first()["tableFeatures"])
