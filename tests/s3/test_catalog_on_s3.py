"""Targets in an `s3a://` warehouse on the local S3 server, registered by name in a real Hive
metastore (scripts/metastore.py): after a run with a CREATE TABLE and one with an ADD COLUMN
and a RENAME TABLE, a second Spark session finds each target by name, at its s3a://
location, with its rows.

The metastore is the test's own (the S3 server's group holds no metastore, the catalog
group no S3 server); the runs are the CLI in processes of their own, the reader another.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.catalog.conftest import metastore_module
from tests.runtime.helpers import CHILD_CONF, cli, run_child
from tests.s3.helpers import job_env
from tests.spark.engine_harness import make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.e2e]

TABLES = '  - upstream: "shop.*"\n    name: "{table}"\n    schema: "lake_{db}"\n'

# A second Spark session on the metastore and the bucket: each table of `lake_shop` by name.
READER = """
import json, sys
from ticdc_sync.core.model import Output
from ticdc_sync.spark.runtime.session import build_session

uri, warehouse = sys.argv[1], sys.argv[2]
conf = {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": uri,
        "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"}
spark = build_session(Output("reader", spark_master="local[1]", warehouse=warehouse),
                      kafka=False, extra_conf=conf)
hive = spark._jsparkSession.sharedState().externalCatalog().unwrapped()
out = {}
for r in spark.sql("SHOW TABLES IN lake_shop").collect():
    name = f"lake_shop.{r['tableName']}"
    info = {x["col_name"]: x["data_type"] for x in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    df = spark.table(name).drop("_commit_ts")
    out[name] = {
        "location": info.get("Location"),
        # What the metastore itself holds as the table's location (Spark keeps a Delta
        # table's own in its `path` property).
        "metastore_location": hive.getRawTable("lake_shop", r["tableName"]).storage().locationUri().get().toString(),
        "type": info.get("Type"),
        "columns": df.columns,
        "rows": sorted(json.dumps(x.asDict(), sort_keys=True) for x in df.collect()),
    }
print("CATALOG=" + json.dumps(out, sort_keys=True))
"""


def _profiles(uri: str, warehouse: str) -> str:
    conf = "".join(f"          {k}: {str(v).lower()}\n" for k, v in CHILD_CONF.items())
    return (
        "test:\n  target: dev\n  outputs:\n    dev:\n"
        f'      spark:\n        master: "local[1]"\n        conf:\n{conf}'
        f"      warehouse: {warehouse}\n"
        "      transport: {type: files, captures: captures}\n"
        f"      catalog: {{metastore: {json.dumps(uri)}}}\n"
    )


def _rows(*dicts: dict) -> list[str]:
    return sorted(json.dumps(d, sort_keys=True) for d in dicts)


def test_targets_on_s3_by_name_in_a_hive_metastore(s3_server, bucket, tmp_path: Path):
    warehouse = f"s3a://{bucket}/catalog-wh"
    env = job_env(s3_server)
    with metastore_module().Metastore(tmp_path / "metastore", die_with_parent=True) as hms:
        root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc", tables=TABLES)
        (root / "profiles.yml").write_text(_profiles(hms.uri, warehouse))
        u = Upstream("canal-json")
        u.ddl("orders", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", 3)
        u.ddl("items", "CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(10))", 3)
        u.insert("orders", id=1, v="o1")
        u.insert("items", id=1, v="i1")
        u.watermark()
        write_captures(root, "cdc", u.records())
        first = run_child(cli("run", "--project", str(root)), env=env)
        assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]

        start = len(u.p.records)
        u.ddl("orders", "ALTER TABLE shop.orders ADD COLUMN n INT NOT NULL DEFAULT 7", 5)
        u.insert("orders", id=2, v="o2", n=20)
        u.ddl("goods", "RENAME TABLE shop.items TO shop.goods", 14, old="items")
        u.insert("goods", id=2, v="i2")
        u.watermark()
        write_captures(root, "cdc", u.records(start))
        second = run_child(cli("run", "--project", str(root)), env=env)
        assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]

        read = run_child([sys.executable, "-c", READER, hms.uri, warehouse], env=env)
        assert read.returncode == 0, read.stderr[-3000:]
    line = next(x for x in read.stdout.splitlines() if x.startswith("CATALOG="))
    cat = json.loads(line.removeprefix("CATALOG="))
    assert sorted(cat) == ["lake_shop.goods", "lake_shop.orders"], cat
    orders, goods = cat["lake_shop.orders"], cat["lake_shop.goods"]
    assert orders["columns"] == ["id", "v", "n"], orders
    assert orders["rows"] == _rows({"id": 1, "v": "o1", "n": 7}, {"id": 2, "v": "o2", "n": 20})
    assert goods["rows"] == _rows({"id": 1, "v": "i1"}, {"id": 2, "v": "i2"}), goods
    for name, t in (("orders", orders), ("goods", goods)):
        assert t["type"] == "EXTERNAL", t
        assert t["location"].rstrip("/") == f"{warehouse}/tables/{name}", t
        # The metastore never reaches the bucket (this one has no S3 connector or keys):
        # its own location field is Spark's placeholder in the schema's local folder.
        assert t["metastore_location"].startswith("file:"), t
        assert t["metastore_location"].endswith(f"lake_shop.db/{name}-__PLACEHOLDER__"), t
