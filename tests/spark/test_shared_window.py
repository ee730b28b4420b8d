"""Targets that read their staged rows from one shared copy of the window
(`shared_window`, wired in by `spark.engine` for the targets of a source due in the same
round) land exactly what targets reading the staging table land.

Every apply shares here (`SHARE_FROM` 1), so that the small histories below go through
the copy: generated histories with key moves, deletes, re-inserts and replays, in several
runs (so windows start past zero), must equal their truth; the side-by-side history with
an ADD COLUMN and a blocked target must end with the same rows and the same commits as the
same history applied without copies; and every copy is dropped by the end of each run.
"""

from __future__ import annotations

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.test_engine_fanout import TABLES, commits, land
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.spark import runner, shared_window
from ticdc_sync.spark.shared_window import Windows

pytestmark = pytest.mark.spark


def share(monkeypatch, share_from: int) -> list[Windows]:
    """From now on every engine shares a copy among `share_from` or more targets due
    together; returns each engine's `Windows`."""
    made: list[Windows] = []
    init = Windows.__init__

    def recorded(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(shared_window, "SHARE_FROM", share_from)
    monkeypatch.setattr(Windows, "__init__", recorded)
    return made


def no_copies_left(spark, made: list[Windows]) -> None:
    assert all(w.open() == 0 for w in made)
    db = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
    # SHOW TABLES, not `catalog.listTables`: the test session runs without code generation,
    # and Spark cannot decode the catalog's Table objects interpreted.
    names = [r.tableName for r in spark.sql(f"SHOW TABLES IN `{db}`").collect()]
    assert not [n for n in names if n.startswith("__ticdc_sync")]


@pytest.mark.parametrize("protocol", ["canal-json", "open-protocol"])
def test_histories_through_a_shared_window_equal_their_truth(
    spark, tmp_path, protocol, monkeypatch
):
    made = share(monkeypatch, 1)
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
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"{protocol} {qualified}")
    no_copies_left(spark, made)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_shared_window_lands_what_staging_reads_land(spark, tmp_path, monkeypatch, workers):
    plain_made = share(monkeypatch, 10**6)  # no copies: every target reads the staging table
    p1, code1, _ = land(spark, tmp_path, "plain", [], workers=workers)
    assert sum(w.built for w in plain_made) == 0

    made = share(monkeypatch, 2)
    p2, code2, _ = land(spark, tmp_path, "shared", [], workers=workers)

    assert sum(w.built for w in made) >= 1
    assert code1 == code2 == 1  # `c` is blocked in both
    for name in TABLES:
        assert read_target(spark, p1, name, "id") == read_target(spark, p2, name, "id"), name
        assert commits(spark, p1, name) == commits(spark, p2, name), name
    no_copies_left(spark, made)
