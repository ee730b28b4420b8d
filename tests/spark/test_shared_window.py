"""Targets that read their staged rows from one shared copy of the window
(`shared_window`, wired in by `spark.engine` for the targets of a source due in the same
round) land exactly what targets reading the staging table land.

Every apply shares here (`SHARE_FROM` 1), so that the small histories below go through
the copy: generated histories with key moves, deletes, re-inserts and replays, in several
runs (so windows start past zero), must equal their truth; the side-by-side history with
an ADD COLUMN and a blocked target must end with the same rows and the same commits as the
same history applied without copies; and every copy is dropped by the end of each run.
With `split`, every copy is also read in groups of targets (`SPLIT_ROWS` 0, `SPLIT_FROM`
2), as a large one is, and the same must hold.
"""

from __future__ import annotations

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.test_engine_fanout import TABLES, commits, land
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import shared_window
from ticdc_sync.spark.apply.shared_window import SharedWindow, Windows, split

pytestmark = pytest.mark.spark


def share(monkeypatch, share_from: int, groups: list[str] | None = None) -> list[Windows]:
    """From now on every engine shares a copy among `share_from` or more targets due
    together; returns each engine's `Windows`. `groups` given: every copy is read in
    groups of targets, and each group copy made is named in `groups`."""
    made: list[Windows] = []
    init = Windows.__init__

    def recorded(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(shared_window, "SHARE_FROM", share_from)
    monkeypatch.setattr(Windows, "__init__", recorded)
    if groups is not None:
        monkeypatch.setattr(shared_window, "SPLIT_ROWS", 0)
        monkeypatch.setattr(shared_window, "SPLIT_FROM", 2)
        group_view = SharedWindow._group_view

        def counted(self, spark, group):
            view = group_view(self, spark, group)
            if view is not None and view not in groups:
                groups.append(view)
            return view

        monkeypatch.setattr(SharedWindow, "_group_view", counted)
    return made


def no_copies_left(spark, made: list[Windows]) -> None:
    assert all(w.open() == 0 for w in made)
    db = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
    # SHOW TABLES, not `catalog.listTables`: the test session runs without code generation,
    # and Spark cannot decode the catalog's Table objects interpreted.
    names = [r.tableName for r in spark.sql(f"SHOW TABLES IN `{db}`").collect()]
    assert not [n for n in names if n.startswith("__ticdc_sync")]


# Each way of reading the copy once: whole (open-protocol, one worker) and in groups.
@pytest.mark.parametrize(
    ("protocol", "split_copies"),
    [("open-protocol", False), ("canal-json", True)],
    ids=["open-protocol", "canal-json-groups"],
)
def test_histories_through_a_shared_window_equal_their_truth(
    spark, tmp_path, protocol, split_copies, monkeypatch
):
    groups: list[str] = []
    made = share(monkeypatch, 1, groups if split_copies else None)
    history = generate(
        HistoryConfig(seed=11, transactions=60, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, protocol, "cdc")
    assert enc.replays > 0
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path / protocol,
        protocol=protocol,
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    project = load(root)
    for chunk in enc.chunks(3):
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert sum(w.built for w in made) >= 3  # one per run at least
    assert bool(groups) == split_copies, groups
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"{protocol} {qualified}")
    no_copies_left(spark, made)


@pytest.mark.parametrize(
    ("workers", "split_copies"), [(1, False), (2, True)], ids=["1", "2-groups"]
)
def test_a_shared_window_lands_what_staging_reads_land(
    spark, tmp_path, monkeypatch, workers, split_copies
):
    # Every segment MERGEd: small mirror targets would take the round, which reads the
    # staging table once for all of them and shares no copy.
    merged = "defaults:\n  rewrite_below: 0\n"
    plain_made = share(monkeypatch, 10**6)  # no copies: every target reads the staging table
    p1, code1, _ = land(spark, tmp_path, "plain", [], workers=workers, defaults=merged)
    assert sum(w.built for w in plain_made) == 0

    groups: list[str] = []
    made = share(monkeypatch, 2, groups if split_copies else None)
    p2, code2, _ = land(spark, tmp_path, "shared", [], workers=workers, defaults=merged)

    assert sum(w.built for w in made) >= 1
    assert bool(groups) == split_copies, groups
    assert code1 == code2 == 1  # `c` is blocked in both
    for name in TABLES:
        assert read_target(spark, p1, name, "id") == read_target(spark, p2, name, "id"), name
        assert commits(spark, p1, name) == commits(spark, p2, name), name
    no_copies_left(spark, made)


def test_a_large_copy_is_read_in_about_sqrt_t_groups_of_targets():
    tables_of = {f"t{i:03d}": {("db", f"t{i:03d}")} for i in range(100)}
    tables_of["shards"] = {("db", "s1"), ("db", "s2")}  # one target of two upstream tables
    tables_of["none"] = set()  # no row segment: in no group
    groups, group_of = split(shared_window.SPLIT_ROWS, tables_of)
    assert len(groups) == 11 and max(len(g) for g in groups) <= 11
    assert set(group_of) == set(tables_of) - {"none"}
    for target, tables in tables_of.items():
        if tables:
            assert tables <= groups[group_of[target]], target
    # Every table in exactly one group here (no two targets share one).
    assert sum(len(g) for g in groups) == 102
    assert split(shared_window.SPLIT_ROWS - 1, tables_of) == ([], {})
    few = {t: tables_of[t] for t in sorted(tables_of)[: shared_window.SPLIT_FROM - 1]}
    assert split(10**9, few) == ([], {})
