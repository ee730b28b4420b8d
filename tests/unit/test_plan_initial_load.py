"""The plan of an initial load: which targets load, from which files, at which TSO; reloads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from testkit.dumpling import DumplingFlags, write_export
from testkit.encode import make_tso
from ticdc_sync.core.errors import PlanError
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import Create, Ddl, LoadRows, Rows
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.read import read_state
from ticdc_sync.warehouse.state import TargetState

MS = 1_700_000_000_000
S = make_tso(MS + 10_000)
PROFILES = "t:\n  target: dev\n  outputs:\n    dev:\n      transport: {type: files}\n"
T = TableSchema(
    "shop",
    "t",
    (Column("id", "int", nullable=False), Column("v", "varchar", length=10)),
    ("id",),
)
U = TableSchema("shop", "u", (Column("id", "int", nullable=False),), ("id",))


def ts(n: int) -> int:
    return make_tso(MS + n * 1000)


def _project(root: Path, tables_extra: str = "", name: str = "{table}") -> Path:
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: t\nprofile: t\n")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources" / "s.yml").write_text(
        "sources:\n  - name: s\n    protocol: canal-json\n    topics: [a]\n"
        "    initial_load:\n      dumpling: exp\n      options: {filetype: csv}\n"
    )
    (root / "tables" / "t.yml").write_text(
        f'tables:\n{tables_extra}  - upstream: "shop.*"\n    name: "{name}"\n'
    )
    write_export(
        root / "exp",
        [(T, [{"id": i, "v": "x"} for i in range(5)])],
        S,
        DumplingFlags(filetype="csv", rows_per_file=2),
    )
    return root


def _with_target(state, name: str, marker: Marker, columns=(("id", "int"), ("v", "string"))):
    targets = dict(state.targets)
    targets[name] = TargetState(name, exists=True, marker=marker, columns=columns)
    return replace(state, targets=targets)


def _staged(state, events: list[DdlEvent], tables=(("shop", "t"), ("shop", "u")), wm=None):
    ss = state.source("s")
    tally = SourceTally(
        partitions={("a", 0): PartitionTally("a", 0, 10, watermark=wm or ts(20))},
        tables={k: (1, 1) for k in tables},
    )
    ss = replace(ss, tally=tally, ddl_events=tuple(events))
    return replace(state, sources={**state.sources, "s": ss})


def test_a_fresh_target_loads_from_the_export(tmp_path):
    project = load_project(_project(tmp_path))
    plan = build_plan(project, read_state(project))
    (t,) = plan.targets
    assert t.load is not None and t.load.snapshot_ts == S
    assert [f.name for f in t.load.files] == [
        "shop.t.000000000.csv",
        "shop.t.000000001.csv",
        "shop.t.000000002.csv",
    ]
    assert t.load.bytes == sum((tmp_path / "exp" / f.name).stat().st_size for f in t.load.files)
    assert t.create_from == "export" and t.create is not None
    assert [type(s) for s in t.steps] == [Create, LoadRows]
    text = render_text(plan)
    assert f"[to create and load from the export at {S}]" in text
    assert f"load: Dumpling export exp at snapshot TSO {S}: 3 csv file(s)" in text
    assert "      shop.t: schema shop.t-schema.sql, 3 file(s)" in text
    assert "        shop.t.000000001.csv (" in text
    body = json.loads(render_json(plan))
    load = body["targets"][0]["load"]
    assert load["snapshot_ts"] == S and load["files"] == 3 and load["filetype"] == "csv"
    assert [f["name"] for f in load["tables"][0]["files"]][0] == "shop.t.000000000.csv"
    assert str(tmp_path) not in text + render_json(plan)
    assert plan.has_pending and body["summary"]["create"] == 1
    # No warning about unknown schemas: the export describes the table.
    assert not any("no schema known" in w for w in plan.warnings)


def test_rows_and_ddl_continue_after_the_snapshot(tmp_path):
    project = load_project(_project(tmp_path))
    state = _staged(
        read_state(project),
        [
            DdlEvent("shop", "t", ts(5), "ALTER TABLE t ADD COLUMN w INT"),  # in the export
            DdlEvent("shop", "t", ts(15), "ALTER TABLE t ADD COLUMN z INT DEFAULT 3"),
            DdlEvent("shop", "u", ts(12), "CREATE TABLE u (id INT PRIMARY KEY)"),
        ],
    )
    plan = build_plan(project, state)
    t = plan.target_plan("t")
    assert t is not None and t.load is not None
    assert [d.commit_ts for d in t.pending] == [ts(15)]
    steps = t.steps
    assert isinstance(steps[1], LoadRows)
    assert [(type(s).__name__, getattr(s, "lo", None)) for s in steps[2:]] == [
        ("Ddl", None),
        ("Rows", S),
    ]
    assert isinstance(steps[2], Ddl) and isinstance(steps[3], Rows) and steps[3].hi == ts(20)
    u = plan.target_plan("u")
    assert u is not None and u.load is None
    assert any("not in the Dumpling export exp" in n for n in u.notes)


def test_a_loaded_target_is_not_loaded_again_and_a_killed_load_is(tmp_path):
    project = load_project(_project(tmp_path))
    state = read_state(project)
    done = _with_target(state, "t", Marker(S, S, 0, 1))
    assert build_plan(project, done).targets[0].load is None
    # Created, but the load's commit never happened: loaded (again).
    killed = _with_target(state, "t", Marker())
    t = build_plan(project, killed).targets[0]
    assert t.load is not None and not t.load.reload and t.create is None
    # A target that followed the changefeed before the export was declared stays as it is.
    followed = _with_target(state, "t", Marker(ts(3)))
    assert build_plan(project, followed).targets[0].load is None


def test_reload_is_refused_after_changes_past_the_snapshot_unless_forced(tmp_path):
    project = load_project(_project(tmp_path))
    state = _with_target(
        read_state(project), "t", Marker(ts(30), ts(25), 0, 1), (("id", "int"), ("w", "int"))
    )
    with pytest.raises(PlanError, match=r"--reload t: the target has applied changes up to") as e:
        build_plan(project, state, reload=("t",))
    assert "add --force" in str(e.value)
    t = build_plan(project, state, reload=("t",), force=True).targets[0]
    assert t.load is not None and t.load.reload
    assert t.columns == (("id", "INT"), ("v", "STRING"))  # the export's, not the table's
    assert "to reload at" in render_text(build_plan(project, state, reload=("t*",), force=True))
    # Before the snapshot: no force needed.
    early = _with_target(read_state(project), "t", Marker(ts(3)))
    assert build_plan(project, early, reload=("t",)).targets[0].load.reload
    with pytest.raises(PlanError, match="--reload nope matches no target"):
        build_plan(project, early, reload=("nope",))


def test_a_reload_glob_passes_over_targets_whose_tables_did_not_exist_at_the_snapshot(tmp_path):
    """`--reload '*'` after upstream dropped shop.u before the export's snapshot and created
    shop.w after it: neither is in the export, as it should be; t is reloaded, u and w are
    passed over. Named exactly, each is refused, saying why."""
    project = load_project(_project(tmp_path))
    state = _staged(
        read_state(project),
        [
            DdlEvent("shop", "u", ts(3), "CREATE TABLE u (id INT PRIMARY KEY)"),
            DdlEvent("shop", "u", ts(5), "DROP TABLE u"),
            DdlEvent("shop", "w", ts(15), "CREATE TABLE w (id INT PRIMARY KEY)"),
        ],
        tables=(("shop", "t"), ("shop", "u"), ("shop", "w")),
    )
    state = _with_target(state, "t", Marker(S, S, 0, 1))
    state = _with_target(state, "u", Marker(ts(5), ts(5)), (("id", "int"),))
    state = _with_target(state, "w", Marker(ts(20), ts(15)), (("id", "int"),))
    for glob in ("*", "[tuw]"):
        plan = build_plan(project, state, reload=(glob,), force=True)
        loads = {t.name: t.load.reload if t.load else None for t in plan.targets}
        assert loads == {"t": True, "u": None, "w": None}
    for name in ("u", "w"):
        with pytest.raises(PlanError) as e:
            build_plan(project, state, reload=("*", name), force=True)
        assert str(e.value) == (
            f"--reload {name}: none of its upstream tables (shop.{name}) existed at the "
            f"export's snapshot TSO {S} (the staged DDL creates, renames or drops them): the "
            "export holds nothing to reload it from (hint: leave it out of --reload)"
        )
    # A table that did exist at the snapshot and that the export lacks stays an error.
    gone = _with_target(
        _staged(read_state(project), [], tables=(("shop", "t"), ("shop", "x"))),
        "x",
        Marker(ts(5)),
        (("id", "int"),),
    )
    with pytest.raises(PlanError, match=r"--reload x: the export exp holds none of its upstream"):
        build_plan(project, gone, reload=("*",), force=True)


def test_reload_needs_an_initial_load(tmp_path):
    root = _project(
        tmp_path,
        '  - upstream: "shop.t"\n    name: "t"\n    initial_load: false\n',
        "x_{table}",
    )
    project = load_project(root)
    with pytest.raises(PlanError, match="sets initial_load: false"):
        build_plan(project, read_state(project), reload=("t",))
    assert build_plan(project, read_state(project)).target_plan("t").load is None


def test_a_broken_export_blocks_only_targets_that_still_load(tmp_path):
    root = _project(tmp_path)
    project = load_project(root)
    (root / "exp" / "metadata").unlink()
    state = read_state(project)
    with pytest.raises(PlanError, match="exp/metadata: no such file"):
        build_plan(project, state)
    # Once loaded, the export is not needed any more.
    loaded = _with_target(_staged(state, [], tables=(("shop", "t"),)), "t", Marker(S, S, 0, 1))
    assert [t.name for t in build_plan(project, loaded).targets] == ["t"]
    # ... unless a new table may need it.
    more = _with_target(_staged(state, []), "t", Marker(S, S, 0, 1))
    with pytest.raises(PlanError, match="its targets are not all loaded yet, but the Dumpling"):
        build_plan(project, more)
