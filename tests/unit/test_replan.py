"""A run plans again after each apply it folds, and that work does not grow with the number
of tables: `plan.Planner` plans again only the target the apply changed (one `target_plan`
per apply, whatever the table count), and what it makes is the plan a whole `build_plan`
makes over the same state, byte for byte. Counts target plans, never time."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.loop_fakes import T0, Clock, Fake, Inline, Spec, source, ts
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.upstream import key
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import Planner, build_plan, render_json, render_text
from ticdc_sync.plan import build as build_module
from ticdc_sync.project import load_project
from ticdc_sync.run.loop import Settings, run_loop
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState


def _project(root: Path, tables: list[str], seeded: bool) -> Path:
    schema = "".join(f"CREATE TABLE app.{n} (id INT PRIMARY KEY, v INT);\n" for n in tables)
    files = {
        "ticdc_sync.yml": "name: p\nprofile: p\ndefaults:\n  target_lag: 1h\n",
        "profiles.yml": (
            "p:\n  target: dev\n  outputs:\n    dev:\n      spark: {master: 'local[2]'}\n"
            "      transport: {type: files, captures: captures}\n"
        ),
        "sources/s.yml": "sources:\n  - name: s\n    protocol: canal-json\n    topics: [t]\n",
        "tables/app.yml": "tables:\n  - upstream: app.*\n    name: '{table}'\n",
    }
    if seeded:
        files["schema/app.sql"] = schema
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "captures" / "t").mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every target plan made, by target name."""
    made: list[str] = []
    real = build_module.target_plan

    def target_plan(project, source, tr, *args, **kw):
        made.append(tr.target)
        return real(project, source, tr, *args, **kw)

    monkeypatch.setattr(build_module, "target_plan", target_plan)
    return made


@pytest.mark.parametrize("n", [3, 24])
def test_a_run_plans_each_target_a_fixed_number_of_times_whatever_the_table_count(
    tmp_path: Path, counted: list[str], n: int
) -> None:
    """A plain run over `n` new tables, one apply each: the plan after the poll, then one
    target plan per apply. Re-planning the whole project after each apply made n + 1
    target plans per apply (n * n in the run)."""
    names = [f"t{i:02d}" for i in range(n)]
    project = load_project(_project(tmp_path, names, seeded=True))
    clock = Clock(T0 + 10_000)
    rows = {name: [T0 + i] for i, name in enumerate(names)}
    fake = Fake([Spec(name, create=True) for name in names], {"s": [(T0 + 5_000, rows)]}, clock)
    planner = Planner(project)
    plans: list[object] = []

    def replan(state):
        plans.append(state)
        return planner.plan(state)

    run_loop(
        fake,
        replan,
        Settings([source()], workers=1),
        out=lambda _l: None,
        clock=clock,
        waiter=clock,
        pool=Inline(),
        stager=Inline(),
    )
    assert sorted(fake.names()) == names  # each applied once, alone
    assert all(fake.at(name) == ts(T0 + i) for i, name in enumerate(names))
    # The first plan made every target's; each apply after it, its own target's only.
    assert len(counted) == 2 * n, (len(plans), len(counted))
    assert sorted(counted[n:]) == names
    # What the planner ended with is the plan a whole build makes of the same state.
    last = planner.plan(fake.read_state().state)
    assert last == build_plan(project, fake.read_state().state)


def _created_state(names: list[str]) -> WarehouseState:
    """Each table created by a CREATE TABLE in the stream at its own commit_ts, then one
    row each; every partition resolved past them all."""
    events = tuple(
        DdlEvent(
            "app",
            n,
            ts(T0 + i),
            f"CREATE TABLE app.{n} (id INT PRIMARY KEY, v INT)",
            topic="t",
            offset=2 * i,
        )
        for i, n in enumerate(names)
    )
    tally = SourceTally(
        {("t", 0): PartitionTally("t", 0, 2 * len(names), watermark=ts(T0 + 60_000))},
        {("app", n): (1, 1) for n in names},
        {("app", n): (ts(T0 + i) + 1, ts(T0 + i) + 1) for i, n in enumerate(names)},
    )
    return WarehouseState(sources={"s": SourceState("s", tally=tally, ddl_events=events)})


def _applied(state: WarehouseState, plan, name: str, recorded: list) -> WarehouseState:
    """`state` after `name`'s apply, as the run loop folds it: its new table state, and
    the schema versions it recorded in the source's history."""
    t = plan.target_plan(name)
    marker = Marker(t.stop_ts, t.ddl[-1].commit_ts, 0, 1)
    columns = tuple((c[1], c[3].lower()) for c in t.next_columns)
    ts_ = TargetState(name, exists=True, marker=marker, columns=columns, version=1)
    ss = state.source("s")
    history = {**ss.recorded, **{k: [v] for k, v in recorded}}
    return replace(
        state,
        targets={**state.targets, name: ts_},
        sources={**state.sources, "s": replace(ss, recorded=history)},
    )


