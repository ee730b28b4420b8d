"""Tables created in the stream, as a changefeed started before its tables brings them
(each by a CREATE TABLE at its own commit_ts, then rows), land as cheaply as tables known
before: each target's CREATE commits first and its rows join one round with the others',
instead of each target applying alone; and nothing of the query grows with the number of
tables (the shared window's spans are a broadcast frame, not a predicate with a term per
table: at 1,000 tables that predicate overflowed Spark's stack), nor the plan made again
after each apply (each apply's target alone: the versions it records are those its plan
replayed)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from testkit.created_tables import DB, CreatedTables
from tests.spark.engine_harness import load, make_project, write_captures
from ticdc_sync.plan import build as plan_build
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import rounds, shared_window
from ticdc_sync.spark.staging.state import State
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

TABLES = 40


def test_tables_created_in_the_stream_land_in_one_round(spark, tmp_path, monkeypatch):
    stream = CreatedTables(tables=TABLES, events=3 * TABLES, add_column=True)
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables=f'  - upstream: "{DB}.*"\n    name: "{{table}}"\n',
    )
    write_captures(root, "t", stream.records())
    landed: list[int] = []
    land = rounds.land

    def counted(spark_, state, items):
        landed.append(len(items))
        return land(spark_, state, items)

    monkeypatch.setattr(rounds, "land", counted)
    planned: list[str] = []
    target_plan = plan_build.target_plan

    def plan_one(project_, source, tr, *args, **kw):
        planned.append(tr.target)
        return target_plan(project_, source, tr, *args, **kw)

    monkeypatch.setattr(plan_build, "target_plan", plan_one)
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    # Every target's rows in a round of many (its CREATE and ADD COLUMN committed first),
    # none alone.
    assert sum(landed) == TABLES and len(landed) <= 2, landed
    wh = warehouse_path(project)
    for name, truth in stream.truth().items():
        table = DeltaTable(target_location(wh, name)).to_pyarrow_table()
        rows = set(
            zip(*(table.column(c).to_pylist() for c in ("id", "v", "n", "extra")), strict=True)
        )
        assert rows == truth, name
    assert sum("create target from" in x for x in lines) == TABLES
    # Every target planned with the others after the poll, then again after its own
    # applies only (the whole plan after each apply made TABLES per apply).
    assert len(planned) <= 4 * TABLES, (len(planned), lines)

    # The shared window of the same tables, each over its own window (as tables created at
    # different commit_ts have them): its query names no table, whatever their number.
    copied = []
    local_copy = shared_window.local_copy

    def kept(df):
        copied.append(df._jdf.queryExecution().analyzed().toString())
        return local_copy(df)

    monkeypatch.setattr(shared_window, "local_copy", kept)
    windows = {(DB, n): [(stream.start + i, 1 << 40)] for i, n in enumerate(stream.names())}
    window = shared_window.SharedWindow.build(spark, State(spark, wh), "src", windows)
    assert window is not None
    try:
        (plan,) = copied
        assert not [n for n in stream.names() if n in plan], plan
        events = shared_window._global_view(spark, window.view).count()
        assert events == 3 * TABLES
    finally:
        window.drop()
