"""Plan: deterministic bytes, no absolute paths, SQL from sqlgen, DDL decisions from state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

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
    assert [t.name for t in plan.targets] == [
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
    data = json.loads(render_json(plan))
    orders = next(t for t in data["targets"] if t["name"] == "debezium_orders")
    assert orders["keys"] == ["id"] and orders["keys_from"] == "primary key"
    types = {c["name"]: c["delta_type"] for c in orders["columns"]}
    assert types["customer_id"] == "DECIMAL(20,0)"  # bigint unsigned widens
    assert types["placed_at"] == "TIMESTAMP_NTZ"
    assert types["updated_at"] == "TIMESTAMP"
    assert types["status"] == "STRING"
    assert orders["create_sql"].startswith(
        "CREATE TABLE IF NOT EXISTS delta.`<warehouse>/tables/debezium_orders`"
    )
    assert "USING `__ticdc_sync_source` s" in orders["merge_sql"]
    assert "t.`_commit_ts` <= s.`_commit_ts`" in orders["merge_sql"]
    assert plan.has_pending  # nothing applied yet: every target is to be created
    assert plan.warnings == ()
    assert data["summary"]["create"] == 9


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


def test_json_is_sorted_versioned_and_fingerprinted() -> None:
    text = render_json(build_plan(load_project(SHOP)))
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert data["project"] == "shop" and data["target"] == "dev"
    assert data["format_version"] == 1 and len(data["fingerprint"]) == 64


def _state(project, events: list[DdlEvent], resolved: int, applied: int) -> WarehouseState:
    tally = SourceTally(
        partitions={("shop_canal", 0): PartitionTally("shop_canal", 0, 10, watermark=resolved)},
        tables={("shop", "orders"): (5, len(events))},
    )
    cols = tuple((c.name, "string") for c in project.seed_schemas[("shop", "orders")].columns)
    return WarehouseState(
        sources={"canal": SourceState("canal", tally=tally, ddl_events=tuple(events))},
        targets={"canal_orders": TargetState("canal_orders", True, Marker(applied), columns=cols)},
    )


def test_pending_ddl_is_decided_and_shown(tmp_path: Path) -> None:
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    project = load_project(dest)
    events = [
        DdlEvent("shop", "orders", 20, "ALTER TABLE orders TRUNCATE PARTITION p0", "ALTER"),
        DdlEvent("shop", "orders", 10, "ALTER TABLE orders ADD COLUMN coupon VARCHAR(20)", "ALTER"),
        DdlEvent("shop", "orders", 30, "ALTER TABLE orders DROP COLUMN note", "ALTER"),
    ]
    plan = build_plan(project, _state(project, events, resolved=25, applied=5))
    t = plan.target_plan("canal_orders")
    assert [(d.commit_ts, d.status) for d in t.ddl] == [
        (10, "ready"),
        (20, "blocked"),
        (30, "held"),
    ]
    (add,) = t.ddl[0].steps
    assert (add.decision.classification, add.decision.action) == ("additive", "apply")
    # The part carries its column: the engine may commit it without a Spark statement.
    (alter,) = [p for p in t.ddl[0].parts if "ADD COLUMNS" in (p.sql or "")]
    assert alter.added is not None and alter.added.name == "coupon"
    (part,) = t.ddl[1].steps
    assert (part.decision.classification, part.decision.action) == ("unsupported", "block")
    assert t.stop_ts == 19  # rows up to just before the blocked DDL
    text = render_text(plan)
    assert "DDL at 20 on shop.orders" in text and ": BLOCKED" in text
    assert "+ coupon" in text  # the next run adds it
    assert "Summary: 8 to create, 0 to change, 1 blocked" in text
    assert plan.has_pending
    clean = build_plan(project, _state(project, [], resolved=25, applied=25))
    assert [d.status for d in clean.target_plan("canal_orders").ddl] == []


def test_unparsed_ddl_points_at_an_override_not_at_a_policy(tmp_path: Path) -> None:
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    project = load_project(dest)
    sql = "ALTER TABLE shop.orders ADD COLUMN c INT, ALGORITHM=INSTANT, LOCK=NONE, FROBNICATE"
    plan = build_plan(project, _state(project, [DdlEvent("shop", "orders", 10, sql)], 25, 5))
    (d,) = plan.target_plan("canal_orders").ddl
    assert d.status == "blocked"
    assert d.steps[0].decision.kind.value == "unparsed"
    assert "ddl_overrides" in (d.setting or "") and "other: skip" not in (d.setting or "")
    (dest / "ticdc_sync.yml").write_text(
        (dest / "ticdc_sync.yml").read_text()
        + "ddl_overrides:\n  - upstream: shop.orders\n    commit_ts: 10\n    action: apply_as\n"
        "    sql: ALTER TABLE shop.orders ADD COLUMN c INT\n"
    )
    project = load_project(dest)
    plan = build_plan(project, _state(project, [DdlEvent("shop", "orders", 10, sql)], 25, 5))
    (d,) = plan.target_plan("canal_orders").ddl
    assert d.status == "ready" and d.steps[0].decision.describe.startswith("add column c")
    assert "override (ticdc_sync.yml:" in render_text(plan)


def test_drop_database_drops_the_targets_of_its_tables(tmp_path: Path) -> None:
    # One schema-level event with no table (codec facts 1.4) drops every table in it.
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    project = load_project(dest)
    drop = [DdlEvent("shop", "", 20, "DROP DATABASE `shop`", "QUERY")]
    (d,) = build_plan(project, _state(project, drop, 25, 5)).target_plan("canal_orders").ddl
    assert d.status == "ready"
    assert [s.decision.kind.value for s in d.steps] == ["drop_table"]
    assert any("DELETE FROM" in (p.sql or "") for p in d.parts)
