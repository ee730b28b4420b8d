"""`ticdc-sync verify` after an upstream RENAME TABLE and DROP TABLE: a target none of whose
upstream tables existed at the export's snapshot TSO is reported absent at that TSO (text
and JSON, not different), whichever side of the DDL the export was taken on; the others
are compared, planted differences found by key; an export that left out a table that did
exist at its TSO is still an error naming it.

A real history (TiCDC Canal-JSON) through the real runner on the shared session: shop has
`customers`, `orders` and `items`; an export is taken; then `customers` is renamed to
`clients` and `items` dropped (route `name: "{table}"`), rows go on, and a second export is
taken at the end. `verify` runs through the CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from testkit.dumpling import write_export
from tests.spark.engine_harness import make_project, write_captures
from tests.spark.test_ddl_engine_kinds import Upstream
from tests.unit.test_verify import valid
from ticdc_sync.commands import cli

pytestmark = pytest.mark.spark


def _verify(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["verify", "--project", str(root), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _export(u: Upstream, folder: Path, tso: int) -> None:
    """A Dumpling export of upstream as it stands now, at snapshot `tso`."""
    tables = [(u.tables[t], [dict(r) for r in u.rows.get(t, {}).values()]) for t in u.tables]
    write_export(folder, tables, tso)


@pytest.fixture(scope="module")
def renamed(spark, tmp_path_factory):
    """The project after its run, its two exports, and the TSOs that matter."""
    u = Upstream("canal-json")
    u.ddl("customers", "CREATE TABLE shop.customers (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("orders", "CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.ddl("items", "CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(10))", 3)
    u.insert("customers", id=1, v="one")
    u.insert("customers", id=2, v="two")
    u.insert("orders", id=1, v="o1")
    u.insert("items", id=1, v="i1")
    u.watermark()
    root = make_project(tmp_path_factory.mktemp("verify-absent") / "p", protocol="canal-json")
    before = u.ts()
    u.p.send_watermark(before)
    _export(u, root / "before", before)
    renamed = u.ddl("clients", "RENAME TABLE shop.customers TO shop.clients", 14, old="customers")
    dropped = u.ddl("items", "DROP TABLE shop.items", 4)
    u.insert("clients", id=3, v="three")
    u.update("clients", 1, v="uno")
    u.insert("orders", id=2, v="o2")
    after = u.ts()
    u.p.send_watermark(after)
    _export(u, root / "after", after)
    write_captures(root, "t", u.records())
    assert cli.main(["run", "--project", str(root)]) == 0
    return root, {"before": before, "after": after, "renamed": renamed, "dropped": dropped}


def test_an_export_after_the_rename_reports_the_old_target_absent(renamed, capsys):
    root, ts = renamed
    after = str(root / "after")
    code, out, err = _verify(capsys, root, "--export", after)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"verify against the Dumpling export {after} at its snapshot TSO ")
    assert lines[1].startswith("  clients: equal (3 rows, checksum ")
    assert lines[2] == (
        f"  customers: absent at TSO {ts['after']}, nothing to compare: its upstream table did "
        f"not exist then: shop.customers renamed to shop.clients at TSO {ts['renamed']}"
    )
    assert lines[3] == (
        f"  items: absent at TSO {ts['after']}, nothing to compare: its upstream table did not "
        f"exist then: shop.items dropped at TSO {ts['dropped']}"
    )
    assert lines[4].startswith("  orders: equal (2 rows, checksum ")
    assert lines[5] == (
        "2 of 2 target(s) equal; 2 absent at the export's TSO (their upstream tables did not "
        "exist then)"
    )
    code, out, err = _verify(capsys, root, "--export", after, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert valid(doc) and doc["equal"] is True and doc["passed_over"] == []
    assert [t["name"] for t in doc["targets"]] == ["clients", "orders"]
    assert all(t["equal"] for t in doc["targets"])
    assert doc["absent"] == [
        {
            "name": "customers",
            "source": "src",
            "export": after,
            "tso": ts["after"],
            "why": f"shop.customers renamed to shop.clients at TSO {ts['renamed']}",
            "absent_since": ts["renamed"],
            "absent_until": None,
        },
        {
            "name": "items",
            "source": "src",
            "export": after,
            "tso": ts["after"],
            "why": f"shop.items dropped at TSO {ts['dropped']}",
            "absent_since": ts["dropped"],
            "absent_until": None,
        },
    ]
    # A glob over both names: the one compared, the other absent.
    code, out, err = _verify(capsys, root, "--export", after, "--tables", "c*")
    assert code == 0, err
    assert [ln.split(":")[0] for ln in out.splitlines()[1:3]] == ["  clients", "  customers"]
    # Only absent targets selected: nothing differs, and no Spark job is needed.
    code, out, err = _verify(capsys, root, "--export", after, "--tables", "customers", "items")
    assert code == 0, err
    assert out.splitlines()[-1] == (
        "0 of 0 target(s) equal; 2 absent at the export's TSO (their upstream tables did not "
        "exist then)"
    )


def test_an_export_before_the_rename_reports_the_new_target_absent(renamed, capsys):
    root, ts = renamed
    before = str(root / "before")
    code, out, err = _verify(capsys, root, "--export", before, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert valid(doc) and doc["equal"] is True
    rows = {t["name"]: t["rows"] for t in doc["targets"]}
    assert rows == {
        "customers": {"upstream": 2, "lake": 2},
        "items": {"upstream": 1, "lake": 1},
        "orders": {"upstream": 1, "lake": 1},
    }
    assert [(a["name"], a["why"], a["absent_since"], a["absent_until"]) for a in doc["absent"]] == [
        (
            "clients",
            f"shop.clients renamed in from shop.customers at TSO {ts['renamed']}",
            None,
            ts["renamed"],
        )
    ]
    code, out, err = _verify(capsys, root, "--export", before)
    assert code == 0, err
    assert out.splitlines()[1] == (
        f"  clients: absent at TSO {ts['before']}, nothing to compare: its upstream table did "
        f"not exist then: shop.clients renamed in from shop.customers at TSO {ts['renamed']}"
    )


def test_planted_differences_are_found_by_key_beside_an_absent_target(renamed, tmp_path, capsys):
    root, ts = renamed
    planted = tmp_path / "planted"
    shutil.copytree(root / "after", planted)
    clients = planted / "shop.clients.000000000.sql"
    text = clients.read_text()
    assert "(2,'two')" in text
    clients.write_text(text.replace("(2,'two')", "(2,'TWO')"))
    orders = planted / "shop.orders.000000000.sql"
    text = orders.read_text()
    assert "(2,'o2');" in text
    orders.write_text(text.replace("(2,'o2');", "(2,'o2'),\n(9,'o9');"))
    code, out, err = _verify(capsys, root, "--export", str(planted), "--format", "json")
    assert code == 2, err
    doc = json.loads(out)
    assert valid(doc) and doc["equal"] is False
    assert [a["name"] for a in doc["absent"]] == ["customers", "items"]
    found = {
        t["name"]: [(d["kind"], d["key"], d["columns"]) for d in t["first_differences"]]
        for t in doc["targets"]
    }
    assert found == {
        "clients": [("changed", {"id": "2"}, ["v"])],
        "orders": [("missing", {"id": "9"}, [])],
    }


def test_a_table_that_existed_but_is_not_in_the_export_is_still_an_error(renamed, tmp_path, capsys):
    root, _ = renamed
    partial = tmp_path / "partial"
    shutil.copytree(root / "after", partial)
    for f in partial.glob("shop.orders*"):
        f.unlink()
    code, out, err = _verify(capsys, root, "--export", str(partial))
    assert code == 1
    assert err.strip() == (
        f"error: verify: target orders: the Dumpling export {partial} holds none of its "
        "upstream tables (shop.orders) (hint: export them too, or leave the target out with "
        "--tables)"
    )
