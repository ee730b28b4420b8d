"""What `plan` decides for partition DDL: TRUNCATE/DROP PARTITION delete by a predicate the
plan shows (marked deleted or closed in soft_delete and history targets), ADD/REORGANIZE/
COALESCE PARTITION and PARTITION BY pass without a stop, and an EXCHANGE PARTITION swaps rows
between the two tables' targets, or blocks both when it cannot: one side not routed, the
partition's rows not computable, the table's schema unknown. A target that merges several
tables blocks, and one table EXCHANGE-d into its own target changes nothing."""

from __future__ import annotations

from pathlib import Path

from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent
from ticdc_sync.plan import build_plan, render_text
from ticdc_sync.plan.model import COPY_SOURCE, OP_COPY_FROM
from ticdc_sync.project import load_project
from ticdc_sync.warehouse.state import SourceState, WarehouseState

PROFILES = """\
test:
  target: dev
  outputs:
    dev:
      spark: {master: "local[2]"}
      warehouse: warehouse
      transport: {type: files, captures: captures}
"""
ALL = '  - upstream: "shop.*"\n    name: "{table}"\n'
EVENTS = (
    "CREATE TABLE shop.events (id INT NOT NULL, d DATE NOT NULL, PRIMARY KEY (id, d)) "
    "PARTITION BY RANGE (TO_DAYS(d)) (PARTITION p0 VALUES LESS THAN (TO_DAYS('2024-02-01')), "
    "PARTITION p1 VALUES LESS THAN MAXVALUE)"
)
ARCHIVE = "CREATE TABLE shop.arch (id INT NOT NULL, d DATE NOT NULL, PRIMARY KEY (id, d))"
EXCHANGE = "ALTER TABLE `shop`.`events` EXCHANGE PARTITION `p0` WITH TABLE `shop`.`arch`"


def _project(tmp_path: Path, tables: str = ALL, defaults: str = ""):
    root = tmp_path / "p"
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text(f"name: test\nprofile: test\n{defaults}")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources" / "s.yml").write_text(
        "sources:\n  - name: src\n    protocol: canal-json\n    topics: [t]\n"
    )
    (root / "tables" / "t.yml").write_text("tables:\n" + tables)
    return load_project(root)


def _plan(project, *ddl: tuple[int, str, str]):
    events = tuple(DdlEvent("shop", t, ts, sql) for ts, t, sql in ddl)
    tables = {("shop", t): (0, sum(1 for _, x, _ in ddl if x == t)) for _, t, _ in ddl}
    tally = SourceTally(
        partitions={("t", 0): PartitionTally("t", 0, 10, watermark=100)}, tables=tables
    )
    state = WarehouseState(sources={"src": SourceState("src", tally=tally, ddl_events=events)})
    return build_plan(project, state)


def _ddl(plan, target: str, ts: int):
    t = plan.target_plan(target)
    assert t is not None, target
    return next(d for d in t.ddl if d.commit_ts == ts)


def test_truncate_partition_deletes_by_a_predicate_the_plan_shows(tmp_path: Path) -> None:
    plan = _plan(
        _project(tmp_path),
        (10, "events", EVENTS),
        (20, "events", "ALTER TABLE shop.events TRUNCATE PARTITION p1"),
        (
            30,
            "events",
            "ALTER TABLE shop.events REORGANIZE PARTITION p1 INTO ("
            "PARTITION p1 VALUES LESS THAN (800000), PARTITION p2 VALUES LESS THAN MAXVALUE)",
        ),
        (40, "events", "ALTER TABLE shop.events DROP PARTITION p0"),
    )
    d = _ddl(plan, "events", 20)
    assert d.status == "ready"
    (step,) = d.steps
    assert (step.decision.action, step.decision.classification) == ("apply", "destructive")
    (part,) = d.parts
    assert part.sql is not None and part.sql.startswith("DELETE FROM ")
    assert part.sql.endswith(
        " WHERE ((CAST(unix_date(CAST(`d` AS DATE)) AS BIGINT) + 719528) >= 739282)"
    )
    assert _ddl(plan, "events", 30).status == "ready"
    assert "719528) < 739282)" in (_ddl(plan, "events", 40).parts[0].sql or "")
    text = render_text(plan)
    assert "truncate partition p1: delete the rows where" in text
    assert "partitioning change (REORGANIZE PARTITION) keeps every row" in text


def test_soft_delete_and_history_targets_mark_the_partitions_rows(tmp_path: Path) -> None:
    for mode, start in (
        ("soft_delete", "UPDATE"),
        ("history", "UPDATE"),
    ):
        project = _project(tmp_path / mode, defaults=f"defaults:\n  mode: {mode}\n")
        plan = _plan(
            project,
            (10, "events", EVENTS),
            (20, "events", "ALTER TABLE shop.events TRUNCATE PARTITION p0"),
        )
        (part,) = _ddl(plan, "events", 20).parts
        sql = part.sql or ""
        assert sql.startswith(start) and sql.endswith("< 739282))"), sql
        assert ("`_is_deleted` = true" in sql) == (mode == "soft_delete")
        assert ("`_valid_to` = 20" in sql) == (mode == "history")


