"""The plan of an initial load whose changefeed started before the snapshot, with DDL in the
overlap: every loaded table takes the export's schema, DDL at or below the snapshot is
skipped, tables gone by the snapshot start from it, and a table whose schema file cannot be
read is refused alone. Plans only: no JVM."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from testkit.dumpling import DumplingFlags, write_export
from testkit.encode import make_tso
from ticdc_sync.codecs.dumpling_export import check_exports
from ticdc_sync.core.errors import PlanError
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.core.window import DdlEvent
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import Create, Halt, LoadRows, Rows
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.read import read_state

MS = 1_700_000_000_000
PROFILES = "t:\n  target: dev\n  outputs:\n    dev:\n      transport: {type: files}\n"
C = Column


def ts(n: int) -> int:
    return make_tso(MS + n * 1000)


S = ts(10)  # the snapshot: a DDL's commit_ts (the ADD COLUMN of vals)


def _t(name: str, *cols: Column) -> TableSchema:
    return TableSchema("shop", name, (C("id", "int", nullable=False), *cols), ("id",))


# The tables as the export has them at S.
T1 = _t(
    "t1",
    C("a", "varchar", length=20),
    C("c2", "varchar", length=20),
    C("d", "decimal", precision=12, scale=3),
)
VALS = _t(
    "vals",
    C("e", "enum", members=("a", "b", "c")),
    C("st", "set", members=("x", "y", "z")),
    C("n", "decimal", precision=20, scale=6),
    C("vb", "varbinary", length=32, binary=True),
    C("extra", "varchar", length=8, has_default=True, default="x"),
)
BORN = _t("born", C("v", "varchar", length=10))
EMPTY = _t("empty", C("v", "varchar", length=10))
QUIET = _t("quiet", C("v", "varchar", length=10))
MOVED = _t("moved", C("v", "varchar", length=10))

# The staged DDL: the changefeed started at ts(1).
EVENTS = [
    DdlEvent("shop", "t1", ts(2), "ALTER TABLE t1 ADD COLUMN d DECIMAL(12,3)"),
    DdlEvent("shop", "t1", ts(3), "ALTER TABLE t1 DROP COLUMN b"),
    DdlEvent("shop", "born", ts(4), "CREATE TABLE born (id INT PRIMARY KEY, v VARCHAR(10))"),
    DdlEvent("shop", "t1", ts(5), "ALTER TABLE t1 RENAME COLUMN c TO c2"),
    DdlEvent("shop", "empty", ts(6), "CREATE TABLE empty (id INT PRIMARY KEY, v VARCHAR(10))"),
    DdlEvent("shop", "moved", ts(7), "RENAME TABLE old TO moved"),
    DdlEvent("shop", "gone", ts(8), "DROP TABLE gone"),
    DdlEvent("shop", "gone2", ts(9), "DROP TABLE gone2"),
    DdlEvent("shop", "vals", S, "ALTER TABLE vals ADD COLUMN extra VARCHAR(8) DEFAULT 'x'"),
    DdlEvent("shop", "t1", ts(12), "ALTER TABLE t1 ADD COLUMN e INT DEFAULT 5"),
]
STAGED = ("t1", "vals", "born", "empty", "old", "moved", "gone", "gone2")
# Canal-JSON `mysqlType` of one row of each table with rows and no DDL history: lossy.
META = {
    "t1": {"id": "int", "a": "varchar", "b": "int", "c": "varchar"},
    "vals": {"id": "int", "e": "enum", "st": "set", "n": "decimal", "vb": "varbinary"},
    "old": {"id": "int", "v": "varchar"},
    "gone": {"id": "int", "v": "varchar"},
}


def _project(root: Path, protocol: str = "canal-json", tables=None) -> Path:
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: t\nprofile: t\n")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: s\n    protocol: {protocol}\n    topics: [a]\n"
        "    initial_load:\n      dumpling: exp\n      options: {filetype: csv}\n"
    )
    (root / "tables" / "t.yml").write_text('tables:\n  - upstream: "shop.*"\n    name: "{table}"\n')
    rows = {"t1": [{"id": 1, "a": "x"}], "vals": [{"id": 1, "e": "b", "st": "x,z"}]}
    write_export(
        root / "exp",
        [(t, rows.get(t.table, [{"id": 1}] if t.table != "empty" else [])) for t in tables]
        if tables is not None
        else [(t, rows.get(t.table, [{"id": 1}])) for t in (T1, VALS, BORN, QUIET, MOVED)]
        + [(EMPTY, [])],
        S,
        DumplingFlags(filetype="csv"),
    )
    return root


def _state(project, events=EVENTS, staged=STAGED, meta=META):
    state = read_state(project)
    ss = state.source("s")
    tally = SourceTally(
        partitions={("a", 0): PartitionTally("a", 0, 10, watermark=ts(20))},
        tables={("shop", t): (1, 1) for t in staged},
    )
    ss = replace(
        ss,
        tally=tally,
        ddl_events=tuple(events),
        metadata={("shop", t): (m, ("id",)) for t, m in meta.items()},
    )
    return replace(state, sources={**state.sources, "s": ss})


@pytest.fixture
def plan(tmp_path):
    project = load_project(_project(tmp_path))
    return build_plan(project, _state(project))


@pytest.mark.parametrize("table", ["t1", "vals", "born", "empty", "quiet", "moved"])
def test_every_table_of_the_export_takes_the_exports_schema(plan, table):
    t = plan.target_plan(table)
    want = {x.table: x for x in (T1, VALS, BORN, EMPTY, QUIET, MOVED)}[table]
    assert t is not None and t.load is not None and t.load.snapshot_ts == S
    assert t.create_from == "export" and t.create == want and t.schema == want
    assert t.blocked is None and not any("inferred" in n for n in t.notes), t.notes
    assert [type(s) for s in t.steps[:2]] == [Create, LoadRows]
    # DDL at or below the snapshot (the one exactly at it too) is in the export.
    assert [d.commit_ts for d in t.pending] == ([ts(12)] if table == "t1" else [])


def test_enum_set_decimal_and_binary_columns_are_the_exports_not_the_streams(plan):
    text = render_text(plan)
    assert "lossy" not in text and "inferred" not in text
    cols = dict(plan.target_plan("vals").columns)
    assert cols == {
        "id": "INT",
        "e": "STRING",
        "st": "STRING",
        "n": "DECIMAL(20,6)",
        "vb": "BINARY",
        "extra": "STRING",
    }


@pytest.mark.parametrize("table", ["gone", "gone2", "old"])
def test_a_table_gone_by_the_snapshot_starts_from_it(plan, table):
    t = plan.target_plan(table)
    assert t is not None and t.load is None and t.create is None and t.blocked is None
    assert not t.pending and t.start.applied_ts == S
    assert [type(s) for s in t.steps] == [Rows]
    assert t.steps[0].lo == S
    (note,) = [n for n in t.notes if "Dumpling export" in n]
    assert f"did not exist at its snapshot {S}" in note, note
    assert render_json(plan).count('"status": "blocked"') == 0


def test_the_plan_is_the_same_without_the_streams_metadata(tmp_path):
    """What the stream's rows say about the columns changes nothing once the export has
    them (the same plan, byte for byte)."""
    project = load_project(_project(tmp_path))
    with_meta = render_json(build_plan(project, _state(project)))
    assert with_meta == render_json(build_plan(project, _state(project, meta={})))


def test_a_table_created_after_the_snapshot_starts_from_its_create_table(tmp_path):
    project = load_project(_project(tmp_path))
    events = [*EVENTS, DdlEvent("shop", "late", ts(13), "CREATE TABLE late (id INT PRIMARY KEY)")]
    plan = build_plan(project, _state(project, events, (*STAGED, "late")))
    t = plan.target_plan("late")
    assert (
        t.load is None and t.start.applied_ts == -1 and [d.commit_ts for d in t.pending] == [ts(13)]
    )
    assert any("not in the Dumpling export exp: starts from the changefeed" in n for n in t.notes)


def test_a_table_out_of_the_exports_scope_starts_from_the_changefeed(tmp_path):
    """Not in the export and never dropped: the export was made without it (a filter), so
    the changefeed is all there is; its schema comes from the stream, as without a load."""
    project = load_project(_project(tmp_path))
    plan = build_plan(
        project,
        _state(project, staged=(*STAGED, "other"), meta={**META, "other": {"id": "int"}}),
    )
    t = plan.target_plan("other")
    assert t.load is None and t.start.applied_ts == -1 and t.create_from == "inferred"


def test_a_schema_file_that_cannot_be_read_refuses_that_table_alone(tmp_path):
    root = _project(tmp_path)
    (root / "exp" / "shop.vals-schema.sql").write_text("CREATE TABLE `vals` (id INT PRIMARY KEY,")
    project = load_project(root)
    plan = build_plan(project, _state(project))
    t = plan.target_plan("vals")
    assert t.load is None and t.create is None and t.schema is None
    assert t.blocked is not None
    assert t.blocked.startswith(
        "cannot load shop.vals from the Dumpling export exp: exp/shop.vals-schema.sql"
    ), t.blocked
    # Never from the stream's metadata instead.
    assert t.create_from is None and not any("inferred" in n for n in t.notes)
    (step,) = t.steps
    assert isinstance(step, Halt) and step.reason == t.blocked
    text = render_text(plan)
    assert "! vals <- shop.vals via s" in text and f"    blocked: {t.blocked}" in text
    body = json.loads(render_json(plan))
    assert body["summary"]["blocked"] == 1
    # The other tables load as before.
    assert all(plan.target_plan(n).load is not None for n in ("t1", "born", "quiet", "moved"))
    # `validate` still reports the file.
    (issue,) = check_exports(project)
    assert "exp/shop.vals-schema.sql" in issue.render()


def test_a_table_only_in_the_export_with_a_schema_file_that_cannot_be_read_is_refused(
    tmp_path,
):
    """Never in the stream: its target is still planned, and refused (not left out)."""
    root = _project(tmp_path)
    (root / "exp" / "shop.quiet-schema.sql.gz").write_bytes(b"not gzip")
    (root / "exp" / "shop.quiet-schema.sql").unlink()
    project = load_project(root)
    t = build_plan(project, _state(project)).target_plan("quiet")
    assert t is not None and t.load is None and t.create is None
    assert t.refused is not None and t.refused.startswith(
        "cannot load shop.quiet from the Dumpling export exp: exp/shop.quiet-schema.sql.gz: "
        "cannot decompress it"
    ), t.refused
    assert [type(s) for s in t.steps] == [Halt]


def test_once_loaded_the_export_is_not_needed_for_the_tables_gone_by_its_snapshot(tmp_path):
    """The schema history's record of the load stands in for the export's snapshot."""
    import shutil

    from ticdc_sync.core.upstream import Version, key
    from ticdc_sync.core.window import Marker
    from ticdc_sync.warehouse.state import TargetState

    root = _project(tmp_path)
    project = load_project(root)
    state = _state(project)
    loaded = {t.table: t for t in (T1, VALS, BORN, EMPTY, QUIET, MOVED)}
    recorded = {
        key("shop", n): [Version(S, t, f"-- initial load: exp/shop.{n}-schema.sql")]
        for n, t in loaded.items()
    }
    ss = replace(state.source("s"), recorded=recorded, metadata={}, export=None)
    targets = {n: TargetState(n, exists=True, marker=Marker(S, S, 0, 1)) for n in loaded}
    shutil.rmtree(root / "exp")
    ss = replace(ss, export_error="exp/metadata: no such file")
    plan = build_plan(project, replace(state, sources={"s": ss}, targets=targets))
    for n in ("gone", "gone2", "old"):
        t = plan.target_plan(n)
        assert t.absent and t.start.applied_ts == S and t.load is None, n
    assert [d.commit_ts for d in plan.target_plan("t1").pending] == [ts(12)]
    # A table that may still need the export does.
    with pytest.raises(PlanError, match="its targets are not all loaded yet"):
        build_plan(project, replace(state, sources={"s": ss}, targets={}))