def test_after_each_apply_one_target_is_planned_again_and_the_plan_is_a_whole_build(
    tmp_path: Path, counted: list[str]
) -> None:
    names = [f"t{i:02d}" for i in range(12)]
    project = load_project(_project(tmp_path, names, seeded=False))
    state = _created_state(names)
    planner = Planner(project)
    plan = planner.plan(state)
    assert len(counted) == len(names)
    # Each to be created by its CREATE TABLE (a DDL step), then its row.
    assert all(not t.exists and t.pending and t.stop_ts for t in plan.targets)
    timeline = plan.sources[0].timeline
    for name in names:
        # The apply records the version its plan replayed (the CREATE's schema).
        k = key("app", name)
        state = _applied(state, plan, name, [(k, v) for v in timeline.versions[k]])
        before = len(counted)
        plan = planner.plan(state)
        assert counted[before:] == [name]
        assert render_text(plan) == render_text(build_plan(project, state))
    assert plan == build_plan(project, state)
    assert render_json(plan) == render_json(build_plan(project, state))
    assert all(t.exists and not t.pending for t in plan.targets)


def test_a_recorded_version_the_timeline_does_not_hold_plans_the_source_again(
    tmp_path: Path, counted: list[str]
) -> None:
    """A history that says something else than the replay (recorded versions win over
    it) changes the timeline: every target of the source is planned again, and the plan
    is still the whole build's."""
    names = ["a", "b", "c"]
    project = load_project(_project(tmp_path, names, seeded=False))
    state = _created_state(names)
    planner = Planner(project)
    plan = planner.plan(state)
    k = key("app", "a")
    (v,) = plan.sources[0].timeline.versions[k]
    other = replace(v, schema=replace(v.schema, comment="recorded otherwise"))
    state = _applied(state, plan, "a", [(k, other)])
    before = len(counted)
    plan = planner.plan(state)
    assert sorted(counted[before:]) == names
    assert plan == build_plan(project, state)
    assert render_text(plan) == render_text(build_plan(project, state))


def test_applies_in_steps_over_creates_alters_and_a_rename_plan_as_a_whole_build(
    tmp_path: Path, counted: list[str]
) -> None:
    """Targets applied part of the way (up to before their ALTER), then the rest, one of
    them renamed upstream: after every apply the planner's plan is the whole build's."""
    names = ["a", "b", "c", "d"]
    project = load_project(_project(tmp_path, [*names, "z"], seeded=False))
    state = _created_state(names)
    ss = state.source("s")
    more = (
        DdlEvent("app", "b", ts(T0 + 20_000), "ALTER TABLE app.b ADD COLUMN w INT", offset=20),
        DdlEvent("app", "c", ts(T0 + 21_000), "ALTER TABLE app.c ADD COLUMN w INT", offset=21),
        DdlEvent("app", "d", ts(T0 + 22_000), "RENAME TABLE app.d TO app.z", offset=22),
    )
    tally = replace(
        ss.tally,
        tables={**ss.tally.tables, ("app", "z"): (1, 0)},
        spans={**ss.tally.spans, ("app", "z"): (ts(T0 + 30_000), ts(T0 + 30_000))},
    )
    state = replace(
        state, sources={"s": replace(ss, ddl_events=(*ss.ddl_events, *more), tally=tally)}
    )
    planner = Planner(project)
    plan = planner.plan(state)
    timeline = plan.sources[0].timeline
    steps = [("a", None), ("b", ts(T0 + 19_999)), ("c", ts(T0 + 20_999)), ("d", None)]
    steps += [("b", None), ("z", None), ("c", None)]
    for name, upto in steps:
        t = plan.target_plan(name)
        upto = t.stop_ts if upto is None else upto
        done = [d.commit_ts for d in t.ddl if d.commit_ts <= upto]
        marker = Marker(upto, max(done, default=-1), 0, 1)
        columns = tuple((c[1], c[3].lower()) for c in t.next_columns)
        ts_ = TargetState(name, exists=True, marker=marker, columns=columns, version=1)
        recorded = {
            k: [v for v in timeline.versions.get(k, []) if v.commit_ts <= upto]
            for k in (key(db, tbl) for db, tbl in t.upstreams)
        }
        ss = state.source("s")
        history = {**ss.recorded, **{k: vs for k, vs in recorded.items() if vs}}
        state = replace(
            state,
            targets={**state.targets, name: ts_},
            sources={"s": replace(ss, recorded=history)},
        )
        before = len(counted)
        plan = planner.plan(state)
        assert counted[before:] == [name], (name, counted[before:])
        assert plan == build_plan(project, state), name
        assert render_text(plan) == render_text(build_plan(project, state)), name


