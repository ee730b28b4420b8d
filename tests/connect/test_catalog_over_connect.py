"""Targets registered by name in a Spark Connect server's session catalog: the catalog lives
in the server (its own configuration: here Spark's built-in catalog, shared by every session
of the server), the run is a client of it, and another client session finds each target by
name with its rows; after an upstream RENAME TABLE the entry has moved, and one dropped by
hand is back.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from tests.spark.engine_harness import make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from ticdc_sync.commands import cli

pytestmark = pytest.mark.connect


def _rows(remote, name: str) -> list[tuple]:
    return sorted(tuple(r) for r in remote.table(name).drop("_commit_ts").collect())


def test_targets_by_name_in_the_servers_catalog(remote, connect_server, tmp_path: Path, capsys):
    # A schema of this test's own: the server may be one started by hand, used before.
    schema = f"lake_{uuid.uuid4().hex[:8]}"
    tables = f'  - upstream: "shop.*"\n    name: "{{table}}"\n    schema: "{schema}"\n'
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc", tables=tables)
    profiles = {
        "test": {
            "target": "dev",
            "outputs": {
                "dev": {
                    "spark": {"remote": connect_server.remote},
                    "warehouse": "warehouse",
                    "transport": {"type": "files", "captures": "captures"},
                    "catalog": {"name": "spark_catalog"},
                }
            },
        }
    }
    (root / "profiles.yml").write_text(yaml.safe_dump(profiles))
    u = Upstream("canal-json")
    u.ddl("orders", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("items", "CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("orders", id=1, v="o1")
    u.insert("items", id=1, v="i1")
    u.watermark()
    write_captures(root, "cdc", u.records())
    assert cli.main(["run", "--project", str(root)]) == 0, capsys.readouterr()
    capsys.readouterr()

    names = {r.tableName for r in remote.sql(f"SHOW TABLES IN {schema}").collect()}
    assert names == {"orders", "items"}, names
    assert _rows(remote, f"{schema}.orders") == [(1, "o1")]
    assert _rows(remote, f"{schema}.items") == [(1, "i1")]
    info = {
        r.col_name: r.data_type
        for r in remote.sql(f"DESCRIBE TABLE EXTENDED {schema}.orders").collect()
    }
    assert info["Type"] == "EXTERNAL", info
    warehouse = (root / "warehouse" / "tables").resolve()
    assert info["Location"].rstrip("/").endswith(str(warehouse / "orders")), info
    # Recorded in the warehouse: `plan` (no Spark) has nothing pending.
    assert cli.main(["plan", "--project", str(root), "--detailed-exitcode"]) == 0
    assert "(as the Spark Connect server is configured; " in capsys.readouterr().out
    # An entry dropped by hand is registered again by the next run, which reconciles.
    remote.sql(f"DROP TABLE {schema}.orders")

    start = len(u.p.records)
    u.ddl("goods", "RENAME TABLE shop.items TO shop.goods", 14, old="items")
    u.insert("goods", id=2, v="i2")
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    assert cli.main(["run", "--project", str(root)]) == 0, capsys.readouterr()

    names = {r.tableName for r in remote.sql(f"SHOW TABLES IN {schema}").collect()}
    assert names == {"orders", "goods"}, names
    assert _rows(remote, f"{schema}.orders") == [(1, "o1")]
    assert _rows(remote, f"{schema}.goods") == [(1, "i1"), (2, "i2")]
    remote.sql(f"DROP SCHEMA {schema} CASCADE")
