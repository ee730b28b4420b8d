"""Each target's catalog entry, decided by the plan from its steps (`plan.catalog`): register
a target that exists or is created, drop (or keep) the entry of one whose upstream table is
dropped or renamed away, its statements, and pending while the `catalog` state table has not
recorded it. Pure: no Spark, no catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.plan import build_plan, render_text
from ticdc_sync.plan.catalog import statements
from ticdc_sync.plan.model import Catalog, Stop
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.state import (
    REGISTERED,
    UNREGISTERED,
    CatalogRecord,
    SourceState,
    TargetState,
    WarehouseState,
)

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
ORDERS = (
    'tables:\n  - upstream: shop.orders\n    source: canal\n    name: "canal_orders"\n'
    '    schema: "lake_{db}"\n    table: "{table}"\n'
)


def _project(tmp_path: Path, tables: str = ORDERS, target: str = "catalog"):
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("target", "warehouse"))
    (dest / "tables" / "shop.yml").write_text(tables)
    return load_project(dest, target)


def _state(project, events=(), record=None, properties=()) -> WarehouseState:
    tally = SourceTally(
        partitions={("shop_canal", 0): PartitionTally("shop_canal", 0, 10, watermark=25)},
        tables={("shop", "orders"): (5, 0)},
    )
    cols = tuple((c.name, "string") for c in project.seed_schemas[("shop", "orders")].columns)
    loc = str(project.root / "warehouse" / "tables" / "canal_orders")
    target = TargetState(
        "canal_orders",
        True,
        Marker(5),
        columns=cols,
        location=loc,
        catalog=record,
        properties=tuple(properties),
    )
    return WarehouseState(
        sources={"canal": SourceState("canal", tally=tally, ddl_events=tuple(events))},
        targets={"canal_orders": target},
    )


def test_an_unrecorded_target_is_registered_and_pending(tmp_path: Path) -> None:
    project = _project(tmp_path)
    plan = build_plan(project, _state(project))
    t = plan.target_plan("canal_orders")
    c = t.catalog
    assert (c.name, c.short_name, c.action) == (
        "spark_catalog.lake_shop.orders",
        "lake_shop.orders",
        "register",
    )
    assert t.catalog_pending and plan.has_pending
    assert isinstance(t.steps[-1], Catalog) and t.steps[-1].at == 25
    create_schema, create = statements(c)
    assert create_schema == "CREATE SCHEMA IF NOT EXISTS `spark_catalog`.`lake_shop`"
    assert create.startswith("CREATE TABLE `spark_catalog`.`lake_shop`.`orders` USING DELTA ")
    assert f"LOCATION '{t.location}'" in create and "upstream shop.orders" in create
    text = render_text(plan)
    assert "catalog: spark_catalog.lake_shop.orders  (register; pending)" in text
    assert "LOCATION '<warehouse>/tables/canal_orders'" in text
    assert "  catalog: spark_catalog  (Hive metastore embedded; " in text


def test_a_recorded_registration_is_not_pending(tmp_path: Path) -> None:
    project = _project(tmp_path)
    loc = str(project.root / "warehouse" / "tables" / "canal_orders")
    rec = CatalogRecord("spark_catalog.lake_shop.orders", loc, REGISTERED)
    t = build_plan(project, _state(project, record=rec)).target_plan("canal_orders")
    assert t.catalog.action == "register" and not t.catalog_pending
    # Another location recorded (the target moved): pending again.
    moved = CatalogRecord("spark_catalog.lake_shop.orders", "/elsewhere", REGISTERED)
    assert (
        build_plan(project, _state(project, record=moved))
        .target_plan("canal_orders")
        .catalog_pending
    )


def test_drop_table_drops_the_entry_or_keeps_it(tmp_path: Path) -> None:
    drop = [DdlEvent("shop", "orders", 20, "DROP TABLE shop.orders")]
    project = _project(tmp_path)
    t = build_plan(project, _state(project, drop)).target_plan("canal_orders")
    assert t.catalog.action == "drop"
    assert statements(t.catalog) == ("DROP TABLE `spark_catalog`.`lake_shop`.`orders`",)
    kept = _project(tmp_path / "k", ORDERS + "    catalog_on_drop: keep\n")
    t = build_plan(kept, _state(kept, drop)).target_plan("canal_orders")
    assert t.catalog.action == "keep" and statements(t.catalog) == ()


def test_a_target_dropped_earlier_stays_unregistered(tmp_path: Path) -> None:
    project = _project(tmp_path)
    loc = str(project.root / "warehouse" / "tables" / "canal_orders")
    rec = CatalogRecord("spark_catalog.lake_shop.orders", loc, UNREGISTERED)
    state = _state(project, record=rec, properties=[("ticdc_sync.dropped", "true")])
    t = build_plan(project, state).target_plan("canal_orders")
    assert t.catalog.action == "drop" and not t.catalog_pending


def test_the_catalog_step_comes_before_a_stop(tmp_path: Path) -> None:
    narrow = [DdlEvent("shop", "orders", 20, "ALTER TABLE shop.orders MODIFY COLUMN id TINYINT")]
    project = _project(tmp_path)
    t = build_plan(project, _state(project, narrow)).target_plan("canal_orders")
    assert isinstance(t.steps[-1], Stop) and isinstance(t.steps[-2], Catalog)
    assert t.catalog.action == "register"


def test_without_a_catalog_targets_stay_paths(tmp_path: Path) -> None:
    project = _project(tmp_path, target="dev")
    t = build_plan(project, _state(project)).target_plan("canal_orders")
    assert t.catalog is None and not t.catalog_pending
    assert not any(isinstance(s, Catalog) for s in t.steps)


def test_properties_and_comment_at_creation(tmp_path: Path) -> None:
    from ticdc_sync.plan.model import Create

    tables = ORDERS + '    comment: "Orders, mirrored"\n    properties: {team: data, tier: 1}\n'
    project = _project(tmp_path, tables)
    state = _state(project)
    state.targets.pop("canal_orders")  # not created yet: created from its seed schema
    t = build_plan(project, state).target_plan("canal_orders")
    create = next(s for s in t.steps if isinstance(s, Create))
    props = dict(create.properties)
    assert (props["team"], props["tier"]) == ("data", "1")
    assert create.schema.comment == "Orders, mirrored"


def test_a_managed_property_is_refused(tmp_path: Path) -> None:
    import pytest

    from ticdc_sync.core.errors import ProjectError

    tables = ORDERS + "    properties: {delta.enableDeletionVectors: true}\n"
    with pytest.raises(ProjectError, match="managed by ticdc-sync"):
        _project(tmp_path, tables)


def test_a_property_spark_reserves_is_refused(tmp_path: Path) -> None:
    import pytest

    from ticdc_sync.core.errors import ProjectError

    with pytest.raises(ProjectError, match="reserved by Spark"):
        _project(tmp_path, ORDERS + "    properties: {owner: data}\n")
