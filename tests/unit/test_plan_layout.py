"""A target's layout (`plan.layout`): `partition_by` / `cluster_by` on a table entry, decided
once by the plan and shown by it: the columns checked against the upstream table (an error
naming the entry's file:line and the column), the create step and statement with the
clause, the write path every row segment takes (the MERGE), and the features a clustered
target is created with. Pure: no Spark."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ticdc_sync.core.errors import ProjectError
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import WRITE_MERGE, Create, Rows

from .test_plan_catalog import ORDERS, _project, _state


def _plan(tmp_path, extra: str, exists: bool = False, **target):
    from dataclasses import replace

    project = _project(tmp_path, ORDERS + extra)
    state = _state(project)
    if exists:
        t = replace(state.targets["canal_orders"], **target)
        state.targets["canal_orders"] = t
    else:
        state.targets.pop("canal_orders")  # not created yet: created from its seed schema
    return build_plan(project, state)


def test_partition_by_creates_a_partitioned_target_and_shows_it(tmp_path) -> None:
    plan = _plan(tmp_path, "    partition_by: [STATUS]\n    rewrite_below: 1GiB\n")
    t = plan.target_plan("canal_orders")
    assert t.partition_by == ("status",) and t.cluster_by == ()  # spelled as the column is
    create = next(s for s in t.steps if isinstance(s, Create))
    assert create.partition_by == ("status",)
    rows = [s for s in t.steps if isinstance(s, Rows)]
    assert rows and all(s.write == WRITE_MERGE for s in rows)
    assert "partitioned by (status): Delta's own writer keeps the layout" in rows[0].write_why
    text = render_text(plan)
    assert "    layout: partitioned by (status)" in text
    assert "PARTITIONED BY (`status`)" in text and "1. create partitioned by (status)" in text
    body = json.loads(render_json(plan))
    td = next(x for x in body["targets"] if x["name"] == "canal_orders")
    assert td["partition_by"] == ["status"] and "cluster_by" not in td
    assert td["steps"][0]["partition_by"] == ["status"]


def test_cluster_by_takes_the_clustering_features_and_the_merge(tmp_path) -> None:
    plan = _plan(tmp_path, "    cluster_by: [customer_id, placed_at]\n")
    t = plan.target_plan("canal_orders")
    assert t.cluster_by == ("customer_id", "placed_at")
    assert {"clustering", "domainMetadata"} <= set(t.features)
    assert all(s.write == WRITE_MERGE for s in t.steps if isinstance(s, Rows))
    text = render_text(plan)
    assert "layout: clustered by (customer_id, placed_at)" in text
    assert "CLUSTER BY (`customer_id`, `placed_at`)" in text


def test_a_column_not_upstream_is_an_error_naming_file_line_and_column(tmp_path) -> None:
    # Known from a seed: at validate.
    with pytest.raises(ProjectError) as e:
        _project(tmp_path, ORDERS + "    partition_by: [region]\n")
    assert "tables/shop.yml:7: tables[0].partition_by: partition_by column 'region' is not " in (
        str(e.value)
    )
    # Known from the stream only (a CREATE TABLE, inferred columns): the plan stops the
    # target, saying the same.
    from ticdc_sync.core.model import Origin, TableEntry
    from ticdc_sync.core.upstream import Column, TableSchema
    from ticdc_sync.plan import layout

    entry = TableEntry(
        upstream="shop.t",
        name="t",
        origin=Origin("tables/t.yml", 2),
        partition_by=("region",),
        layout_line=4,
    )
    schema = TableSchema("shop", "t", (Column("id", "int"), Column("v", "varchar")), ("id",))
    assert layout.refusal(entry, schema) == (
        "tables/t.yml:4: partition_by column 'region' is not a column of shop.t (its columns: "
        "id, v); name upstream columns of the table"
    )
    assert layout.refusal(replace(entry, partition_by=("V",)), schema) is None


def test_an_existing_target_has_the_layout_its_table_has(tmp_path) -> None:
    plan = _plan(tmp_path, "    partition_by: [status]\n", exists=True, partition_by=("status",))
    t = plan.target_plan("canal_orders")
    assert t.partition_by == ("status",) and t.relayout is None
    assert all(s.write == WRITE_MERGE for s in t.steps if isinstance(s, Rows))
    # The key taken off the entry: the table is rebuilt without partitions.
    t = _plan(tmp_path / "2", "", exists=True, partition_by=("status",)).target_plan("canal_orders")
    assert t.relayout is not None and t.relayout.rebuild and t.relayout.partition_by == ()


def test_both_keys_are_refused_at_validate(tmp_path) -> None:
    with pytest.raises(ProjectError, match="partition_by and cluster_by together"):
        _project(tmp_path, ORDERS + "    partition_by: [status]\n    cluster_by: [id]\n")


def _with_ddl(tmp_path, extra: str, sql: str, **target):
    from dataclasses import replace

    from ticdc_sync.core.window import DdlEvent

    project = _project(tmp_path, ORDERS + extra)
    state = _state(project, events=[DdlEvent("shop", "orders", 20, sql)])
    state.targets["canal_orders"] = replace(state.targets["canal_orders"], **target)
    return build_plan(project, state)


@pytest.mark.parametrize(
    ("sql", "layout", "said"),
    [
        ("ALTER TABLE shop.orders DROP COLUMN status", {"partition_by": ("status",)}, "drop"),
        (
            "ALTER TABLE shop.orders RENAME COLUMN status TO state",
            {"cluster_by": ("status",)},
            "rename",
        ),
    ],
)
def test_a_ddl_taking_a_layout_column_away_blocks_naming_the_setting(
    tmp_path, sql, layout, said
) -> None:
    key = next(iter(layout))
    plan = _with_ddl(tmp_path, f"    {key}: [status]\n", sql, **layout)
    t = plan.target_plan("canal_orders")
    what = "partitioned" if key == "partition_by" else "clustered"
    assert t.blocked is not None, t.ddl
    assert f"the target is {what} by status ({key} at tables/shop.yml:7)" in t.blocked
    assert f"which Delta cannot {said} in place" in t.blocked
    kind = "drop_column" if said == "drop" else "rename_column"
    assert f"`{kind}: skip` on the table entry" in render_text(plan)


def test_a_ddl_of_another_column_goes_on(tmp_path) -> None:
    plan = _with_ddl(
        tmp_path,
        "    partition_by: [status]\n",
        "ALTER TABLE shop.orders DROP COLUMN note",
        partition_by=("status",),
    )
    assert plan.target_plan("canal_orders").blocked is None


def test_a_new_clustering_is_in_place_a_new_partitioning_a_rebuild(tmp_path) -> None:
    plan = _plan(tmp_path, "    cluster_by: [status]\n", exists=True, cluster_by=("customer_id",))
    t = plan.target_plan("canal_orders")
    assert t.relayout is not None and not t.relayout.rebuild
    assert t.cluster_by == ("status",) and plan.has_pending
    text = render_text(plan)
    assert "layout: clustered by (status)  (was clustered by (customer_id); " in text
    assert "layout: clustered by (status) (in place: ALTER TABLE ... CLUSTER BY)" in text

    plan = _plan(tmp_path / "2", "    partition_by: [status]\n", exists=True)
    t = plan.target_plan("canal_orders")
    assert t.relayout is not None and t.relayout.rebuild and t.relayout.was == "none"
    assert "layout: partitioned by (status) (rebuild: its rows rewritten in one commit)" in (
        render_text(plan)
    )
    # Once the table has it, nothing is left to do.
    plan = _plan(
        tmp_path / "3", "    partition_by: [status]\n", exists=True, partition_by=("status",)
    )
    assert plan.target_plan("canal_orders").relayout is None


def test_a_column_not_in_the_seed_schema_is_a_validate_error(tmp_path) -> None:
    with pytest.raises(ProjectError, match=r"tables/shop.yml:7: tables\[0\].cluster_by: "):
        _project(tmp_path, ORDERS + "    cluster_by: [region]\n")


def test_a_history_target_keeps_a_dropped_layout_column(tmp_path) -> None:
    from ticdc_sync.core.model import Mode
    from ticdc_sync.plan.modes import extra_columns

    project = _project(tmp_path, ORDERS)
    cols = tuple((c.name, "string") for c in project.seed_schemas[("shop", "orders")].columns)
    plan = _with_ddl(
        tmp_path / "h",
        "    partition_by: [status]\n    mode: history\n",
        "ALTER TABLE shop.orders DROP COLUMN status",
        partition_by=("status",),
        columns=(*cols, *extra_columns(Mode.HISTORY)),
    )
    t = plan.target_plan("canal_orders")
    assert t.refused is None and t.blocked is None, t.blocked
