"""Carry out a target's catalog step (`plan.model.Catalog`): register it as an external Delta
table at its location, drop its entry, or keep it, as the plan decided; then record what was
done in the `catalog` state table (which `plan` reads back).

The catalog is checked every time, whatever the record says: a registration lost to a kill
between a target's commit and its catalog step, or removed by hand, is made again. A name
held by a table at another location is never overwritten or dropped: the step fails with
the name and where that table lives. A catalog that refuses a statement or cannot be
reached fails the step with the catalog's own reason; the next run tries again. A run's
check that the catalog loads at all, before any target is applied, is `check`. Decides
nothing: the statements are the plan's (`plan.catalog.statements`, `check_statement`).
"""

from __future__ import annotations

import time

from pyspark.sql import SparkSession

from ticdc_sync.core.errors import UserError
from ticdc_sync.plan.catalog import check_statement, ident, statements
from ticdc_sync.plan.model import CATALOG_DROP, CATALOG_REGISTER, CatalogEntry
from ticdc_sync.spark.runtime.conf import before_commit, without_user_metadata
from ticdc_sync.spark.runtime.raised import spark_failure
from ticdc_sync.warehouse.locations import state_location
from ticdc_sync.warehouse.read import CATALOG_TABLE
from ticdc_sync.warehouse.state import CatalogRecord

RECORD_SCHEMA = "target STRING, name STRING, location STRING, state STRING, seq BIGINT"


def same_location(a: str, b: str) -> bool:
    """Whether two spellings of a location name one folder (`file:/x/`, `file:///x`, `/x`)."""

    def norm(x: str) -> str:
        if x.startswith("file:"):
            x = "/" + x.removeprefix("file:").lstrip("/")
        return x.rstrip("/")

    return norm(a) == norm(b)


def held_location(spark: SparkSession, entry: CatalogEntry) -> str | None:
    """The location of the table the catalog holds under the entry's name, or None: there
    is none ("" for a table without a location, a view)."""
    qualified = ident(entry)
    try:
        if not spark.catalog.tableExists(qualified):
            return None
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect()
    except Exception as e:  # noqa: BLE001 - the catalog's own reason, named
        raise _failed(entry, "cannot be looked up", e) from e
    return next((r["data_type"] for r in rows if r["col_name"] == "Location"), "")


def sync(spark: SparkSession, target: str, entry: CatalogEntry, warehouse: str) -> CatalogRecord:
    """Bring the catalog to `entry` and record it; returns the record."""
    held = held_location(spark, entry)
    if entry.action == CATALOG_REGISTER:
        if held is not None and not same_location(held, entry.location):
            raise UserError(
                f"catalog table {entry.name} is held by a table ticdc-sync did not create "
                f"(at {held or 'no location'}), not target {target} (at {entry.location}) "
                "(hint: drop or rename that table, or give the target another name with "
                "`schema:`/`table:` on its table entry)"
            )
        if held is None:
            before_commit("catalog.register", target=target)
            _run(spark, entry, statements(entry))
    elif entry.action == CATALOG_DROP and held is not None and same_location(held, entry.location):
        before_commit("catalog.drop", target=target)
        _run(spark, entry, statements(entry))
    done = entry.done()
    if entry.recorded != done:
        before_commit("catalog.record", target=target)
        _record(spark, warehouse, target, done)
    return done


def _run(spark: SparkSession, entry: CatalogEntry, sqls: tuple[str, ...]) -> None:
    with without_user_metadata(spark):
        for sql in sqls:
            try:
                spark.sql(sql)
            except Exception as e:  # noqa: BLE001 - the catalog's own reason, named
                raise _failed(entry, f"refused `{sql.split(' USING')[0]}`", e) from e


def check(spark: SparkSession, catalog: str) -> None:
    """Load `catalog` and reach its store (`plan.catalog.check_statement`); raises
    `UserError` with the catalog's own reason when it cannot."""
    sql = check_statement(catalog)
    try:
        spark.sql(sql).collect()
    except Exception as e:  # noqa: BLE001 - the catalog's own reason, named
        raise UserError(
            f"catalog {catalog} (the profile output's `catalog`) cannot be loaded: "
            f"{sql} failed: {_reason(e)} (hint: fix `catalog.name` or the catalog's "
            f"`spark.sql.catalog.{catalog}` settings in the profile's `spark.conf`, or start "
            "its metastore (`catalog.metastore`); nothing was applied, run again once it "
            "loads)"
        ) from e


def _reason(e: BaseException) -> str:
    # py4j's own first line only names the call ("An error occurred while calling
    # o1.tableExists."): the Java exception's class and message say why.
    failure = spark_failure(e)
    text = str(failure if failure is not None else e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _failed(entry: CatalogEntry, what: str, e: BaseException) -> UserError:
    return UserError(
        f"catalog {entry.catalog}: {entry.name} {what}: {_reason(e)} (hint: check the profile "
        "output's `catalog` and that its metastore is reachable; the next run tries again)"
    )


def _record(spark: SparkSession, warehouse: str, target: str, r: CatalogRecord) -> None:
    from ticdc_sync.spark.staging.state_table import ensure_table

    path = state_location(warehouse, CATALOG_TABLE)
    ensure_table(spark, path, RECORD_SCHEMA)
    row = [(target, r.name, r.location, r.state, time.time_ns())]
    with without_user_metadata(spark):
        spark.createDataFrame(row, RECORD_SCHEMA).write.format("delta").mode("append").save(path)
