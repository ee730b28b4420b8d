"""`ticdc-sync verify` for real: the example project's lake against the export of its final
state (exact, every mode), a change made behind ticdc-sync's back named by its key in each
mode, a target gathering shards compared with their union, and a bad export row named.

Real Spark and Delta: the targets are written by `run` and tampered with by Spark SQL on
their Delta tables; `verify` runs through the CLI on the shared session.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from testkit.dumpling import DumplingFlags, write_export
from testkit.encode import make_tso
from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.unit.test_verify import valid
from ticdc_sync.commands import cli
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "projects_example" / "shop"
PREFIXES = {"canal_": "mirror", "debezium_": "soft_delete", "open_": "history"}


def _verify(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["verify", "--project", str(root), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def example(spark, tmp_path_factory) -> Path:
    """The example project after its run: every target at the captures' resolved TSO."""
    root = tmp_path_factory.mktemp("verify") / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    assert cli.main(["run", "--project", str(root)]) == 0
    return root


def test_the_example_equals_the_export_of_its_final_state(example, capsys):
    final = example / "expected" / "dumpling"
    code, out, err = _verify(capsys, example, "--export", str(final), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert valid(doc) and doc["equal"] is True and doc["passed_over"] == []
    expected = {
        json.loads(f.read_text())["table"].split(".")[1]: json.loads(f.read_text())
        for f in sorted((example / "expected").glob("*.json"))
    }
    assert [e["tso"] for e in doc["exports"]] == [next(iter(expected.values()))["resolved_ts"]]
    names = sorted(p + t for p in PREFIXES for t in expected)
    assert [t["name"] for t in doc["targets"]] == names
    for t in doc["targets"]:
        prefix, table = t["name"].split("_", 1)
        assert t["mode"] == PREFIXES[prefix + "_"] and t["equal"] is True
        assert t["rows"] == {"upstream": len(expected[table]["rows"])} | {
            "lake": len(expected[table]["rows"])
        }
        assert t["columns"] == expected[table]["columns"]  # the ADD COLUMN after the load too
        assert t["checksum"]["upstream"] == t["checksum"]["lake"]
        assert t["differences"] == {"missing": 0, "extra": 0, "changed": 0}
    # The same tables hash the same in every mode (the metadata columns are left out).
    by_table = {t["name"].split("_", 1)[1]: t["checksum"]["lake"] for t in doc["targets"]}
    assert all(
        t["checksum"]["lake"] == by_table[t["name"].split("_", 1)[1]] for t in doc["targets"]
    )
    # JSON is deterministic: a second verify prints the same bytes.
    again = _verify(capsys, example, "--export", str(final), "--format", "json")
    assert again[1] == out

    # Without --export: each source's initial_load, at its snapshot: the mirror's first
    # version read back through time travel, the history target's versions valid then.
    code, out, err = _verify(capsys, example, "--tables", "canal_orders", "open_orders")
    assert code == 0, err
    loaded = json.loads((example / "expected" / "orders.json").read_text())["snapshot_ts"]
    assert out.splitlines()[0].startswith(
        f"verify against the Dumpling export dumpling at its snapshot TSO {loaded} "
    )
    assert out.splitlines()[-1] == "2 of 2 target(s) equal"
    code, out, err = _verify(capsys, example, "--tables", "*_orders", "--format", "json")
    assert code == 0, err
    at = {
        t["name"]: (t["tso"], t["lake_tso"], t["rows"]["lake"]) for t in json.loads(out)["targets"]
    }
    resolved = doc["exports"][0]["tso"]
    assert at["canal_orders"][:2] == at["debezium_orders"][:2] == (loaded, loaded)
    assert at["open_orders"][:2] == (loaded, resolved)
    assert at["canal_orders"][2] == at["open_orders"][2]


def _tamper(spark, project, name: str, mode: str, changed: int, gone: int, new: int) -> None:
    """Behind ticdc-sync's back: one row changed, one deleted, one added."""
    from pyspark.sql import functions as F

    loc = target_location(warehouse_path(project), name)
    ref = f"delta.`{loc}`"
    current = {"mirror": "true", "soft_delete": "NOT _is_deleted", "history": "_valid_to IS NULL"}
    live = current[mode]
    spark.sql(f"UPDATE {ref} SET full_name = 'tampered' WHERE id = {changed} AND {live}")
    if mode == "soft_delete":
        spark.sql(f"UPDATE {ref} SET _is_deleted = true WHERE id = {gone}")
    else:
        spark.sql(f"DELETE FROM {ref} WHERE id = {gone} AND {live}")
    df = spark.read.format("delta").load(loc)
    new_id = F.lit(new).cast(df.schema["id"].dataType)
    copy = df.where(f"id = {changed} AND {live}").withColumn("id", new_id)
    copy.write.format("delta").mode("append").save(loc)


def test_a_row_changed_deleted_or_added_behind_its_back_is_named_in_each_mode(
    spark, example, tmp_path, capsys
):
    root = tmp_path / "shop"
    shutil.copytree(example, root)  # the warehouse too: this test's tampering stays here
    project = load(root)
    rows = json.loads((root / "expected" / "customers.json").read_text())["rows"]
    by_id = {r["id"]: r for r in rows}
    ids = sorted(by_id)
    changed, gone, new = ids[0], ids[-1], ids[-1] + 1000
    names = [p + "customers" for p in PREFIXES]
    for name, mode in zip(names, PREFIXES.values(), strict=True):
        _tamper(spark, project, name, mode, changed, gone, new)
    final = str(root / "expected" / "dumpling")
    code, out, err = _verify(
        capsys, root, "--export", final, "--tables", *names, "--format", "json"
    )
    assert code == 2, err
    doc = json.loads(out)
    assert valid(doc) and doc["equal"] is False
    for t in doc["targets"]:
        assert t["equal"] is False and t["differences"] == {"missing": 1, "extra": 1, "changed": 1}
        assert t["rows"] == {"upstream": len(rows), "lake": len(rows)}
        assert t["differing_columns"] != []
        first = {(d["kind"], d["key"]["id"]): d for d in t["first_differences"]}
        assert sorted(first) == sorted(
            [("changed", str(changed)), ("missing", str(gone)), ("extra", str(new))]
        ), t["name"]
        c = first[("changed", str(changed))]
        assert c["columns"] == ["full_name"]
        assert c["upstream"]["full_name"] == by_id[changed]["full_name"]
        assert c["lake"]["full_name"] == "tampered"
        m = first[("missing", str(gone))]
        assert m["lake"] is None and m["upstream"]["email"] == by_id[gone]["email"]
        x = first[("extra", str(new))]
        assert x["upstream"] is None and x["lake"]["full_name"] == "tampered"
    # Text names the keys too; --show bounds how many are listed.
    code, out, _ = _verify(capsys, root, "--export", final, "--tables", names[0], "--show", "1")
    assert code == 2
    lines = out.splitlines()
    assert (
        lines[1].startswith(f"  {names[0]}: DIFFERENT: ")
        and "1 missing, 1 extra, 1 changed" in (lines[1])
    )
    assert lines[2].startswith(f"    changed id={changed}: full_name: upstream ")
    assert lines[2].endswith(", lake tampered")
    assert lines[3] == "    ... and 2 more (hint: --show N lists more)"
    assert lines[-1] == "0 of 1 target(s) equal, 1 different"


# --------------------------------------------------------------------------- shards

MS = 1_700_000_000_000


def ts(n: int) -> int:
    return make_tso(MS + n * 1000)


def _shard(name: str) -> TableSchema:
    cols = (
        Column("id", "int", nullable=False),
        Column("v", "varchar", length=10),
        Column("d", "double"),
    )
    return TableSchema("shop", name, cols, ("id",))


MT = {"id": "int", "v": "varchar", "d": "double"}


def _row(op: str, at: int, table: str, data: dict, old: dict | None = None) -> bytes:
    return canal_row("shop", table, op, at, data, MT, ["id"], old)


def test_shards_compare_as_their_union_and_a_bad_export_row_is_named(spark, tmp_path, capsys):
    one, two = _shard("o_1"), _shard("o_2")
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables='  - upstream: "shop.o_*"\n    name: orders\n',
    )
    flags = DumplingFlags(filetype="csv")
    write_export(
        root / "export",
        [(one, [{"id": 1, "v": "a", "d": 1.5}]), (two, [{"id": 2, "v": "b", "d": 2.5}])],
        ts(10),
        flags,
    )
    src = root / "sources" / "s.yml"
    src.write_text(
        src.read_text() + "    initial_load:\n      dumpling: export\n"
        "      options:\n        filetype: csv\n"
    )
    write_captures(
        root,
        "t",
        [
            (
                0,
                0,
                None,
                _row("UPDATE", ts(12), "o_1", {"id": "1", "v": "a2", "d": "1.5"}, {"v": "a"}),
            ),
            (0, 1, None, _row("INSERT", ts(13), "o_2", {"id": "3", "v": "c", "d": "0"})),
            (0, 2, None, _row("DELETE", ts(14), "o_2", {"id": "2", "v": "b", "d": "2.5"})),
            (0, 3, None, wm(ts(15))),
        ],
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda _: None) == 0
    final = root / "final"
    write_export(
        final,
        [(one, [{"id": 1, "v": "a2", "d": 1.5}]), (two, [{"id": 3, "v": "c", "d": 0.0}])],
        ts(15),
        flags,
    )
    # TiDB may show a zero as -0: an equal value, with other bits.
    data = final / "shop.o_2.000000000.csv"
    data.write_bytes(data.read_bytes().replace(b'"c",0', b'"c",-0'))
    assert b'"c",-0' in data.read_bytes()
    code, out, err = _verify(capsys, root, "--export", str(final), "--format", "json")
    assert code == 0, err
    (t,) = json.loads(out)["targets"]
    assert t["upstream_tables"] == ["shop.o_1", "shop.o_2"]
    assert t["rows"] == {"upstream": 2, "lake": 2} and t["columns"] == ["id", "v", "d"]

    # A key of one shard that the other lacks, and a value the load cannot type.
    bad = final / "shop.o_1.000000000.csv"
    bad.write_bytes(bad.read_bytes() + b'4,"d",1\r\nx,"e",1\r\n')
    code, out, err = _verify(capsys, root, "--export", str(final))
    assert code == 1
    assert "final/shop.o_1.000000000.csv:4: table shop.o_1: " in err, err
    assert "(target orders: the export's row cannot be typed" in err
    bad.write_bytes(bad.read_bytes().replace(b'x,"e",1\r\n', b""))
    code, out, err = _verify(capsys, root, "--export", str(final), "--format", "json")
    assert code == 2, err
    (t,) = json.loads(out)["targets"]
    assert t["differences"] == {"missing": 1, "extra": 0, "changed": 0}
    assert t["first_differences"] == [
        {
            "kind": "missing",
            "key": {"id": "4"},
            "columns": [],
            "upstream": {"id": "4", "v": "d", "d": "1.0"},
            "lake": None,
        }
    ]
    assert Decimal(t["rows"]["upstream"]) == 3

    # A table of the export routed to a target the lake has no table for: it differs.
    bad.write_bytes(bad.read_bytes().replace(b'4,"d",1\r\n', b""))
    write_export(final, [(_shard("p"), [{"id": 1, "v": "p", "d": None}])], ts(15), flags)
    (root / "tables" / "t.yml").write_text(
        'tables:\n  - upstream: "shop.o_*"\n    name: orders\n  - upstream: "shop.*"\n'
        '    name: "x_{table}"\n'
    )
    code, out, err = _verify(capsys, root, "--export", str(final), "--format", "json")
    assert code == 2, err
    orders, p = json.loads(out)["targets"]
    assert orders["name"] == "orders" and orders["equal"] is True
    assert p["name"] == "x_p" and p["lake_table"] is False and p["equal"] is False
    assert p["rows"] == {"upstream": 1, "lake": 0} and p["checksum"]["lake"] is None
