"""Every target a named table in a real Hive metastore, through CREATE, ADD COLUMN, RENAME
TABLE and DROP TABLE, a crash between a target's commits and its catalog step, and a name
held by a table ticdc-sync did not create.

The runs are the CLI in processes of their own whose session catalog is the metastore
server of `hive_metastore` (thrift); a new process, a second Spark session, then finds each
target by name with its columns and rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.helpers import CHILD_CONF, child_env, cli, run_child
from tests.spark.engine_harness import make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

TABLES = '  - upstream: "shop.*"\n    name: "{table}"\n    schema: "lake_{db}"\n'

# A run stopped at its first catalog statement, as a kill there would stop it (after the
# target's Delta commits); a table ticdc-sync did not create takes `lake_shop.held` first.
CRASHED_RUN = """
import sys
from ticdc_sync.core import crash_points
from ticdc_sync.commands.cli import main
from ticdc_sync.project import load_project
from ticdc_sync.spark.runner import run_session

root, elsewhere = sys.argv[1], sys.argv[2]
spark = run_session(load_project(root))
spark.sql("CREATE SCHEMA IF NOT EXISTS lake_shop")
spark.sql(f"CREATE TABLE lake_shop.held (x INT) USING parquet LOCATION '{elsewhere}'")
with crash_points.armed("catalog.register", target="orders"):
    sys.exit(main(["run", "--project", root]))
"""

# A second Spark session on the metastore: each table of `lake_shop` by name.
READER = """
import json, sys
from ticdc_sync.spark.runtime.session import build_session

conf = {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": sys.argv[1],
        "spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"}
