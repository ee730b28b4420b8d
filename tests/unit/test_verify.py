"""`ticdc-sync verify`, its pure half: which export and upstream tables each target is compared
with, which columns compare, which rows count per mode, the version read, the report."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ticdc_sync.codecs.dumpling_export import discover
from ticdc_sync.commands.cli import main
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import BadMessagePolicy, DumplingOptions, ExportFiletype, Mode
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.core.window import Marker
from ticdc_sync.ddl.create_table import GENERATED
from ticdc_sync.plan import build_plan
from ticdc_sync.plan.model import Load, LoadTable
from ticdc_sync.project import load_project
from ticdc_sync.read import as_of as ao
from ticdc_sync.read import verify as vf
from ticdc_sync.read import verify_report as vr

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
FINAL = SHOP / "expected" / "dumpling"
GENERATED_FILES = shutil.ignore_patterns("target", "warehouse")
CSV = DumplingOptions(filetype=ExportFiletype.CSV)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root, ignore=GENERATED_FILES)
    return root


def test_each_target_is_compared_with_the_export_tables_routed_into_it() -> None:
    project = load_project(SHOP)
    plan = build_plan(project)
    snapshot = discover(str(FINAL), "final", CSV).snapshot_ts
    checks, passed, absent = vf.checks(project, plan, (), str(FINAL))
    assert passed == () and absent == ()
    assert [c.target for c in checks] == [t.name for t in plan.targets]
    modes = {"canal": Mode.MIRROR, "debezium": Mode.SOFT_DELETE, "open": Mode.HISTORY}
    for c in checks:
        table = c.target.split("_", 1)[1]
        assert c.upstreams == (f"shop.{table}",) and c.not_in_export == ()
        assert c.mode is modes[c.source]
        assert c.tso == snapshot and c.load.snapshot_ts == snapshot
        assert c.load.options.filetype is ExportFiletype.CSV  # from the files' names
        assert [f.name for f in c.load.files] == [f"shop.{table}.000000000.csv"]
        assert c.keys == ("id",)  # every table of the example has the primary key `id`
    # Without --export: each source's initial_load, at its snapshot.
    initial, _, _ = vf.checks(project, plan, ("open_*",))
    loaded = discover(str(SHOP / "dumpling"), "dumpling", CSV).snapshot_ts
    assert [c.target for c in initial] == ["open_customers", "open_items", "open_orders"]
    assert {c.tso for c in initial} == {loaded} and loaded < snapshot
    assert {c.export.shown for c in initial} == {"dumpling"}


def test_a_target_gathering_shards_is_compared_with_their_union(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "tables" / "shop.yml").write_text(
        "tables:\n  - upstream: shop.*\n    source: canal\n    name: everything\n    keys: [id]\n"
    )
    project = load_project(root)
    checks, _, _ = vf.checks(
        project, build_plan(project), ("every*",), str(root / "expected/dumpling")
    )
    (c,) = checks
    assert c.upstreams == ("shop.customers", "shop.items", "shop.orders")
    # The columns compare over the union of the shards' columns.
    target = [(col.name, "string") for t in c.load.tables for col in t.schema.columns]
    target = list(dict.fromkeys(target)) + [("_commit_ts", "bigint")]
    cols = vf.columns(c, target)
    assert cols.names == tuple(n for n, _ in target[:-1])
    assert cols.keys == ("id",) and cols.only_upstream == () and cols.only_lake == ()


def test_bad_input_is_refused_naming_what_and_how(tmp_path: Path) -> None:
    project = load_project(SHOP)
    plan = build_plan(project)
    with pytest.raises(UserError, match=r"--tables nope\* matches no target \(targets: canal_"):
        vf.checks(project, plan, ("canal_*", "nope*"), str(FINAL))
    with pytest.raises(UserError, match=r"--export .*missing: no such folder \(hint: give"):
        vf.checks(project, plan, (), str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"metadata: no such file: not a finished Dumpling export"):
        vf.checks(project, plan, (), str(tmp_path / "empty"))
    root = _copy(tmp_path)
    src = root / "sources" / "ticdc.yml"
    src.write_text(
        src.read_text().replace(
            "    initial_load: {dumpling: dumpling, options: {filetype: csv}}\n", "", 1
        )
    )
    p2 = load_project(root)
    with pytest.raises(UserError, match=r"source canal has no `initial_load` export .*--export"):
        vf.checks(p2, build_plan(p2), ("canal_orders",))
    # A target neither the lake nor the export holds anything of is passed over.
    part = tmp_path / "part"
    part.mkdir()
    for f in FINAL.iterdir():
        if "customers" not in f.name and "items" not in f.name:
            shutil.copy(f, part / f.name)
    checks, passed, absent = vf.checks(project, plan, ("canal_*",), str(part))
    assert [c.target for c in checks] == ["canal_orders"]
    assert passed == (
        "canal_customers: no Delta table, and the export holds none of its upstream tables "
        "(shop.customers)",
        "canal_items: no Delta table, and the export holds none of its upstream tables "
        "(shop.items)",
    )
    assert absent == ()  # the example's history names no table dropped or renamed


def test_an_export_table_routed_to_a_target_the_lake_lacks_is_compared(tmp_path: Path) -> None:
    from testkit.dumpling import DumplingFlags, write_export

    folder = tmp_path / "export"
    shutil.copytree(FINAL, folder)
    extra = TableSchema("shop", "extra", (Column("k", "int", nullable=False),), ("k",))
    snapshot = discover(str(FINAL), "final", CSV).snapshot_ts
    write_export(folder, [(extra, [{"k": 1}])], snapshot, DumplingFlags(filetype="csv"))
    project = load_project(SHOP)
    checks, _, _ = vf.checks(project, build_plan(project), ("*_extra",), str(folder))
    assert [(c.target, c.mode, c.exists, c.keys, c.upstreams) for c in checks] == [
        ("canal_extra", Mode.MIRROR, False, ("k",), ("shop.extra",)),
        ("debezium_extra", Mode.SOFT_DELETE, False, ("k",), ("shop.extra",)),
        ("open_extra", Mode.HISTORY, False, ("k",), ("shop.extra",)),
    ]


def _check(mode: Mode, schema: TableSchema, keys: tuple[str, ...] = ("id",)) -> vf.Check:
    export = discover(str(FINAL), "final", CSV)
    load = Load(
        "final", str(FINAL), export.snapshot_ts, CSV, (LoadTable("d", "t", schema, "", ()),)
    )
    return vf.Check("t", "s", mode, True, keys, export, load, (("d", "t"),), BadMessagePolicy.FAIL)


SCHEMA = TableSchema(
    "d",
    "t",
    (Column("id", "int", nullable=False), Column("v", "varchar"), Column("g", "int")),
    ("id",),
    extra={GENERATED: "g"},
)


def test_which_columns_compare_per_mode() -> None:
    lake = [
        ("ID", "int"),  # names compare as MySQL's do
        ("v", "string"),
        ("g", "int"),
        ("old", "string"),
        ("_commit_ts", "bigint"),
    ]
    mirror = vf.columns(_check(Mode.MIRROR, SCHEMA), lake)
    assert mirror.compared == (("ID", "int"), ("v", "string"))
    assert mirror.keys == ("ID",)
    assert mirror.not_compared == (("g", "generated upstream: the export holds no values for it"),)
    assert mirror.only_lake == ("old",) and mirror.only_upstream == ()
    history = vf.columns(
        _check(Mode.HISTORY, SCHEMA),
        [*lake, ("_valid_from", "bigint"), ("_valid_to", "bigint"), ("_valid_from_at", "ts")],
    )
    assert history.names == ("ID", "v") and history.only_lake == ()
    assert dict(history.not_compared)["old"].startswith("not upstream at the TSO: a history")
    soft = vf.columns(_check(Mode.SOFT_DELETE, SCHEMA), [("id", "int"), ("_is_deleted", "x")])
    assert soft.names == ("id",) and soft.only_upstream == ("v",)
    keyless = vf.columns(_check(Mode.MIRROR, SCHEMA, keys=()), lake)
    assert keyless.keys == () and keyless.notes


def test_a_history_target_is_read_at_its_newest_applied_state_and_filtered() -> None:
    plan = build_plan(load_project(SHOP))
    history = next(t for t in plan.targets if t.mode is Mode.HISTORY)
    mirror = next(t for t in plan.targets if t.mode is Mode.MIRROR)

    def at(t, applied: int):
        return dataclasses.replace(t, exists=True, marker=Marker(applied, 0, 0, 1))

    assert vf.read_at(at(history, 900), 500) == 900  # every version it keeps, filtered at 500
    assert vf.read_at(at(history, 400), 500) == 500  # behind: at the export's TSO, or refused
    assert vf.read_at(at(mirror, 900), 500) == 500  # as of 500 (with the reader's merge)
    assert vf.read_at(history, 500) == 500  # no table yet


def test_live_rows_per_mode() -> None:
    assert vf.live_rows_sql(Mode.MIRROR, 5) is None
    assert vf.live_rows_sql(Mode.SOFT_DELETE, 5) == "NOT coalesce(`_is_deleted`, false)"
    assert vf.live_rows_sql(Mode.HISTORY, 5) == (
        "`_valid_from` <= 5 AND (`_valid_to` IS NULL OR `_valid_to` > 5)"
    )


def test_values_hash_normalised_and_checksums_wrap() -> None:
    assert "isnan(`d`)" in vf.normalised_sql("`d`", "double")
    assert vf.normalised_sql("`s`", "string") == "`s`"
    # A NULL and the value beside it never hash as the value moved.
    assert vf.row_hash_sql([("a", "int"), ("b", "int")]) == (
        "xxhash64(isnull(`a`), `a`, isnull(`b`), `b`)"
    )
    assert vf.checksum_text(None) == "0" * 16
    assert vf.checksum_text(-1) == "f" * 16
    assert vf.checksum_text(2**64 + 5) == f"{5:016x}"
    assert vf.shown_sql("`b`", "binary") == "concat('0x', hex(`b`))"


def valid(doc: dict) -> bool:
    """`doc` is valid against ticdc_sync/schemas/verify.schema.json (every error listed)."""
    import jsonschema

    schema = json.loads((REPO / "ticdc_sync" / "schemas" / "verify.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)
    ]
    assert not errors, errors
    return True


def _v(n: int, op: str, marker: Marker | None) -> ao.Version:
    return ao.Version(n, None, op, marker)


def test_verify_reads_the_commits_others_made_after_the_run() -> None:
    m1, m2 = Marker(10, 10, 0, 1), Marker(20, 20, 0, 1)
    vs = [_v(0, "CREATE TABLE", Marker()), _v(1, "MERGE", m1), _v(2, "UPDATE", None)]
    vs += [_v(3, "DELETE", None), _v(4, "MERGE", m2), _v(5, "DELETE", None)]
    v = ao.version_at(vs, 15)
    assert v is not None and v.version == 1
    # The user's UPDATE and DELETE on top of version 1, up to the run's next commit.
    assert ao.with_others(vs, v) == _v(3, "DELETE", m1)
    last = ao.version_at(vs, 25)
    assert last is not None and ao.with_others(vs, last) == _v(5, "DELETE", m2)
    assert ao.with_others(vs[:2], vs[1]) == vs[1]


def _result(equal: bool) -> vr.TableResult:
    c = _check(Mode.MIRROR, SCHEMA)
    cols = vf.columns(c, [("id", "int"), ("v", "string")])
    up = vr.Side(3, "00000000000000aa", ("0000000000000001", "0000000000000002"))
    if equal:
        return vr.TableResult(c, cols, up, up, dict.fromkeys(vf.KINDS, 0))
    lake = vr.Side(3, "00000000000000bb", ("0000000000000001", "0000000000000003"))
    first = (
        vr.Difference(vf.MISSING, (("id", "1"),), (), (("id", "1"), ("v", "a b")), None),
        vr.Difference(
            vf.CHANGED,
            (("id", "2"),),
            ("v",),
            (("id", "2"), ("v", "x")),
            (("id", "2"), ("v", None)),
        ),
    )
    return vr.TableResult(c, cols, up, lake, {vf.MISSING: 1, vf.EXTRA: 1, vf.CHANGED: 1}, first)


def test_the_report_names_the_keys_and_its_json_is_deterministic() -> None:
    same, diff = _result(True), _result(False)
    assert same.equal and not diff.equal and diff.differing_columns == ("v",)
    report = vr.Report((diff,), (), 2, vr.exports_of([diff]))
    lines = vr.render(report)
    assert lines[1:] == [
        "  t: DIFFERENT: checksum 00000000000000aa upstream, 00000000000000bb in the lake; "
        "values differ in v; 1 missing, 1 extra, 1 changed",
        '    missing id=1: upstream (id=1, v="a b"), not in the lake',
        "    changed id=2: v: upstream x, lake NULL",
        "    ... and 1 more (hint: --show N lists more)",
        "0 of 1 target(s) equal, 1 different",
    ]
    doc = vr.to_json(report)
    assert doc["equal"] is False and doc["targets"][0]["differences"] == {
        "missing": 1,
        "extra": 1,
        "changed": 1,
    }
    assert doc["targets"][0]["first_differences"][1] == {
        "kind": "changed",
        "key": {"id": "2"},
        "columns": ["v"],
        "upstream": {"id": "2", "v": "x"},
        "lake": {"id": "2", "v": None},
    }
    assert vr.json_text(report) == vr.json_text(vr.Report((diff,), (), 2, vr.exports_of([diff])))
    assert json.loads(vr.json_text(report)) == doc
    assert valid(doc) and valid(vr.to_json(vr.Report((same,), (), 2, vr.exports_of([same]))))


def test_a_target_absent_at_the_tso_is_listed_and_does_not_differ() -> None:
    same = _result(True)
    export = same.check.export
    gone = ao.Absent("old", export.snapshot_ts, "d.old renamed to d.t at TSO 5", 5, None)
    absent = (vf.AbsentTarget("old", "s", export, gone),)
    report = vr.Report((same,), (), 2, vr.exports_of([same], absent), absent)
    assert report.equal
    lines = vr.render(report)
    assert lines[1].startswith("  old: absent at TSO ") and lines[1].endswith(
        ": its upstream table did not exist then: d.old renamed to d.t at TSO 5"
    )
    assert lines[2].startswith("  t: equal (3 rows, checksum ")
    assert lines[-1] == (
        "1 of 1 target(s) equal; 1 absent at the export's TSO (their upstream tables did not "
        "exist then)"
    )
    doc = vr.to_json(report)
    assert valid(doc) and doc["equal"] is True
    assert doc["absent"] == [
        {
            "name": "old",
            "source": "s",
            "export": "final",
            "tso": export.snapshot_ts,
            "why": "d.old renamed to d.t at TSO 5",
            "absent_since": 5,
            "absent_until": None,
        }
    ]


def test_cli_refuses_a_negative_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--project", str(SHOP), "--show", "-1"]) == 1
    assert "--show -1: give a number of keys per target, 0 or more" in capsys.readouterr().err