def test_layout_changes_pass_even_under_partition_fail(tmp_path: Path) -> None:
    project = _project(tmp_path, defaults="defaults:\n  ddl:\n    partition: fail\n")
    plan = _plan(
        project,
        (10, "events", EVENTS),
        (20, "events", "ALTER TABLE shop.events ADD PARTITION (PARTITION p9 VALUES LESS THAN (1))"),
        (30, "events", "ALTER TABLE shop.events PARTITION BY HASH (id) PARTITIONS 3"),
        (40, "events", "ALTER TABLE shop.events COALESCE PARTITION 1"),
        (50, "events", "ALTER TABLE shop.events REMOVE PARTITIONING"),
        (60, "events", "ALTER TABLE shop.events TRUNCATE PARTITION p0"),
    )
    t = plan.target_plan("events")
    assert [(d.commit_ts, d.status) for d in t.ddl] == [
        (10, "ready"),
        (20, "ready"),
        (30, "ready"),
        (40, "ready"),
        (50, "ready"),
        (60, "blocked"),
    ]
    # After REMOVE PARTITIONING the partition is unknown: blocked with why, as for `fail`.
    assert "not known here" in (t.ddl[-1].reason or "")


def test_exchange_between_routed_tables_swaps_their_rows(tmp_path: Path) -> None:
    plan = _plan(
        _project(tmp_path),
        (10, "events", EVENTS),
        (11, "arch", ARCHIVE),
        (20, "events", EXCHANGE),
    )
    e, a = _ddl(plan, "events", 20), _ddl(plan, "arch", 20)
    assert (e.status, e.rename_from) == ("ready", "arch")
    assert (a.status, a.rename_from) == ("ready", "events")
    out, into = e.parts
    assert out.sql is not None and out.sql.startswith("DELETE FROM") and "739282" in out.sql
    assert into.op == OP_COPY_FROM and into.source_target == "arch"
    assert into.sql is not None and COPY_SOURCE in into.sql and into.sql.startswith("MERGE INTO")
    assert "739282" not in into.sql  # every row of the other table comes in
    out, into = a.parts
    assert out.sql is not None and out.sql.startswith("DELETE FROM")
    assert "WHERE" not in out.sql  # every row of the other table leaves
    assert into.source_target == "events" and "739282" in (into.sql or "")
    assert "exchange partition p0 with shop.arch" in render_text(plan)


def test_exchange_with_a_table_no_entry_routes_blocks(tmp_path: Path) -> None:
    # The partitioned table routed, the other not: its rows would come from nowhere.
    only_events = '  - upstream: "shop.events"\n    name: events\n'
    plan = _plan(
        _project(tmp_path / "a", only_events),
        (10, "events", EVENTS),
        (11, "arch", ARCHIVE),
        (20, "events", EXCHANGE),
    )
    d = _ddl(plan, "events", 20)
    assert d.status == "blocked" and "no table entry routes shop.arch" in (d.reason or "")
    # The other way round (what used to go on silently): the archive's target blocks too.
    only_arch = '  - upstream: "shop.arch"\n    name: arch\n'
    plan = _plan(
        _project(tmp_path / "b", only_arch),
        (10, "events", EVENTS),
        (11, "arch", ARCHIVE),
        (20, "events", EXCHANGE),
    )
    d = _ddl(plan, "arch", 20)
    assert d.status == "blocked" and "no table entry routes shop.events" in (d.reason or "")
    assert plan.target_plan("arch").stop_ts == 19


def test_exchange_blocks_both_sides_when_the_partition_is_not_computable(tmp_path: Path) -> None:
    plan = _plan(
        _project(tmp_path),
        (
            10,
            "events",
            "CREATE TABLE shop.events (id INT, s VARCHAR(9), PRIMARY KEY (id, s)) "
            "PARTITION BY KEY (s) PARTITIONS 2",
        ),
        (11, "arch", "CREATE TABLE shop.arch (id INT, s VARCHAR(9), PRIMARY KEY (id, s))"),
        (20, "events", EXCHANGE),
    )
    for target in ("events", "arch"):
        d = _ddl(plan, target, 20)
        assert d.status == "blocked" and "collation" in (d.reason or ""), (target, d.reason)
    # The partitioned table's schema unknown: the DDL is not replayed, and both stop.
    plan = _plan(_project(tmp_path / "u"), (11, "arch", ARCHIVE), (20, "events", EXCHANGE))
    assert _ddl(plan, "arch", 20).status == "blocked"


def test_a_merged_target_blocks_and_one_target_holding_both_sides_keeps_its_rows(
    tmp_path: Path,
) -> None:
    merged = '  - upstream: "shop.*"\n    name: all_shop\n'
    plan = _plan(
        _project(tmp_path, merged),
        (10, "events", EVENTS),
        (11, "arch", ARCHIVE),
        (20, "events", "ALTER TABLE shop.events TRUNCATE PARTITION p0"),
        (30, "events", EXCHANGE),
    )
    d = _ddl(plan, "all_shop", 20)
    assert d.status == "blocked" and "merges shop.arch, shop.events" in (d.reason or "")
    d = _ddl(plan, "all_shop", 30)
    assert d.status == "held"  # behind the blocked one; on its own it changes nothing:
    assert [s.decision.action for s in d.steps] == ["none", "none"]
