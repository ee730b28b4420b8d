"""A table entry's `properties` and `comment` (`core.table_properties`, `plan.properties`):
which `delta.*` keys an entry may set (managed ones refused naming their setting, safe ones
allowed, reader-losing ones only with `accept_reader_loss`, which keeps the target to Spark's
writers), and a change of either for an existing target as a planned step: SET, UNSET of the
keys the entry set before (never one set by hand), COMMENT ON TABLE; nothing once done.
Pure: no Spark."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ticdc_sync.core import table_properties as tp
from ticdc_sync.core.errors import ProjectError
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import WRITE_MERGE, Create, Rows, TableProperties

from .test_plan_catalog import ORDERS, _project, _state

RECORD = tp.ENTRY_PROPERTIES


@pytest.mark.parametrize(
    "key, kind",
    [
        ("team", tp.Kind.PLAIN),
        ("ticdc_sync.x", tp.Kind.OWN),
        ("owner", tp.Kind.RESERVED),
        ("delta.enableDeletionVectors", tp.Kind.MANAGED),
        ("delta.columnMapping.mode", tp.Kind.MANAGED),
        ("delta.appendOnly", tp.Kind.MANAGED),
        ("delta.minReaderVersion", tp.Kind.MANAGED),
        ("delta.deletedFileRetentionDuration", tp.Kind.MANAGED),
        ("delta.dataSkippingNumIndexedCols", tp.Kind.SAFE),
        ("DELTA.CHECKPOINTINTERVAL", tp.Kind.SAFE),
        ("delta.logRetentionDuration", tp.Kind.SAFE),
        ("delta.feature.v2Checkpoint", tp.Kind.READER_LOSS),
        ("delta.enableRowTracking", tp.Kind.READER_LOSS),
        ("delta.targetFileSize", tp.Kind.READER_LOSS),  # not a key of Delta 4.x: unknown
    ],
)
def test_each_delta_key_has_its_kind(key, kind) -> None:
    assert tp.kind(key) is kind


def test_every_classified_key_says_why() -> None:
    assert all(why for _, why in tp.MANAGED.values()) and all(tp.SAFE.values())
    assert all(tp.READER_LOSS.values())
    assert not set(tp.MANAGED) & set(tp.SAFE)
    assert all(k == k.lower() for k in [*tp.MANAGED, *tp.SAFE, *tp.READER_LOSS])


def test_refusals_name_the_setting_and_the_fix() -> None:
    what, fix = tp.refusal("delta.enableTypeWidening", accepts_loss=True) or ("", "")
    assert "managed by ticdc-sync's `table_features`" in what and "`table_features`" in fix
    what, fix = tp.refusal("delta.deletedFileRetentionDuration", accepts_loss=False) or ("", "")
    assert "`maintenance.retain`" in what
    what, fix = tp.refusal("delta.enableRowTracking", accepts_loss=False) or ("", "")
    assert "may take readers away" in what and "accept_reader_loss: true" in fix
    assert tp.refusal("delta.enableRowTracking", accepts_loss=True) is None
    assert tp.refusal("delta.checkpointInterval", accepts_loss=False) is None
    assert tp.refusal("team", accepts_loss=False) is None


def _props(lines: str) -> str:
    return ORDERS + "    properties:\n" + "".join(f"      {x}\n" for x in lines.split(";"))


def test_a_refused_key_is_a_validate_error_naming_its_line(tmp_path) -> None:
    with pytest.raises(ProjectError) as e:
        _project(tmp_path, _props("team: data;delta.enableDeletionVectors: true"))
    said = str(e.value)
    assert (
        "tables/shop.yml:9: tables[0].properties.delta.enableDeletionVectors: table property "
        "'delta.enableDeletionVectors' is managed by ticdc-sync's `table_features`"
    ) in said
    with pytest.raises(ProjectError, match=r"tables/shop.yml:8: .*accept_reader_loss: true"):
        _project(tmp_path / "2", _props("delta.enableChangeDataFeed: true"))


def _plan(tmp_path, extra: str, exists: bool, **target):
    project = _project(tmp_path, ORDERS + extra)
    state = _state(project)
    if exists:
        state.targets["canal_orders"] = replace(state.targets["canal_orders"], **target)
    else:
        state.targets.pop("canal_orders")
    return build_plan(project, state)


def test_created_with_the_entry_properties_and_their_record(tmp_path) -> None:
    plan = _plan(
        tmp_path,
        "    properties:\n      team: data\n      delta.checkpointInterval: 20\n",
        exists=False,
    )
    t = plan.target_plan("canal_orders")
    create = next(s for s in t.steps if isinstance(s, Create))
    props = dict(create.properties)
    assert props["team"] == "data" and props["delta.checkpointInterval"] == "20"
    assert json.loads(props[RECORD]) == ["delta.checkpointInterval", "team"]
    assert t.reprops is None


def test_an_accepted_reader_loss_keeps_the_target_to_spark_writers(tmp_path) -> None:
    plan = _plan(
        tmp_path,
        "    accept_reader_loss: true\n    rewrite_below: 1GiB\n"
        "    properties:\n      delta.enableRowTracking: true\n",
        exists=False,
    )
    t = plan.target_plan("canal_orders")
    rows = [s for s in t.steps if isinstance(s, Rows)]
    assert rows and all(s.write == WRITE_MERGE for s in rows)
    why = "property delta.enableRowTracking (accept_reader_loss): only Delta's own writer keeps it"
    assert rows[0].write_why == why
    assert why in render_text(plan)
    assert f"note: {why}: its rows land by the MERGE only" in render_text(plan)
    # Without it the same small target takes the round.
    plan = _plan(tmp_path / "2", "    rewrite_below: 1GiB\n", exists=False)
    rows = [s for s in plan.target_plan("canal_orders").steps if isinstance(s, Rows)]
    assert rows[0].write != WRITE_MERGE


def test_a_changed_entry_is_a_planned_step_and_nothing_once_done(tmp_path) -> None:
    had = {"team": "data", "old": "1", "by_hand": "x", RECORD: json.dumps(["old", "team"])}
    plan = _plan(
        tmp_path,
        "    comment: Orders, mirrored\n    properties:\n      team: sales\n      tier: 2\n",
        exists=True,
        properties=tuple(sorted(had.items())),
        description="Orders",
    )
    t = plan.target_plan("canal_orders")
    step = t.reprops
    assert isinstance(step, TableProperties) and step in t.steps
    assert t.steps.index(step) < next(i for i, s in enumerate(t.steps) if isinstance(s, Rows))
    assert step.unset == ("old",)  # never `by_hand`, which the entry never set
    assert dict(step.set) == {"team": "sales", "tier": "2", RECORD: '["team", "tier"]'}
    assert step.comment == "Orders, mirrored"
    assert [s.split(" (", 1)[0] for s in step.sql] == [
        f"ALTER TABLE {_ref(t)} UNSET TBLPROPERTIES IF EXISTS",
        f"ALTER TABLE {_ref(t)} SET TBLPROPERTIES",
        f"COMMENT ON TABLE {_ref(t)} IS 'Orders, mirrored'",
    ]
    assert plan.has_pending
    text = render_text(plan)
    assert "    properties: set team=sales, tier=2; unset old; comment 'Orders, mirrored'" in text
    assert "ALTER TABLE delta.`<warehouse>/tables/canal_orders` UNSET TBLPROPERTIES" in text
    body = json.loads(render_json(plan))
    td = next(x for x in body["targets"] if x["name"] == "canal_orders")
    assert td["status"] == "change" and td["properties_change"]["unset"] == ["old"]
    assert {"step": "properties", "set": dict(step.set), "unset": ["old"]}.items() <= (
        next(s for s in td["steps"] if s["step"] == "properties").items()
    )

    # As the run leaves it (Delta may spell its own keys otherwise): nothing pending.
    now = {"by_hand": "x", "team": "sales", "tier": "2", RECORD: '["team", "tier"]'}
    plan = _plan(
        tmp_path / "2",
        "    comment: Orders, mirrored\n    properties:\n      team: sales\n      tier: 2\n",
        exists=True,
        properties=tuple(sorted(now.items())),
        description="Orders, mirrored",
    )
    assert plan.target_plan("canal_orders").reprops is None


def test_properties_all_removed_unset_the_record_too(tmp_path) -> None:
    had = {"team": "data", RECORD: '["team"]', "delta.checkpointInterval": "10"}
    plan = _plan(tmp_path, "", exists=True, properties=tuple(sorted(had.items())))
    step = plan.target_plan("canal_orders").reprops
    assert step is not None and step.unset == ("team", RECORD) and step.set == ()
    assert step.comment is None  # no `comment`: the description stays as it is
    assert "properties: unset team" in render_text(plan)


def test_a_target_without_a_record_gets_one(tmp_path) -> None:
    plan = _plan(
        tmp_path, "    properties:\n      team: data\n", exists=True, properties=(("team", "data"),)
    )
    step = plan.target_plan("canal_orders").reprops
    assert step is not None and step.set == ((RECORD, '["team"]'),) and not step.unset
    assert "properties: record the keys the entry sets" in render_text(plan)


def test_a_safe_delta_key_compares_without_case(tmp_path) -> None:
    have = (("delta.checkpointInterval", "20"), (RECORD, '["delta.checkpointinterval"]'))
    plan = _plan(
        tmp_path,
        "    properties:\n      delta.checkpointinterval: 20\n",
        exists=True,
        properties=have,
    )
    assert plan.target_plan("canal_orders").reprops is None


def _ref(t) -> str:
    from ticdc_sync.core.sqlgen import table_ref

    return table_ref(t.location)
