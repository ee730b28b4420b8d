"""Create the warehouse's state tables (staging, quarantine, schema history) once: at once,
or at their first use (`LazyTable`). Only creates them; each table's module says what it
holds and writes.
"""

from __future__ import annotations

import threading

from pyspark.sql import SparkSession

from ticdc_sync.core.sqlgen import sql_string, table_ref
from ticdc_sync.spark.runtime.conf import before_commit
from ticdc_sync.spark.runtime.delta_log import has_commit
from ticdc_sync.spark.runtime.rs_create import PlainCreate, split_outside_brackets
from ticdc_sync.spark.runtime.table_create import create_table

_CREATING = threading.Lock()


def ensure_table(
    spark: SparkSession, path: str, schema: str, properties: dict[str, str] | None = None
) -> None:
    """Create a state table at `path` unless it exists."""
    if has_commit(path):
        # Every run opens the state tables: a local one that exists needs no statement.
        return
    props = {"delta.appendOnly": "false", **(properties or {})}
    # One creation at a time in this process: two targets' workers that record at once
    # (the `catalog` table) would otherwise both issue the first commit, and Delta fails
    # the second ("multiple writers are writing to an empty directory"); locally, one
    # could also clear the other's half-made log as a killed create's leftover.
    with _CREATING:
        before_commit("state.create")
        create_table(
            spark,
            path,
            f"CREATE TABLE IF NOT EXISTS {table_ref(path)} ({schema}) USING delta "
            f"TBLPROPERTIES ({properties_sql(props)})",
            PlainCreate(ddl_columns(schema), properties=tuple(props.items())),
        )


class LazyTable:
    """A state table created the first time its location is asked for (`path`), once, also
    when several targets' threads ask at the same moment."""

    def __init__(self, spark: SparkSession, location: str, schema: str) -> None:
        self._spark, self._location, self._schema = spark, location, schema
        self._made = False
        self._lock = threading.Lock()

    def path(self) -> str:
        with self._lock:
            if not self._made:
                ensure_table(self._spark, self._location, self._schema)
                self._made = True
        return self._location


def properties_sql(properties: dict[str, str]) -> str:
    """`'k' = 'v', ...` for TBLPROPERTIES, in key order (same properties, same SQL)."""
    return ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in sorted(properties.items()))


def ddl_columns(schema: str) -> tuple[tuple[str, str], ...]:
    """(name, type) of each column of a state table's `schema` (`` `a` STRING, b INT ``)."""
    out = []
    for column in split_outside_brackets(schema):
        name, _, typ = column.strip().partition(" ")
        out.append((name.strip("`"), typ.strip()))
    return tuple(out)