def test_a_source_with_an_initial_load_keeps_its_parts_once_its_loads_stay_the_same(
    tmp_path: Path, counted: list[str]
) -> None:
    """Its loads read every target's state: after a load, they change (the source is
    planned whole); after an apply of rows, they do not (that target alone)."""
    from testkit.dumpling import DumplingFlags, write_export
    from tests.unit.test_plan_initial_load import PROFILES, S, T, U, _staged
    from tests.unit.test_plan_initial_load import ts as load_ts
    from ticdc_sync.plan.loads import snapshot_ddl
    from ticdc_sync.warehouse.read import read_state

    root = tmp_path / "p"
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: t\nprofile: t\n")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources" / "s.yml").write_text(
        "sources:\n  - name: s\n    protocol: canal-json\n    topics: [a]\n"
        "    initial_load:\n      dumpling: exp\n      options: {filetype: csv}\n"
    )
    (root / "tables" / "t.yml").write_text('tables:\n  - upstream: "shop.*"\n    name: "{table}"\n')
    rows = [(T, [{"id": i, "v": "x"} for i in range(3)]), (U, [{"id": 1}])]
    write_export(root / "exp", rows, S, DumplingFlags(filetype="csv", rows_per_file=2))
    project = load_project(root)
    state = _staged(read_state(project), [])
    planner = Planner(project)
    plan = planner.plan(state)
    assert all(t.load is not None for t in plan.targets)

    def apply(state, name: str, load: bool) -> WarehouseState:
        t = plan.target_plan(name)
        marker = t.load.marker if load else Marker(load_ts(20), -1, -1, 0)
        columns = tuple((c[1], c[3].lower()) for c in t.next_columns)
        targets = {**state.targets, name: TargetState(name, True, marker, columns, version=1)}
        if not load:
            return replace(state, targets=targets)
        ss = state.source("s")
        history = dict(ss.recorded)
        for lt in t.load.tables:
            history[key(lt.db, lt.table)] = [
                replace(v, ddl=snapshot_ddl(t.load, lt))
                for v in plan.sources[0].timeline.versions[key(lt.db, lt.table)]
            ]
        return replace(state, targets=targets, sources={"s": replace(ss, recorded=history)})

    for name, load, planned in [("t", True, 2), ("u", True, 2), ("t", False, 1), ("u", False, 1)]:
        state = apply(state, name, load)
        before = len(counted)
        plan = planner.plan(state)
        assert len(counted) - before == planned, (name, load, counted[before:])
        assert plan == build_plan(project, state), name
        assert render_text(plan) == render_text(build_plan(project, state)), name


def test_each_target_looks_at_its_own_ddl_groups_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables created one after the other are one DDL group each: a target's DDL comes from
    its own group, not from a look at every group of the source (n * n for n tables)."""
    from ticdc_sync.plan import target_ddl

    names = [f"t{i:02d}" for i in range(24)]
    project = load_project(_project(tmp_path, names, seeded=False))
    looked: list[int] = []
    of = target_ddl._Part.of

    def counted(project_, source, target, g):
        looked.append(g.commit_ts)
        return of(project_, source, target, g)

    monkeypatch.setattr(target_ddl._Part, "of", staticmethod(counted))
    plan = build_plan(project, _created_state(names))
    assert all(len(t.ddl) == 1 for t in plan.targets)
    assert len(looked) == len(names)


def test_a_saved_plan_holds_back_each_target_plan_once(tmp_path: Path) -> None:
    """`run --plan FILE` holds every plan of the run to the saved one: a target's plan the
    planner kept is not looked at again, and the result is what a fresh hold gives."""
    import json

    from ticdc_sync.plan.saved import hold_unreviewed

    names = ["a", "b", "c"]
    project = load_project(_project(tmp_path, names, seeded=False))
    state = _created_state(names[:2])
    saved = json.loads(render_json(build_plan(project, state)))
    state = _created_state(names)  # c's CREATE staged after the saved plan was made
    planner = Planner(project)
    memo: dict = {}
    plan = planner.plan(state)
    held = hold_unreviewed(plan, saved, memo)
    assert [t.name for t in held.targets] == ["a", "b"]
    assert held == hold_unreviewed(plan, saved)
    k = key("app", "a")
    state = _applied(state, plan, "a", [(k, v) for v in plan.sources[0].timeline.versions[k]])
    plan = planner.plan(state)
    again = hold_unreviewed(plan, saved, memo)
    assert again == hold_unreviewed(plan, saved)
    assert again.targets[1] is held.targets[1]  # b: not looked at again
