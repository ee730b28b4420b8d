"""Modes in the plan: `mode` on a table entry or in defaults, each target's mode and extra
columns in `plan` (text and JSON), and the DDL decisions that differ per mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ticdc_sync.core.errors import ProjectError
from ticdc_sync.core.model import Mode
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import OP_BACKFILL, OP_REBUILD, OP_SQL
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
GENERATED = shutil.ignore_patterns("target", "warehouse")

TABLES = """\
tables:
  - upstream: shop.orders
    source: canal
    name: canal_orders
    mode: {orders}
  - upstream: shop.customers
    source: canal
    name: canal_customers
    mode: soft_delete
  - upstream: shop.items
    source: canal
    name: canal_items
"""


def _project(tmp_path: Path, orders: str = "history", default: str | None = None):
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    (dest / "tables" / "shop.yml").write_text(TABLES.format(orders=orders))
    if default is not None:
        yml = dest / "ticdc_sync.yml"
        yml.write_text(yml.read_text().replace("defaults:\n", f"defaults:\n  mode: {default}\n"))
    return load_project(dest)


def _state(project, events, applied: int, columns=None, resolved: int = 100) -> WarehouseState:
    tally = SourceTally(
        partitions={("shop_canal", 0): PartitionTally("shop_canal", 0, 10, watermark=resolved)},
        tables={("shop", "orders"): (5, len(events))},
    )
    cols = tuple((c.name, "string") for c in project.seed_schemas[("shop", "orders")].columns)
    if columns is not None:
        cols = cols + columns
    return WarehouseState(
        sources={"canal": SourceState("canal", tally=tally, ddl_events=tuple(events))},
        targets={"canal_orders": TargetState("canal_orders", True, Marker(applied), columns=cols)},
    )


HISTORY_COLS = (
    ("_valid_from", "bigint"),
    ("_valid_to", "bigint"),
    ("_valid_from_at", "timestamp"),
    ("_valid_to_at", "timestamp"),
)


def test_each_target_shows_its_mode_and_extra_columns(tmp_path: Path) -> None:
    plan = build_plan(_project(tmp_path))
    modes = {t.name: (t.mode, t.mode_from) for t in plan.targets}
    assert modes["canal_orders"] == (Mode.HISTORY, "tables/shop.yml:2")
    assert modes["canal_customers"] == (Mode.SOFT_DELETE, "tables/shop.yml:6")
    assert modes["canal_items"] == (Mode.MIRROR, "built-in default")
    data = json.loads(render_json(plan))
    by_name = {t["name"]: t for t in data["targets"]}
    orders = by_name["canal_orders"]
    assert [c["name"] for c in orders["mode_columns"]] == [n for n, _ in HISTORY_COLS]
    assert "`_valid_to` BIGINT" in orders["create_sql"]
    assert "t.`_valid_from` = s.`_valid_from`" in orders["merge_sql"]
    customers = by_name["canal_customers"]
    assert [c["name"] for c in customers["mode_columns"]] == [
        "_is_deleted",
        "_deleted_ts",
        "_deleted_at",
    ]
    assert "`_is_deleted` BOOLEAN" in customers["create_sql"]
    assert by_name["canal_items"]["mode_columns"] == []
    assert data["defaults"]["mode"] == "mirror"
    text = render_text(plan)
    assert "    mode: history  (tables/shop.yml:2); adds _valid_from BIGINT" in text
    assert "    mode: soft_delete  (tables/shop.yml:6); adds _is_deleted BOOLEAN" in text


def test_defaults_mode_applies_to_entries_without_one(tmp_path: Path) -> None:
    plan = build_plan(_project(tmp_path, default="history"))
    t = plan.target_plan("canal_items")
    assert (t.mode, t.mode_from) == (Mode.HISTORY, "ticdc_sync.yml defaults")
    assert plan.target_plan("canal_customers").mode is Mode.SOFT_DELETE
    assert "  mode: history" in render_text(plan)


def test_an_unknown_mode_is_a_project_error(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match="scd2"):
        _project(tmp_path, orders="scd2")


EVENTS = [
    DdlEvent("shop", "orders", 10, "ALTER TABLE orders ADD COLUMN coupon INT NOT NULL DEFAULT 7"),
    DdlEvent("shop", "orders", 20, "ALTER TABLE orders DROP COLUMN note"),
    DdlEvent("shop", "orders", 30, "TRUNCATE TABLE orders", "TRUNCATE"),
]


def _ddl(plan):
    t = plan.target_plan("canal_orders")
    return {d.commit_ts: d for d in t.ddl}


def test_history_keeps_dropped_columns_closes_on_truncate_and_backfills_open_versions(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    plan = build_plan(project, _state(project, EVENTS, applied=5, columns=HISTORY_COLS))
    t = plan.target_plan("canal_orders")
    assert t.refused is None and t.mode is Mode.HISTORY
    # The mode's columns are not shown as upstream columns.
    assert not any(n.startswith("_valid") for n, _ in t.columns)
    ddl = _ddl(plan)
    add = ddl[10]
    (backfill,) = [p for p in add.parts if p.op == OP_BACKFILL]
    # Upstream every row has the default from the ADD on: the versions open at it do.
    assert backfill.sql is not None and backfill.sql.endswith("WHERE `_valid_to` IS NULL")
    assert "versions open at the ADD hold 7" in add.steps[0].decision.describe
    assert not add.additive  # rows before it must not share a MERGE (they would get 7)
    drop = ddl[20]
    assert drop.steps[0].decision.action == "none"
    assert "kept" in drop.steps[0].decision.describe
    assert not any("DROP COLUMN" in (p.sql or "") for p in drop.parts)
    (trunc,) = ddl[30].parts
    assert trunc.op == OP_SQL and trunc.sql is not None
    assert trunc.sql.startswith("UPDATE delta.")
    assert "SET `_valid_to` = 30" in trunc.sql and "`_valid_to` IS NULL" in trunc.sql
    assert "DELETE" not in trunc.sql
    text = render_text(plan)
    assert "close every open version at commit_ts 30" in text


def test_soft_delete_marks_rows_on_truncate_and_drops_columns_as_the_mirror(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path, orders="soft_delete")
    cols = (("_is_deleted", "boolean"), ("_deleted_ts", "bigint"), ("_deleted_at", "timestamp"))
    plan = build_plan(project, _state(project, EVENTS, applied=5, columns=cols))
    ddl = _ddl(plan)
    assert any(p.op == OP_BACKFILL for p in ddl[10].parts)
    assert ddl[10].additive
    # Dropped as in a mirror (by default, a small target is rewritten without it).
    assert any(p.op == OP_REBUILD and p.drop_column and p.column == "note" for p in ddl[20].parts)
    (trunc,) = ddl[30].parts
    assert trunc.sql is not None and "SET `_is_deleted` = true, `_deleted_ts` = 30" in trunc.sql


def test_mirror_ddl_is_unchanged(tmp_path: Path) -> None:
    project = _project(tmp_path, orders="mirror")
    plan = build_plan(project, _state(project, EVENTS, applied=5))
    ddl = _ddl(plan)
    assert any(p.op == OP_BACKFILL for p in ddl[10].parts)
    # Dropped as in a mirror (by default, a small target is rewritten without it).
    assert any(p.op == OP_REBUILD and p.drop_column and p.column == "note" for p in ddl[20].parts)
    assert [p.sql for p in ddl[30].parts] == ["DELETE FROM delta.`" + _loc(plan) + "`"]


def _loc(plan) -> str:
    return plan.target_plan("canal_orders").location


def test_a_target_keeps_the_mode_it_was_created_with(tmp_path: Path) -> None:
    project = _project(tmp_path, orders="history")
    plan = build_plan(project, _state(project, [], applied=5))  # a mirror table
    t = plan.target_plan("canal_orders")
    assert t.refused is not None
    assert "created in mode mirror" in t.refused and "says history" in t.refused
    assert "blocked: the target was created in mode mirror" in render_text(plan)
