"""Which way each row segment lands (`plan.write_path`): a small `mirror` target's segments
take the round (a small target of another mode, or with a BINARY column or a FLOAT/DOUBLE
key, the rewrite), a target at or above `rewrite_below`, or with a table feature the rewrite's
writer does not keep, is merged; a DDL that adds such a feature sends the segments after it
to the MERGE; `rewrite_below: 0` merges everything. The plan shows the path and why."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ticdc_sync.core.model import (
    Defaults,
    Mode,
    Output,
    Project,
    Protocol,
    Source,
    TableEntry,
)
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.ddl import parse_schema_sql
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import WRITE_MERGE, WRITE_REWRITE, WRITE_ROUND, Ddl, Rows, TargetPlan
from ticdc_sync.plan.write_path import ROUND_MAX_CHANGES, segment_changes, with_writes
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

SEED = parse_schema_sql("CREATE TABLE db.t (id INT PRIMARY KEY, v INT)", None, "t.sql")[0]


def _project(entry: TableEntry | None = None, defaults: Defaults | None = None) -> Project:
    return Project(
        name="p",
        root=Path("/nonexistent"),
        output=Output("dev"),
        defaults=defaults or Defaults(),
        sources=(Source("src", Protocol.CANAL_JSON, ("topic",)),),
        tables=(entry or TableEntry("db.t", "t"),),
        seed_schemas={("db", "t"): SEED},
    )


def _target(
    project: Project,
    *,
    data_bytes: int = 1000,
    features=("appendOnly", "invariants"),
    events=(),
    rows: int = 3,
    spans: dict | None = None,
) -> TargetPlan:
    plan = build_plan(project, _state(data_bytes, features, events, rows, spans))
    t = plan.target_plan("t")
    assert t is not None
    return t


def _state(
    data_bytes: int = 1000,
    features=("appendOnly", "invariants"),
    events=(),
    rows: int = 3,
    spans: dict | None = None,
) -> WarehouseState:
    tally = SourceTally(
        partitions={("topic", 0): PartitionTally("topic", 0, 1, watermark=40)},
        tables={("db", "t"): (rows, len(events))},
        spans={} if spans is None else spans,
    )
    return WarehouseState(
        sources={"src": SourceState("src", tally=tally, ddl_events=tuple(events))},
        targets={
            "t": TargetState(
                "t",
                True,
                Marker(5),
                columns=(("id", "int"), ("v", "int")),
                writer_features=tuple(features),
                data_bytes=data_bytes,
            )
        },
    )


def _rows(t: TargetPlan) -> list[Rows]:
    return [s for s in t.steps if isinstance(s, Rows)]


ROUND_WHY = (
    "target 2 KiB < rewrite_below 16 MiB, built-in default; with the other targets due in its round"
)


def test_a_small_target_takes_the_round_and_the_plan_says_why():
    project = _project()
    t = _target(project, data_bytes=2048)
    (seg,) = _rows(t)
    assert seg.write == WRITE_ROUND
    assert seg.write_why == ROUND_WHY
    text = render_text(build_plan(project, _state(2048)))
    assert f"rows 5 < commit_ts <= 40: round on id (primary key; {ROUND_WHY})" in text


def _seeded(sql: str) -> Project:
    seed = parse_schema_sql(sql, None, "t.sql")[0]
    return replace(_project(), seed_schemas={("db", "t"): seed})


def test_a_small_target_the_round_cannot_carry_is_rewritten_and_the_plan_says_why():
    small = _target(_project(), data_bytes=2048)
    soft = with_writes(replace(small, mode=Mode.SOFT_DELETE), small.steps)
    assert [(s.write, s.write_why.rsplit("; ", 1)[-1]) for s in soft if isinstance(s, Rows)] == [
        (WRITE_REWRITE, "mode soft_delete keeps the rewrite's own rules")
    ]
    binary = _target(_seeded("CREATE TABLE db.t (id INT PRIMARY KEY, v VARBINARY(8))"))
    assert [(s.write, s.write_why.rsplit("; ", 1)[-1]) for s in _rows(binary)] == [
        (WRITE_REWRITE, "column v is BINARY")
    ]
    floats = _target(_seeded("CREATE TABLE db.t (id DOUBLE PRIMARY KEY, v INT)"))
    assert [(s.write, s.write_why.rsplit("; ", 1)[-1]) for s in _rows(floats)] == [
        (WRITE_REWRITE, "key id is DOUBLE")
    ]
    # A FLOAT that is not a key, and every other type, takes the round.
    others = _target(
        _seeded(
            "CREATE TABLE db.t (id BIGINT PRIMARY KEY, f FLOAT, d DOUBLE, x DECIMAL(30,4), "
            "s VARCHAR(9), b TINYINT(1), dt DATE, ts TIMESTAMP(6), n DATETIME(3), y YEAR, "
            "e ENUM('a','b'), j JSON, bit1 BIT(1), u BIGINT UNSIGNED, sm SMALLINT, ti TINYINT)"
        )
    )
    assert [s.write for s in _rows(others)] == [WRITE_ROUND]


def test_a_large_target_or_one_with_deletion_vectors_is_merged():
    project = _project()
    big = _target(project, data_bytes=16 << 20)
    assert [s.write for s in _rows(big)] == [WRITE_MERGE]
    assert _rows(big)[0].write_why == "target 16 MiB >= rewrite_below 16 MiB, built-in default"
    # Deletion vectors kept on by the setting (else the run drops them first, and the
    # segment after that is rewritten).
    entry = TableEntry("db.t", "t", table_features={"deletion_vectors": True})
    dv = _target(_project(entry), features=("appendOnly", "deletionVectors", "invariants"))
    assert [s.write for s in _rows(dv)] == [WRITE_MERGE]
    assert "deletionVectors" in _rows(dv)[0].write_why


def test_column_mapping_and_timestamp_ntz_keep_the_rewrite():
    t = _target(_project(), features=("appendOnly", "columnMapping", "invariants", "timestampNtz"))
    assert [s.write for s in _rows(t)] == [WRITE_ROUND]


def test_rewrite_below_is_read_from_the_entry_then_the_defaults():
    entry = TableEntry("db.t", "t", rewrite_below=0)
    t = _target(_project(entry))
    assert [s.write for s in _rows(t)] == [WRITE_MERGE]
    assert _rows(t)[0].write_why.startswith("rewrite_below 0 B, ")
    t = _target(_project(defaults=Defaults(rewrite_below=1 << 30)), data_bytes=100 << 20)
    assert [s.write for s in _rows(t)] == [WRITE_ROUND]
    assert "ticdc_sync.yml defaults" in _rows(t)[0].write_why


def test_a_ddl_that_adds_a_feature_sends_later_segments_to_the_merge():
    t = _target(
        _project(), events=(DdlEvent("db", "t", 20, "ALTER TABLE t ADD COLUMN w INT", offset=20),)
    )
    segs = _rows(t)
    assert len(segs) == 1  # the ADD COLUMN is fused: one segment
    # The same target with a DDL that adds deletion vectors (not a DDL ticdc-sync plans
    # today): decided on the features in force at each segment.
    rows = [Rows(5, 19), Ddl(_fake_ddl(("deletionVectors",))), Rows(20, 40)]
    out = with_writes(t, rows)
    assert [s.write for s in out if isinstance(s, Rows)] == [WRITE_ROUND, WRITE_MERGE]


def _fake_ddl(added: tuple[str, ...]):
    from ticdc_sync.plan.model import TargetDdl

    t = _target(
        _project(), events=(DdlEvent("db", "t", 20, "ALTER TABLE t ADD COLUMN w INT", offset=20),)
    )
    d = t.ddl[0]
    assert isinstance(d, TargetDdl)
    return replace(d, features_added=added)


def test_the_json_plan_carries_each_segment_s_write():
    project = _project()
    state = WarehouseState(
        sources={
            "src": SourceState(
                "src",
                tally=SourceTally(
                    partitions={("topic", 0): PartitionTally("topic", 0, 1, watermark=40)},
                    tables={("db", "t"): (3, 0)},
                ),
            )
        },
        targets={"t": TargetState("t", True, Marker(5), columns=(("id", "int"), ("v", "int")))},
    )
    js = render_json(build_plan(project, state))
    assert '"write": "round"' in js
    assert (
        '"write_why": "target 0 B < rewrite_below 16 MiB, built-in default; with the other '
        'targets due in its round"' in js
    )


def test_a_segment_of_many_changes_is_rewritten_and_the_plan_says_about_how_many():
    # The target stands at 5 and its table's changes were all staged above it: the segment
    # holds every one of them (a first catch-up, or a target far behind).
    many = ROUND_MAX_CHANGES + 1
    t = _target(_project(), data_bytes=2048, rows=many, spans={("db", "t"): (6, 40)})
    (seg,) = _rows(t)
    assert (seg.write, seg.write_why) == (
        WRITE_REWRITE,
        "target 2 KiB < rewrite_below 16 MiB, built-in default; about 10001 row changes "
        "staged in it > 10000 a round merges in one task",
    )
    text = render_text(
        build_plan(_project(), _state(2048, rows=many, spans={("db", "t"): (6, 40)}))
    )
    assert "rows 5 < commit_ts <= 40: rewrite on id (primary key; " in text
    # At the bound, the round.
    t = _target(_project(), rows=ROUND_MAX_CHANGES, spans={("db", "t"): (6, 40)})
    assert [s.write for s in _rows(t)] == [WRITE_ROUND]


def test_only_the_share_of_a_table_s_changes_inside_the_segment_counts():
    # 1,000,000 changes staged over commit_ts 1..1000; the target stands at 5 and rows
    # stop at 40, so the segment holds about 35/1000 of them: 35,000 > the bound.
    t = _target(_project(), rows=1_000_000, spans={("db", "t"): (1, 1000)})
    (seg,) = _rows(t)
    assert seg.write == WRITE_REWRITE
    assert segment_changes(t, seg) == 35_000
    # 100,000 over the same range: 3,500, the round.
    t = _target(_project(), rows=100_000, spans={("db", "t"): (1, 1000)})
    (seg,) = _rows(t)
    assert (seg.write, segment_changes(t, seg)) == (WRITE_ROUND, 3_500)
    # All staged at or below where the target stands: nothing of them is in the segment.
    t = _target(_project(), rows=1_000_000, spans={("db", "t"): (1, 5)})
    assert [(s.write, segment_changes(t, s)) for s in _rows(t)] == [(WRITE_ROUND, 0)]
    # A tally without the range (an earlier version's) counts every change.
    t = _target(_project(), rows=ROUND_MAX_CHANGES + 1)
    assert [(s.write, segment_changes(t, s)) for s in _rows(t)] == [
        (WRITE_REWRITE, ROUND_MAX_CHANGES + 1)
    ]
