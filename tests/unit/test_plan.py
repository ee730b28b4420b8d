"""Plan: deterministic bytes, no absolute paths, SQL from sqlgen, pending DDL from state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ticdc_sync.plan import PlanState, build_plan, read_state, render_json, render_text
from ticdc_sync.project import load_project

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
# What `run` writes into the example (scripts/example.sh): a copy must start clean.
GENERATED = shutil.ignore_patterns("target", "warehouse")


def test_plan_is_byte_identical_across_loads() -> None:
    a, b = load_project(SHOP), load_project(SHOP)
    assert render_text(build_plan(a)) == render_text(build_plan(b))
    assert render_json(build_plan(a)) == render_json(build_plan(b))


def test_plan_content_for_the_example() -> None:
    plan = build_plan(load_project(SHOP))
    assert [t.target for t in plan.tables] == [
        "canal_customers",
        "canal_items",
        "canal_orders",
        "debezium_customers",
        "debezium_items",
        "debezium_orders",
        "open_customers",
        "open_items",
        "open_orders",
    ]
    orders = next(t for t in plan.tables if t.target == "debezium_orders")
    assert orders.keys == ("id",) and orders.keys_from == "primary key"
    types = {c.name: c.delta_type for c in orders.columns}
    assert types["customer_id"] == "DECIMAL(20,0)"  # bigint unsigned widens
    assert types["placed_at"] == "TIMESTAMP_NTZ"
    assert types["updated_at"] == "TIMESTAMP"
    assert types["status"] == "STRING"
    assert orders.create_sql.startswith(
        "CREATE TABLE IF NOT EXISTS delta.`<warehouse>/tables/debezium_orders`"
    )
    assert "'delta.columnMapping.mode' = 'name'" in orders.create_sql
    assert "USING `__ticdc_sync_source` s" in orders.merge_sql
    assert "t.`_commit_ts` <= s.`_commit_ts`" in orders.merge_sql
    assert plan.has_pending  # nothing applied yet: every target is to be created
    assert plan.warnings == ()


def test_plan_has_no_absolute_paths(tmp_path: Path) -> None:
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    prof = dest / "profiles.yml"
    prof.write_text(prof.read_text().replace("warehouse: warehouse", f"warehouse: {dest}/wh", 1))
    plan = build_plan(load_project(dest))
    for text in (render_text(plan), render_json(plan)):
        assert str(tmp_path) not in text
        assert str(REPO) not in text
    assert plan.output["warehouse"] == "wh"


def test_json_is_sorted_and_parses() -> None:
    text = render_json(build_plan(load_project(SHOP)))
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert data["project"] == "shop" and data["target"] == "dev"


def test_pending_ddl_from_state(tmp_path: Path) -> None:
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    project = load_project(dest)
    assert read_state(project) is None
    applied = {t.target: 5 for t in build_plan(project).tables}
    state = {
        "applied": applied,
        "pending_ddl": [
            {
                "upstream": "shop.orders",
                "kind": "partition",
                "sql": "ALTER TABLE orders TRUNCATE PARTITION p0",
                "commit_ts": 20,
            },
            {
                "upstream": "shop.orders",
                "kind": "add_column",
                "sql": "ALTER TABLE orders ADD COLUMN coupon VARCHAR(20)",
                "commit_ts": 10,
            },
        ],
    }
    (dest / "target").mkdir()
    (dest / "target" / "state.json").write_text(json.dumps(state))
    plan = build_plan(project, read_state(project))
    assert [(p.commit_ts, p.classification, p.action) for p in plan.pending] == [
        (10, "additive", "apply"),
        (20, "unsupported", "fail"),
    ]
    assert plan.pending[0].blocked is None
    assert plan.pending[1].blocked == "policy ddl.partition: fail"
    assert all(t.action == "update" for t in plan.tables)
    assert plan.has_pending
    text = render_text(plan)
    assert "BLOCKED: policy ddl.partition: fail" in text

    clean = build_plan(project, PlanState(applied=applied))
    assert not clean.has_pending
