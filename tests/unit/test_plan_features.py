"""Table features in the plan: a target is created with the fewest, a DDL adds the one it
needs (shown in `plan`), and `table_features` keeps one off (rebuild or block) or removes it
from an existing target, in both directions."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from ticdc_sync.core.model import FeatureUse
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import OP_REBUILD, OP_SQL
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

SHOP = Path(__file__).resolve().parents[2] / "projects_example" / "shop"
CREATED = ("appendOnly", "invariants", "timestampNtz")  # as Spark lists them
DV = "    deletion_vectors: true\n"
ENABLE = "    column_mapping: enable\n    type_widening: enable\n"


def _project(tmp_path: Path, features: str = "", entry: str = ""):
    dest = tmp_path / "shop"
    if not dest.exists():
        shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("target", "warehouse"))
    yml = (SHOP / "ticdc_sync.yml").read_text()
    if features:
        yml = yml.replace("defaults:\n", f"defaults:\n  table_features:\n{features}", 1)
    (dest / "ticdc_sync.yml").write_text(yml)
    tables = (SHOP / "tables" / "shop.yml").read_text()
    if entry:
        tables = tables.replace(
            '    name: "canal_{table}"\n', f'    name: "canal_{{table}}"\n{entry}', 1
        )
    (dest / "tables" / "shop.yml").write_text(tables)
    return load_project(dest)


def _state(project, events, features=CREATED, resolved=25, applied=5) -> WarehouseState:
    tally = SourceTally(
        partitions={("shop_canal", 0): PartitionTally("shop_canal", 0, 10, watermark=resolved)},
        tables={("shop", "orders"): (5, len(events))},
    )
    cols = tuple((c.name, "string") for c in project.seed_schemas[("shop", "orders")].columns)
    readers = tuple(
        f
        for f in features
        if f in ("columnMapping", "deletionVectors", "typeWidening", "timestampNtz")
    )
    target = TargetState(
        "canal_orders",
        True,
        Marker(applied),
        columns=cols,
        reader_features=readers,
        writer_features=tuple(features),
    )
    return WarehouseState(
        sources={"canal": SourceState("canal", tally=tally, ddl_events=tuple(events))},
        targets={"canal_orders": target},
    )


RENAME = DdlEvent("shop", "orders", 10, "ALTER TABLE orders RENAME COLUMN note TO remark")
WIDEN = DdlEvent("shop", "orders", 12, "ALTER TABLE orders MODIFY COLUMN quantity INT UNSIGNED")
ADD = DdlEvent("shop", "orders", 11, "ALTER TABLE orders ADD COLUMN coupon VARCHAR(20)")


def test_a_new_target_is_created_with_no_feature_a_reader_lacks(tmp_path: Path) -> None:
    plan = build_plan(_project(tmp_path))
    t = plan.target_plan("canal_orders")
    d = next(x for x in json.loads(render_json(plan))["targets"] if x["name"] == "canal_orders")
    # No deletion vectors by default: delta-rs's to_pyarrow_table/to_pandas refuse them.
    assert "TBLPROPERTIES" not in d["create_sql"]
    # DATETIME columns bring timestampNtz with them (Spark enables it at CREATE).
    assert t.features == CREATED
    assert d["table_features"] == {
        "column_mapping": "auto",
        "deletion_vectors": False,
        "type_widening": "auto",
        "rebuild_below": 1 << 30,
    }
    assert "table features: appendOnly, invariants, timestampNtz" in render_text(plan)
    items = plan.target_plan("canal_customers")
    assert "timestampNtz" in items.features  # created_at DATETIME(3)


@pytest.mark.parametrize("where", ["defaults", "entry"])
def test_deletion_vectors_only_where_the_setting_asks(tmp_path: Path, where: str) -> None:
    if where == "defaults":
        project = _project(tmp_path, features=DV)
    else:
        project = _project(tmp_path, entry="    table_features:\n  " + DV)
    plan = build_plan(project)
    d = {x["name"]: x for x in json.loads(render_json(plan))["targets"]}
    assert "'delta.enableDeletionVectors' = 'true'" in d["canal_orders"]["create_sql"]
    for gone in ("columnMapping", "enableTypeWidening", "allowColumnDefaults", "timestampNtz"):
        assert gone not in d["canal_orders"]["create_sql"]
    assert plan.target_plan("canal_orders").features == tuple(sorted((*CREATED, "deletionVectors")))
    assert d["canal_orders"]["table_features"]["deletion_vectors"] is True
    # The entry's setting is its own: other entries' targets keep the default.
    others = [n for n in d if not n.startswith("canal_")]
    assert others
    for name in others:
        has = "'delta.enableDeletionVectors'" in (d[name]["create_sql"] or "")
        assert has is (where == "defaults"), name


def test_the_ddl_that_first_needs_a_feature_enables_it_and_plan_says_so(tmp_path: Path) -> None:
    project = _project(tmp_path, features=ENABLE)
    plan = build_plan(project, _state(project, [RENAME, ADD, WIDEN]))
    t = plan.target_plan("canal_orders")
    rename, add, widen = t.ddl
    assert [p.describe for p in rename.parts] == [
        "enable table feature columnMapping",
        "rename column note to remark",
    ]
    assert "'delta.columnMapping.mode' = 'name'" in (rename.parts[0].sql or "")
    assert rename.features_added == ("columnMapping",)
    assert add.features_added == ()
    assert widen.parts[0].feature == "typeWidening"
    assert widen.features_added == ("typeWidening",)
    text = render_text(plan)
    assert "(+ columnMapping, + typeWidening)" in text
    assert text.count("adds table feature: columnMapping") == 1
    assert text.count("adds table feature: typeWidening") == 1
    assert t.feature_parts == ()
    # A target that has the feature already: the (idempotent) part stays, nothing is added.
    have = (*CREATED, "columnMapping")
    plan = build_plan(project, _state(project, [RENAME], features=have))
    (rename,) = plan.target_plan("canal_orders").ddl
    assert rename.parts[0].feature == "columnMapping" and rename.features_added == ()
    assert "adds table feature" not in render_text(plan)


@pytest.mark.parametrize("where", ["defaults", "entry"])
def test_rebuild_rewrites_instead_of_enabling_a_feature(tmp_path: Path, where: str) -> None:
    setting = "    column_mapping: rebuild\n    type_widening: rebuild\n"
    if where == "defaults":
        project = _project(tmp_path, features=setting)
    else:
        project = _project(
            tmp_path, entry="    table_features:\n" + setting.replace("    ", "      ")
        )
    entry = project.tables[0]
    assert project.table_features(entry).column_mapping is FeatureUse.REBUILD
    plan = build_plan(project, _state(project, [RENAME, WIDEN]))
    rename, widen = plan.target_plan("canal_orders").ddl
    assert [(p.op, p.column, p.new_name) for p in rename.parts] == [(OP_REBUILD, "note", "remark")]
    assert [(p.op, p.column, p.new_type) for p in widen.parts] == [
        (OP_REBUILD, "quantity", "BIGINT")
    ]
    assert rename.steps[0].decision.action == "rebuild"
    assert rename.features_added == widen.features_added == ()
    text = render_text(plan)
    assert "rewrites the table: `table_features.column_mapping: rebuild`" in text
    if where == "entry":  # other entries keep the default
        other = project.tables[1]
        assert project.table_features(other).column_mapping is FeatureUse.AUTO


def test_fail_blocks_with_the_settings_that_let_it_through(tmp_path: Path) -> None:
    project = _project(tmp_path, features="    column_mapping: fail\n")
    drop = DdlEvent("shop", "orders", 10, "ALTER TABLE orders DROP COLUMN note")
    plan = build_plan(project, _state(project, [drop, ADD]))
    t = plan.target_plan("canal_orders")
    assert [d.status for d in t.ddl] == ["blocked", "held"]
    assert "needs the Delta table feature columnMapping" in (t.ddl[0].reason or "")
    assert "table_features.column_mapping: rebuild" in (t.ddl[0].setting or "")
    assert t.stop_ts == 9


def test_switching_a_feature_off_drops_it_and_on_enables_it_again(tmp_path: Path) -> None:
    off = "    deletion_vectors: false\n    column_mapping: rebuild\n    type_widening: fail\n"
    project = _project(tmp_path, features=off)
    # A new target: no deletion vectors, no TBLPROPERTIES at all.
    fresh = build_plan(project)
    d = next(x for x in json.loads(render_json(fresh))["targets"] if x["name"] == "canal_items")
    assert "TBLPROPERTIES" not in d["create_sql"]
    assert "deletionVectors" not in fresh.target_plan("canal_items").features
    # An existing target with every feature an earlier version enabled at CREATE.
    old = (*CREATED, "allowColumnDefaults", "columnMapping", "deletionVectors", "typeWidening")
    plan = build_plan(project, _state(project, [], features=old, applied=25))
    t = plan.target_plan("canal_orders")
    assert [(p.op, p.sql, p.feature_dropped) for p in t.feature_parts] == [
        (OP_SQL, f"ALTER TABLE {_ref(t)} DROP FEATURE {f}", f)
        for f in ("deletionVectors", "columnMapping", "typeWidening")
    ]
    assert plan.has_pending
    text = render_text(plan)
    assert "- deletionVectors, - columnMapping, - typeWidening" in text
    assert "drop table feature columnMapping (rewrites every data file" in text
    # Under the default too: a target an earlier version made with deletion vectors loses
    # them (to_pyarrow_table can read it then).
    plan = build_plan(
        _project(tmp_path), _state(project, [], features=(*CREATED, "deletionVectors"), applied=25)
    )
    assert [p.feature_dropped for p in plan.target_plan("canal_orders").feature_parts] == [
        "deletionVectors"
    ]
    # Back on: deletion vectors are enabled again; the others wait for a DDL that needs them.
    project = _project(tmp_path, features=DV)
    plan = build_plan(
        project, _state(project, [], features=("appendOnly", "invariants"), applied=25)
    )
    t = plan.target_plan("canal_orders")
    assert [(p.feature, p.sql) for p in t.feature_parts] == [
        (
            "deletionVectors",
            f"ALTER TABLE {_ref(t)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        )
    ]
    # Nothing to change: no step, nothing pending (with deletion vectors asked for and had,
    # and by default without them).
    with_dv = (*CREATED, "deletionVectors")
    for proj, have in ((project, with_dv), (_project(tmp_path), CREATED)):
        plan = build_plan(proj, _state(proj, [], features=have, applied=25))
        assert plan.target_plan("canal_orders").feature_parts == ()
        assert not plan.has_pending or plan.target_plan("canal_orders").pending == ()


def test_table_features_are_checked_by_the_schema(tmp_path: Path) -> None:
    from ticdc_sync.core.errors import UserError

    with pytest.raises(UserError) as e:
        _project(tmp_path, features="    column_mapping: sometimes\n    deletion_vector: false\n")
    msg = str(e.value)
    assert "defaults.table_features.column_mapping" in msg
    assert "deletion_vector" in msg


def _ref(t) -> str:
    return f"delta.`{t.location}`"


def test_a_ddl_half_applied_under_other_settings_blocks_until_they_are_back(
    tmp_path: Path,
) -> None:
    # The run enabled column mapping (part 1 of 2) and stopped before the rename.
    half = Marker(applied_ts=9, ddl_ts=10, ddl_part=0, ddl_parts=2)
    project = _project(tmp_path, features="    column_mapping: rebuild\n")
    state = _state(project, [RENAME], features=(*CREATED, "columnMapping"))
    targets = dict(state.targets)
    targets["canal_orders"] = replace(targets["canal_orders"], marker=half)
    state = replace(state, targets=targets)
    t = build_plan(project, state).target_plan("canal_orders")
    (d,) = t.ddl
    assert d.status == "blocked" and d.parts_done == 1
    assert "half applied (1 of its 2 Delta commits) under other settings" in (d.reason or "")
    # Column mapping stays until that DDL is done: its rename needs it.
    assert t.feature_parts == ()
    assert any("once the DDL at commit_ts 10 is applied" in n for n in t.notes)
    # With the settings it started with, it resumes at the rename.
    project = _project(tmp_path, features=ENABLE)
    (d,) = build_plan(project, state).target_plan("canal_orders").ddl
    assert d.status == "ready" and d.parts_done == 1
    assert d.parts[1].describe == "rename column note to remark"


def test_a_column_name_delta_allows_only_under_column_mapping_brings_it(tmp_path: Path) -> None:
    # MySQL allows `a b.c` in a quoted identifier; Delta only with column mapping
    # (DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES), so the target has it from its CREATE or
    # from the ADD COLUMN that brings such a name.
    project = _project(tmp_path)
    (tmp_path / "shop" / "schema" / "odd.sql").write_text(
        "CREATE TABLE shop.odd (id INT PRIMARY KEY, `a b.c` VARCHAR(10));\n"
    )
    project = load_project(tmp_path / "shop")
    plan = build_plan(project)
    odd = plan.target_plan("canal_odd")
    assert "columnMapping" in odd.features and "timestampNtz" in odd.features
    d = next(x for x in json.loads(render_json(plan))["targets"] if x["name"] == "canal_odd")
    assert "'delta.columnMapping.mode' = 'name'" in d["create_sql"]
    orders = next(
        x for x in json.loads(render_json(plan))["targets"] if x["name"] == "canal_orders"
    )
    assert "columnMapping" not in orders["create_sql"]

    odd_add = DdlEvent("shop", "orders", 11, "ALTER TABLE orders ADD COLUMN `x=y` INT")
    plan = build_plan(project, _state(project, [odd_add]))
    (add,) = plan.target_plan("canal_orders").ddl
    assert add.features_added == ("columnMapping",)  # timestampNtz it has already
    assert add.parts[0].describe == "enable table feature columnMapping"
    # A rewrite cannot avoid it: `rebuild` blocks with the settings that let it through.
    project = _project(tmp_path, features="    column_mapping: rebuild\n")
    plan = build_plan(project, _state(project, [odd_add]))
    (add,) = plan.target_plan("canal_orders").ddl
    assert add.status == "blocked"
    assert "no rewrite avoids" in (add.reason or "")
    assert "table_features.column_mapping: enable" in (add.setting or "")


def test_column_mapping_stays_while_a_column_name_needs_it(tmp_path: Path) -> None:
    # `column_mapping: rebuild` drops the feature from an existing target, but not from one
    # whose column name Delta allows only under column mapping (it could not be dropped).
    project = _project(tmp_path, features="    column_mapping: rebuild\n")
    have = (*CREATED, "columnMapping")
    plan = build_plan(project, _state(project, [], features=have))
    assert [p.feature_dropped for p in plan.target_plan("canal_orders").feature_parts] == [
        "columnMapping"
    ]
    state = _state(project, [], features=have)
    t = state.targets["canal_orders"]
    odd = replace(t, columns=(*t.columns, ("a b.c", "string")))
    state = replace(state, targets={"canal_orders": odd})
    assert build_plan(project, state).target_plan("canal_orders").feature_parts == ()


def _sized(state: WarehouseState, data_bytes: int, marker: Marker | None = None) -> WarehouseState:
    t = replace(state.targets["canal_orders"], data_bytes=data_bytes)
    if marker is not None:
        t = replace(t, marker=marker)
    return replace(state, targets={"canal_orders": t})


def test_auto_rebuilds_a_target_below_rebuild_below_and_enables_above(tmp_path: Path) -> None:
    # The default: a small target is rewritten (every reader keeps reading it), a large one
    # gets the feature (no rewrite per DDL), and plan says which and why.
    project = _project(tmp_path)
    small = _sized(_state(project, [RENAME, WIDEN]), 12 << 20)
    rename, widen = build_plan(project, small).target_plan("canal_orders").ddl
    assert [p.op for p in rename.parts] == [OP_REBUILD]
    assert [(p.op, p.new_type) for p in widen.parts] == [(OP_REBUILD, "BIGINT")]
    assert rename.features_added == widen.features_added == ()
    text = render_text(build_plan(project, small))
    assert (
        "rename column note to remark (rewrites the table: target 12 MiB < "
        "table_features.rebuild_below 1 GiB, keeps every reader)  [destructive; rebuild]"
    ) in text
    big = _sized(_state(project, [RENAME, WIDEN]), 3 << 30)
    plan = build_plan(project, big)
    rename, widen = plan.target_plan("canal_orders").ddl
    assert rename.parts[0].feature == "columnMapping" and rename.features_added == (
        "columnMapping",
    )
    assert widen.features_added == ("typeWidening",)
    text = render_text(plan)
    assert (
        "enables columnMapping: target 3 GiB >= table_features.rebuild_below 1 GiB; "
        "polars and delta-rs to_pyarrow_table cannot read it"
    ) in text
    js = next(x for x in json.loads(render_json(plan))["targets"] if x["name"] == "canal_orders")
    assert "target 3 GiB >= table_features.rebuild_below" in js["ddl"][0]["changes"][0]["describe"]
    # The threshold is a setting: at 0 every target gets the feature.
    project = _project(tmp_path, features="    rebuild_below: 0\n")
    (rename,) = (
        build_plan(project, _sized(_state(project, [RENAME]), 0)).target_plan("canal_orders").ddl
    )
    assert rename.features_added == ("columnMapping",)
    assert "target 0 B >= table_features.rebuild_below 0 B" in rename.steps[0].decision.describe
    project = _project(tmp_path, features="    rebuild_below: 10MiB\n")
    assert project.table_features(project.tables[0]).rebuild_below == 10 << 20


def test_auto_drops_a_feature_from_a_small_target_and_keeps_it_on_a_large_one(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    have = (*CREATED, "columnMapping", "typeWidening")
    small = _sized(_state(project, [], features=have, applied=25), 5 << 20)
    plan = build_plan(project, small)
    parts = plan.target_plan("canal_orders").feature_parts
    assert [p.feature_dropped for p in parts] == ["columnMapping", "typeWidening"]
    assert "`table_features.column_mapping: auto`: target 5 MiB < table_features.rebuild_below" in (
        parts[0].describe
    )
    big = _sized(_state(project, [], features=have, applied=25), 2 << 30)
    assert build_plan(project, big).target_plan("canal_orders").feature_parts == ()


def test_auto_resumes_a_half_applied_ddl_the_way_it_began(tmp_path: Path) -> None:
    project = _project(tmp_path)
    drops = DdlEvent(
        "shop", "orders", 10, "ALTER TABLE orders DROP COLUMN note, DROP COLUMN status"
    )
    # Began as rewrites on a small target; the first rewrite grew it past the threshold:
    # the second change is still a rewrite (its part numbers must not change).
    half = Marker(applied_ts=9, ddl_ts=10, ddl_part=0, ddl_parts=2)
    state = _sized(_state(project, [drops]), 2 << 30, half)
    (d,) = build_plan(project, state).target_plan("canal_orders").ddl
    assert d.status == "ready" and d.parts_done == 1
    assert [p.op for p in d.parts] == [OP_REBUILD, OP_REBUILD]
    # Began by enabling column mapping on a large target, now small: goes on enabled.
    half = Marker(applied_ts=9, ddl_ts=10, ddl_part=1, ddl_parts=4)
    state = _sized(_state(project, [drops], features=(*CREATED, "columnMapping")), 1, half)
    t = build_plan(project, state).target_plan("canal_orders")
    (d,) = t.ddl
    assert d.status == "ready" and d.parts_done == 2 and len(d.parts) == 4
    assert t.feature_parts == ()
