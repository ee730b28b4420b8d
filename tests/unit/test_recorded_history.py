"""What an apply reads of the schema history (`warehouse.read.recorded_history`): the
versions of the upstream tables it names, the same as a read of every table gives for
them, without parsing the other tables' schemas."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from tests.unit.test_replan import _project
from ticdc_sync.core.upstream import Column, TableSchema, key
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.locations import state_location, warehouse_path
from ticdc_sync.warehouse.read import recorded_history


def _schema(table: str, *cols: str) -> TableSchema:
    return TableSchema("App", table, tuple(Column(c, "int") for c in cols), (cols[0],))


def test_the_history_of_some_tables_is_theirs_in_the_whole_history(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path, ["a"], seeded=False))
    rows = [
        # (source, db, tbl, commit_ts, ddl, schema): names as the DDL wrote them.
        ("s", "App", "A", 10, "CREATE TABLE A", _schema("A", "id")),
        ("s", "App", "A", 20, "ALTER TABLE A", _schema("A", "id", "w")),
        ("s", "App", "b", 11, "CREATE TABLE b", _schema("b", "id")),
        (None, "App", "c", 12, "CREATE TABLE c", _schema("c", "id")),  # an older version's
        ("s", "App", "c", 30, "ALTER TABLE c", _schema("c", "id", "w")),
    ]
    columns = ("source", "db", "tbl", "commit_ts", "ddl")
    data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
    data["schema_json"] = [r[5].to_json() for r in rows]
    write_deltalake(state_location(warehouse_path(project), "schema_history"), pa.table(data))
    every = recorded_history(project)
    some = recorded_history(project, {key("app", "a"), key("app", "c")})
    assert set(some["s"]) == {key("app", "a"), key("app", "c")}
    assert some["s"] == {k: every["s"][k] for k in some["s"]}
    assert [v.commit_ts for v in some["s"][key("app", "c")]] == [12, 30]
    assert recorded_history(project, set()) == {}