spark = build_session(kafka=False, extra_conf=conf)
out = {}
for r in spark.sql("SHOW TABLES IN lake_shop").collect():
    name = f"lake_shop.{r['tableName']}"
    info = {x["col_name"]: x["data_type"] for x in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    df = spark.table(name)
    out[name] = {
        "location": info.get("Location"),
        "provider": info.get("Provider"),
        "type": info.get("Type"),
        "comment": info.get("Comment"),
        "columns": [f.name for f in df.schema.fields],
        "rows": sorted(json.dumps(x.asDict(), default=str, sort_keys=True)
                       for x in df.drop(*[c for c in df.columns if c == "_commit_ts"]).collect())
        if info.get("Provider") == "delta" else None,
    }
print("CATALOG=" + json.dumps(out, sort_keys=True))
for name in sys.argv[2:]:  # dropped by hand: the next run registers them again
    spark.sql(f"DROP TABLE {name}")
"""


def profiles(uri: str) -> str:
    conf = "".join(f"          {k}: {str(v).lower()}\n" for k, v in CHILD_CONF.items())
    return (
        "test:\n  target: dev\n  outputs:\n    dev:\n"
        f'      spark:\n        master: "local[1]"\n        conf:\n{conf}'
        "      warehouse: warehouse\n"
        "      transport: {type: files, captures: captures}\n"
        f"      catalog: {{metastore: {json.dumps(uri)}}}\n"
    )


def read_catalog(uri: str, *drop: str) -> dict:
    proc = run_child([sys.executable, "-c", READER, uri, *drop], env=child_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("CATALOG="))
    return json.loads(line.removeprefix("CATALOG="))


def rows(*dicts: dict) -> list[str]:
    return sorted(json.dumps(d, sort_keys=True) for d in dicts)


def test_targets_by_name_through_ddl_and_a_crash(hive_metastore, tmp_path: Path):
    uri = hive_metastore.uri
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc", tables=TABLES)
    (root / "profiles.yml").write_text(profiles(uri))
    u = Upstream("canal-json")
    u.ddl("orders", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("items", "CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("gone", "CREATE TABLE shop.gone (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("held", "CREATE TABLE shop.held (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("orders", id=1, v="o1")
    u.insert("items", id=1, v="i1")
    u.insert("gone", id=1, v="g1")
    u.insert("held", id=1, v="h1")
    u.watermark()
    write_captures(root, "cdc", u.records())
    env = child_env()

    # 1. Killed at the first catalog statement of `orders`, after its commits.
    crashed = run_child(
        [sys.executable, "-c", CRASHED_RUN, str(root), str(tmp_path / "elsewhere")], env=env
    )
    assert crashed.returncode != 0 and "SimulatedCrash" in crashed.stderr, crashed.stderr[-2000:]
    plan = run_child(cli("plan", "--project", str(root), "--detailed-exitcode"), env=env)
    assert plan.returncode == 2, plan.stdout
    assert "catalog: spark_catalog.lake_shop.orders  (register; pending)" in plan.stdout
    assert "CREATE TABLE `spark_catalog`.`lake_shop`.`orders` USING DELTA LOCATION " in (
        plan.stdout
    )

    # 2. The next run reconciles; the held name fails its target only, naming the table.
    first = run_child(cli("run", "--project", str(root)), env=env)
    out = first.stdout + first.stderr
    assert first.returncode != 0, out
    assert (
        "catalog table spark_catalog.lake_shop.held is held by a table ticdc-sync did not create"
        in out
    )

    # 3. ADD COLUMN, RENAME TABLE and DROP TABLE, with rows after each.
    start = len(u.p.records)
    u.ddl("orders", "ALTER TABLE shop.orders ADD COLUMN n INT NOT NULL DEFAULT 7", 5)
    u.insert("orders", id=2, v="o2", n=20)
    u.ddl("goods", "RENAME TABLE shop.items TO shop.goods", 14, old="items")
    u.insert("goods", id=2, v="i2")
    u.ddl("gone", "DROP TABLE shop.gone", 4)
    u.watermark()
    write_captures(root, "cdc", u.records(start))
    second = run_child(cli("run", "--project", str(root)), env=env)
    assert "lake_shop.held" in second.stdout + second.stderr  # still refused, still named

    cat = read_catalog(uri, "lake_shop.orders")
    wh = (root / "warehouse" / "tables").resolve()
    assert sorted(cat) == ["lake_shop.goods", "lake_shop.held", "lake_shop.orders"], cat
    orders, goods = cat["lake_shop.orders"], cat["lake_shop.goods"]
    assert orders["columns"][:3] == ["id", "v", "n"]
    assert orders["rows"] == rows({"id": 1, "v": "o1", "n": 7}, {"id": 2, "v": "o2", "n": 20}), (
        orders
    )
    assert goods["rows"] == rows({"id": 1, "v": "i1"}, {"id": 2, "v": "i2"}), goods
    for name, t in (("orders", orders), ("goods", goods)):
        assert (t["provider"], t["type"]) == ("delta", "EXTERNAL"), t
        assert t["location"].rstrip("/").endswith(str(wh / name)), t
    assert cat["lake_shop.held"]["provider"] == "parquet"  # never overwritten

    # 4. Nothing left to register but the held name.
    plan = run_child(cli("plan", "--project", str(root), "--format", "json"), env=env)
    doc = json.loads(plan.stdout)
    pending = sorted(t["name"] for t in doc["targets"] if (t["catalog"] or {}).get("pending"))
    assert pending == ["held"], pending
    assert {t["name"]: t["catalog"]["action"] for t in doc["targets"]} == {
        "gone": "drop",
        "goods": "register",
        "held": "register",
        "items": "drop",
        "orders": "register",
    }
    # status and snapshot name the targets by their catalog names.
    status = run_child(cli("status", "--project", str(root), "--format", "json"), env=env)
    names = {t["name"]: t["catalog_name"] for t in json.loads(status.stdout)["targets"]}
    assert names == {
        "gone": None,
        "goods": "lake_shop.goods",
        "held": "lake_shop.held",
        "items": None,
        "orders": "lake_shop.orders",
    }, names
    # 5. A registration dropped by hand: the next run, with nothing else to do, restores it.
    third = run_child(cli("run", "--project", str(root)), env=env)
    assert "lake_shop.held" in third.stdout + third.stderr
    again = read_catalog(uri)
    assert again["lake_shop.orders"]["rows"] == orders["rows"], again
    snap = run_child(
        cli("snapshot", "--project", str(root), "--select", "lake_shop.orders"), env=env
    )
    assert "SELECT * FROM lake_shop.orders VERSION AS OF " in snap.stdout, snap.stdout


def test_metastore_script_starts_and_stops(tmp_path: Path):
    """`scripts/metastore.py start`/`status`/`stop` from the command line."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "metastore.py"
    env = child_env(TICDC_SYNC_CACHE=str(tmp_path / "cache"))
    started = subprocess.run(
        [sys.executable, str(script), "start"], env=env, capture_output=True, text=True, timeout=300
    )
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("thrift://127.0.0.1:")
        status = subprocess.run(
            [sys.executable, str(script), "status"], env=env, capture_output=True, text=True
        )
        assert status.stdout == started.stdout
    finally:
        subprocess.run([sys.executable, str(script), "stop"], env=env, timeout=120)
    status = subprocess.run(
        [sys.executable, str(script), "status"], env=env, capture_output=True, text=True
    )
    assert status.returncode == 1
