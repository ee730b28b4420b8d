"""Targets registered by name in a Spark Connect server's session catalog. The catalog lives
in the server: this test's own server, started with a Hive metastore of its own
(scripts/metastore.py) as its configuration says, as the error for a client-side
`catalog.metastore` tells a user to do. The run is a client of it; another client session
finds each target by name with its rows; after an upstream RENAME TABLE the entry has moved,
and one dropped by hand is back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.catalog.conftest import metastore_module
from tests.connect.conftest import server_module
from tests.spark.engine_harness import make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from ticdc_sync.commands import cli

pytestmark = [pytest.mark.connect, pytest.mark.e2e]

SCHEMA = "lake_shop"
TABLES = f'  - upstream: "shop.*"\n    name: "{{table}}"\n    schema: "{SCHEMA}"\n'


def _rows(spark, name: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(name).drop("_commit_ts").collect())


def _names(spark) -> set[str]:
    return {r.tableName for r in spark.sql(f"SHOW TABLES IN {SCHEMA}").collect()}


def test_targets_by_name_in_the_servers_hive_catalog(tmp_path: Path, capsys):
    from ticdc_sync.core.model import Output
    from ticdc_sync.spark.runtime import fanout
    from ticdc_sync.spark.runtime.session import build_session

    with metastore_module().Metastore(tmp_path / "hms", die_with_parent=True) as hms:
        server = server_module().ConnectServer(
            tmp_path / "server",
            conf={
                "spark.sql.shuffle.partitions": "1",
                "spark.default.parallelism": "1",
                "spark.databricks.delta.snapshotPartitions": "1",
                # The server's catalog: Spark's session catalog on the metastore.
                "spark.sql.catalogImplementation": "hive",
                "spark.hadoop.hive.metastore.uris": hms.uri,
            },
        )
        with server:
            root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc", tables=TABLES)
            profiles = {
                "test": {
                    "target": "dev",
                    "outputs": {
                        "dev": {
                            "spark": {"remote": server.remote},
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

            reader = build_session(Output("reader", spark_remote=server.remote), kafka=False)
            try:
                assert reader.conf.get("spark.sql.catalogImplementation") == "hive"
                assert _names(reader) == {"orders", "items"}
                assert _rows(reader, f"{SCHEMA}.orders") == [(1, "o1")]
                assert _rows(reader, f"{SCHEMA}.items") == [(1, "i1")]
                info = {
                    r.col_name: r.data_type
                    for r in reader.sql(f"DESCRIBE TABLE EXTENDED {SCHEMA}.orders").collect()
                }
                assert (info["Type"], info["Provider"]) == ("EXTERNAL", "delta"), info
                where = (root / "warehouse" / "tables" / "orders").resolve()
                assert info["Location"].rstrip("/").endswith(str(where)), info
                # Recorded in the warehouse: `plan` (no Spark) has nothing pending.
                assert cli.main(["plan", "--project", str(root), "--detailed-exitcode"]) == 0
                assert "(as the Spark Connect server is configured; " in capsys.readouterr().out
                # An entry dropped by hand is registered again by the next run (it reconciles).
                reader.sql(f"DROP TABLE {SCHEMA}.orders")

                start = len(u.p.records)
                u.ddl("goods", "RENAME TABLE shop.items TO shop.goods", 14, old="items")
                u.insert("goods", id=2, v="i2")
                u.watermark()
                write_captures(root, "cdc", u.records(start))
                assert cli.main(["run", "--project", str(root)]) == 0, capsys.readouterr()

                assert _names(reader) == {"orders", "goods"}
                assert _rows(reader, f"{SCHEMA}.orders") == [(1, "o1")]
                assert _rows(reader, f"{SCHEMA}.goods") == [(1, "i1"), (2, "i2")]
            finally:
                fanout.release_all(reader)
                reader.stop()
