"""A RENAME that brings a table no entry routes into a routed target (an online schema
change's cut-over: gh-ost's `_orders_gho` becomes `orders`) must not leave the target
silently without that table's rows: the plan blocks it and names the ways to bring them,
unless the table was created in the captured history and never had a row change."""

from __future__ import annotations

import shutil
from pathlib import Path

from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import build_plan, render_text
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
GENERATED = shutil.ignore_patterns("target", "warehouse")
ONLY_ORDERS = 'tables:\n  - upstream: shop.orders\n    source: canal\n    name: "canal_orders"\n'


def _project(tmp_path: Path, tables: str = ONLY_ORDERS):
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=GENERATED)
    (dest / "tables" / "shop.yml").write_text(tables)
    return load_project(dest)


def _swap(new: str, ts: int) -> list[DdlEvent]:
    """`RENAME TABLE orders TO _orders_del, <new> TO orders` as TiCDC sends it: one DDL
    event per pair, keyed under its new name (codec facts 0.5)."""
    return [
        DdlEvent("shop", "_orders_del", ts, "RENAME TABLE `shop`.`orders` TO `shop`.`_orders_del`"),
        DdlEvent("shop", "orders", ts, f"RENAME TABLE `shop`.`{new}` TO `shop`.`orders`"),
    ]


def _state(project, events: list[DdlEvent], rows: dict[str, int]) -> WarehouseState:
    tally = SourceTally(
        partitions={("shop_canal", 0): PartitionTally("shop_canal", 0, 10, watermark=25)},
        tables={("shop", t): (n, 0) for t, n in rows.items()},
    )
    cols = tuple((c.name, "string") for c in project.seed_schemas[("shop", "orders")].columns)
    return WarehouseState(
        sources={"canal": SourceState("canal", tally=tally, ddl_events=tuple(events))},
        targets={"canal_orders": TargetState("canal_orders", True, Marker(5), columns=cols)},
    )


GHO = [
    DdlEvent("shop", "_orders_gho", 10, "CREATE TABLE shop._orders_gho LIKE shop.orders"),
    DdlEvent("shop", "_orders_gho", 11, "ALTER TABLE shop._orders_gho ADD COLUMN coupon INT"),
]


def test_a_cut_over_from_an_unrouted_table_with_rows_blocks(tmp_path: Path) -> None:
    project = _project(tmp_path)
    state = _state(project, [*GHO, *_swap("_orders_gho", 20)], {"orders": 5, "_orders_gho": 7})
    t = build_plan(project, state).target_plan("canal_orders")
    assert [(d.commit_ts, d.status) for d in t.ddl] == [(20, "blocked")]
    d = t.ddl[0]
    assert "shop._orders_gho" in (d.reason or "") and "no table entry routes" in (d.reason or "")
    assert "7 row change(s)" in (d.reason or "")
    assert "routes shop._orders_gho too" in (d.setting or "")
    assert t.stop_ts == 19  # rows stop just before the rename; nothing after it is applied
    text = render_text(build_plan(project, state))
    assert "BLOCKED" in text and "shop._orders_gho" in text


def test_routing_the_ghost_table_turns_it_into_a_move_between_targets(tmp_path: Path) -> None:
    tables = ONLY_ORDERS + '  - upstream: shop._orders_gho\n    source: canal\n    name: "gho"\n'
    project = _project(tmp_path, tables)
    state = _state(project, [*GHO, *_swap("_orders_gho", 20)], {"orders": 5, "_orders_gho": 7})
    plan = build_plan(project, state)
    (d,) = [d for d in plan.target_plan("canal_orders").ddl if d.commit_ts == 20]
    assert d.status == "ready" and d.rename_from == "gho"
    assert any("copy the rows of target gho" in p.describe for p in d.parts)


def test_a_new_empty_table_renamed_in_is_followed(tmp_path: Path) -> None:
    # CREATE TABLE new LIKE orders; RENAME orders TO old, new TO orders: the rotation of a
    # log table. The new table never had a row, so an empty target is the truth.
    project = _project(tmp_path)
    events = [
        DdlEvent("shop", "orders_new", 10, "CREATE TABLE shop.orders_new LIKE shop.orders"),
        *_swap("orders_new", 20),
    ]
    t = build_plan(project, _state(project, events, {"orders": 5})).target_plan("canal_orders")
    (d,) = t.ddl
    assert d.status == "ready"
    assert [p.describe for p in d.parts][0].startswith("create target for renamed")


def test_a_table_from_before_the_capture_renamed_in_blocks(tmp_path: Path) -> None:
    # `customers` is only a seed here: it existed before the captured history, with rows
    # this source never saw, even though none of its changes were staged.
    project = _project(tmp_path)
    t = build_plan(project, _state(project, _swap("customers", 20), {"orders": 5}))
    (d,) = t.target_plan("canal_orders").ddl
    assert d.status == "blocked"
    assert "existed before the captured history" in (d.reason or "")
    assert "initial_load" in (d.setting or "")


def test_skip_on_the_entry_keeps_the_target_as_it_is(tmp_path: Path) -> None:
    project = _project(tmp_path, ONLY_ORDERS + "    ddl:\n      rename_table: skip\n")
    state = _state(project, [*GHO, *_swap("_orders_gho", 20)], {"orders": 5, "_orders_gho": 7})
    (d,) = [d for d in build_plan(project, state).target_plan("canal_orders").ddl]
    assert d.status == "ready"
    assert all(s.decision.action == "skip" for s in d.steps)
