"""DROP DATABASE on real Delta targets, per protocol: TiCDC sends it as one schema-level DDL
event with no table name (codec facts 1.4), and every table of the database is gone
upstream, so each of their targets must be emptied as a DROP TABLE would (they used to keep
their rows: a target that no longer equalled TiDB)."""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.test_ddl_engine_kinds import PROTOCOLS, Upstream
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_drop_database_empties_the_targets_of_its_tables(spark, tmp_path, protocol):
    u = Upstream(protocol)
    u.ddl("a", "CREATE TABLE shop.a (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("b", "CREATE TABLE shop.b (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("a", id=1, v="a1")
    u.insert("b", id=1, v="b1")
    u.watermark()
    root = make_project(tmp_path / protocol, protocol=protocol, topic="cdc")
    write_captures(root, "cdc", u.records())
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert len(read_target(spark, project, "a", "id")) == 1

    start = len(u.records())
    u.ddl("", "DROP DATABASE `shop`", 2)
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    assert read_target(spark, project, "a", "id") == []
    assert read_target(spark, project, "b", "id") == []
