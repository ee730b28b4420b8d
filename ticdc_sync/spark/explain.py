"""`ticdc-sync plan --explain`: the Spark plans of the decode, collapse and MERGE steps.

For review in pull requests: per source, the plan of reading and decoding its records; per
target of the plan with a known schema, the plan of typing and collapsing a segment (the
MERGE source) and the MERGE statement that consumes it. It builds the same DataFrames a
run builds, over the project's current records, and executes nothing: no state is written.
"""

from __future__ import annotations

from collections.abc import Callable

from ticdc_sync.core import datatypes
from ticdc_sync.core.model import Project
from ticdc_sync.plan.model import Plan

Emit = Callable[[str, str], None]  # (section title, text)


def _explain_string(df, mode: str = "formatted") -> str:
    """What `df.explain(mode)` prints (a classic session and a Spark Connect one alike)."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(mode=mode)
    return buf.getvalue().rstrip("\n")


class _Staged:
    """What building a MERGE source reads from the state, over an in-memory frame."""

    class _Staging:
        def __init__(self, events) -> None:
            self._events = events

        def events(self, spark=None):
            return self._events

    def __init__(self, events) -> None:
        self.staging = self._Staging(events)
        self.warehouse = "<warehouse>"


def explain(
    project: Project,
    plan: Plan,
    *,
    out: Emit,
    spark=None,
    jvm_output: Callable[[str], None] | None = None,
) -> int:
    from ticdc_sync.spark.runner import run_session
    from ticdc_sync.spark.runtime.remote import is_connect

    if spark is not None:
        return _explain(project, plan, out, spark)
    spark = run_session(project, jvm_output)
    try:
        return _explain(project, plan, out, spark)
    finally:
        if is_connect(spark):
            spark.stop()  # its session on the server (a classic one ends with the process)


def _explain(project: Project, plan: Plan, out: Emit, spark) -> int:
    from pyspark.sql import functions as F

    from ticdc_sync.core.sqlgen import table_ref
    from ticdc_sync.core.sqlgen_history import MERGE_SQL
    from ticdc_sync.plan.steps import segment
    from ticdc_sync.spark.apply.rows import SOURCE_VIEW, TargetWriter
    from ticdc_sync.spark.staging.decode import decode_records
    from ticdc_sync.spark.transports.sources import read_records

    for sp in plan.sources:
        source = sp.source
        records = read_records(spark, project, source, {})
        decoded = decode_records(records, source)
        out(f"decode: source {source.name} ({source.protocol.value})", _explain_string(decoded))
        staged = decoded.select(F.lit(source.name).alias("source"), *decoded.columns)
        for t in plan.targets:
            schema = t.create or t.schema
            if t.source != source.name or schema is None or not t.keys:
                continue
            w = TargetWriter(spark, _Staged(staged), source, t, lambda _: None)
            cols = [(c.name, datatypes.delta_type(c)) for c in schema.columns]
            # A segment over every record, made as the plan makes one (`plan.steps`).
            step = segment(t, sp.timeline, -1, 2**63 - 1)
            if step.error is not None:
                continue
            typed = w.typed_segment(step, cols)
            if typed is None:
                continue
            names = [n for n, _ in cols]
            keys = step.keys
            src = w.collapse(typed, list(keys), names)
            out(f"collapse (MERGE source): target {t.name}", _explain_string(src))
            ref = table_ref(t.location).replace(plan.warehouse, "<warehouse>")
            sql = MERGE_SQL[t.mode](ref, SOURCE_VIEW, list(keys), names)
            out(f"MERGE: target {t.name}", sql)
    return 0
