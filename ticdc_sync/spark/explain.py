"""`ticdc-sync plan --explain`: print the Spark plans of the decode, collapse and MERGE steps.

For review in pull requests: per source, the plan of reading and decoding its records; per
target with a known schema, the plan of typing and collapsing a segment (the MERGE source)
and the MERGE statement that consumes it. It builds the same DataFrames a run builds, over
the project's current records, and executes nothing: no state is written.
"""

from __future__ import annotations

from collections.abc import Callable

from ticdc_sync import datatypes
from ticdc_sync.model import Project

Out = Callable[[str], None]


def _explain_string(df, mode: str = "formatted") -> str:
    jvm = df.sparkSession._jvm
    return str(jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), mode))


class _StagedEvents:
    """The slice of State that building the MERGE source needs, over an in-memory frame."""

    def __init__(self, spark, events) -> None:
        self.spark = spark
        self._events = events
        self.warehouse = "<warehouse>"
        self.quarantine_path = "<warehouse>/_ticdc_sync/quarantine"

    def events(self, spark=None):
        return self._events


def explain(project: Project, plan, *, out: Out = print, spark=None) -> int:
    from pyspark.sql import functions as F

    from ticdc_sync.spark.apply import SchemaBook, TargetApplier
    from ticdc_sync.spark.decode import decode_records
    from ticdc_sync.spark.runner import _session
    from ticdc_sync.spark.sources import read_records
    from ticdc_sync.sqlgen import merge_sql

    spark = spark or _session(project)
    schemas = SchemaBook({}, dict(project.seed_schemas))
    for source in project.sources:
        records = read_records(spark, project, source, {})
        decoded = decode_records(records, source)
        out(f"\n== decode: source {source.name} ({source.protocol.value}) ==")
        out(_explain_string(decoded))
        staged = decoded.select(F.lit(source.name).alias("source"), *decoded.columns)
        state = _StagedEvents(spark, staged)
        for table in plan.tables:
            if table.source != source.name:
                continue
            db, tbl = table.upstream.split(".", 1)
            entry = project.route(source.name, db, tbl)
            schema = schemas.at(db, tbl, 0)
            if entry is None or schema is None:
                continue
            applier = TargetApplier(
                spark, state, project, source, entry, table.target, [(db, tbl)], schemas, out
            )
            cols = [(c.name, datatypes.delta_type(c)) for c in schema.columns]
            typed, keys = applier._typed(2**63 - 1, cols, -1)
            if typed is None:
                continue
            names = [n for n, _ in cols]
            src = applier._collapse(typed, list(keys), names)
            out(f"\n== collapse (MERGE source): target {table.target} ==")
            out(_explain_string(src))
            out(f"\n== MERGE: target {table.target} ==")
            out(
                merge_sql(
                    f"delta.`<warehouse>/tables/{table.target}`",
                    "__ticdc_sync_source",
                    list(keys),
                    names,
                )
            )
    return 0
