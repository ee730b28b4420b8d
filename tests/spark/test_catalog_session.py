"""Targets registered in the shared session's own catalog (Spark's in-memory session catalog,
no metastore: `catalog: {name: spark_catalog}`), through the real runner: each found by name
with its rows, an entry dropped by hand made again by the next run, and a RENAME TABLE that
moves the entry. The same against a real Hive metastore server: tests/catalog/."""

from __future__ import annotations

import pytest

from tests.spark.crash_harness import run_resuming
from tests.spark.engine_harness import load, make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

SCHEMA = "lake_session_test"


def names(spark) -> list[str]:
    # SHOW TABLES lists the session's temporary views too, whatever the schema; other tests
    # in the shared session leave some behind.
    rows = spark.sql(f"SHOW TABLES IN {SCHEMA}").collect()
    return sorted(r["tableName"] for r in rows if not r["isTemporary"])


def test_targets_by_name_in_the_session_catalog(spark, tmp_path):
    tables = (
        f'  - upstream: "shop.*"\n    name: "{{table}}"\n    schema: "{SCHEMA}"\n'
        '    comment: "mirrored by ticdc-sync"\n    properties: {team: data}\n'
    )
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc", tables=tables)
    profiles = root / "profiles.yml"
    profiles.write_text(profiles.read_text().rstrip("\n") + "\n      catalog: {}\n")
    u = Upstream("canal-json")
    u.ddl("a", "CREATE TABLE shop.a (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("a", id=1, v="one")
    u.watermark()
    write_captures(root, "cdc", u.records())
    lines: list[str] = []
    try:
        # Stopped after its registration, before the step's record: the next run, finding
        # the entry made, records it.
        play = run_resuming(spark, root, "catalog.record")
        assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
        assert names(spark) == ["a"]
        assert [r["v"] for r in spark.table(f"{SCHEMA}.a").collect()] == ["one"]
        # The entry's comment and properties, set at creation, shown by the catalog.
        info = {
            r["col_name"]: r["data_type"]
            for r in spark.sql(f"DESCRIBE TABLE EXTENDED {SCHEMA}.a").collect()
        }
        assert info.get("Comment") == "mirrored by ticdc-sync", info
        assert "team=data" in info.get("Table Properties", ""), info
        # Dropped by hand: the next run, with nothing else to do, registers it again.
        spark.sql(f"DROP TABLE {SCHEMA}.a")
        assert runner.run(load(root), spark=spark, out=lines.append) == 0, "\n".join(lines)
        assert names(spark) == ["a"]
        # A RENAME TABLE moves the entry with the rows.
        start = len(u.p.records)
        u.ddl("b", "RENAME TABLE shop.a TO shop.b", 14, old="a")
        u.insert("b", id=2, v="two")
        u.watermark()
        write_captures(root, "cdc", u.records(start))
        # Stopped at the old entry's DROP: the resumed run drops it and registers the new.
        play = run_resuming(spark, root, "catalog.drop")
        assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
        assert names(spark) == ["b"]
        got = sorted(r["v"] for r in spark.table(f"{SCHEMA}.b").collect())
        assert got == ["one", "two"]
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
