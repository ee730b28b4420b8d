"""Reading the lake as of a TSO (`spark.as_of`, `snapshot`) against a Python model of the
upstream at that TSO.

A generated history (testkit.history) has transactions across two and three tables,
dispatched over three partitions by index value, with replays and one ADD COLUMN: it is
applied by two runs and its last third is only staged (not applied). At many TSOs (before
the first change, between and on the applies, inside the staged window, the resolved TSO)
every target read as of the TSO equals the model's table at it, with its columns in order,
the ADD COLUMN replayed by the read where it lies between a target's version and the TSO.
TSOs beyond the resolved one are refused.

A scripted history creates two tables late (one by RENAME TABLE, one by CREATE TABLE) and
drops one: a read of every target as of a TSO before, between or after them answers for each
target whose table existed then and names the others with why (`absent`), as `snapshot`,
`register_views` and `status` do; a CREATE TABLE not applied yet refuses a read after it.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from decimal import Decimal

import pytest

from testkit.history import HistoryConfig, Scripted, encode, generate
from tests.spark.engine_harness import collect_each, load, make_project, write_captures
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.commands import cli
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.read import snapshot as snap
from ticdc_sync.spark import runner
from ticdc_sync.spark.as_of import as_of, register_views
from ticdc_sync.spark.engine import SparkEngine
from ticdc_sync.spark.staging.state import State

pytestmark = pytest.mark.spark


def _records(chunk):
    return [(r.partition, r.offset, r.key, r.value) for r in chunk]


def _stage_only(spark, project) -> None:
    """Stage what the captures hold after the staged positions, without applying it."""
    from ticdc_sync.warehouse.locations import warehouse_path

    engine = SparkEngine(project, spark, State(spark, warehouse_path(project)), out=lambda s: None)
    for source in project.sources:
        out = engine.stage(source)
        assert out.staged > 0 and not out.errors


def test_as_of_equals_upstream_at_many_tsos(spark, tmp_path):
    history = generate(
        HistoryConfig(seed=7, transactions=60, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "open-protocol", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path,
        protocol="open-protocol",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    project = load(root)
    # Two runs, then the rest only staged; the ADD COLUMN is in the staged rest.
    k = next(i for i, r in enumerate(enc.records) if r.value and b"ADD COLUMN" in r.value)
    assert k > 10
    chunks = [enc.records[: k // 2], enc.records[k // 2 : k], enc.records[k:]]
    for chunk in chunks[:2]:
        write_captures(root, "cdc", _records(chunk))
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
    applied = {t.name: t.applied_ts for t in snap.snapshot(project, "latest").targets}
    write_captures(root, "cdc", _records(chunks[2]))
    _stage_only(spark, project)

    resolved = history.resolved_ts()
    assert resolved is not None
    (ddl,) = [s for s in history.steps if s.kind == "ddl"]
    txns = sorted(
        {s.commit_ts for s in history.steps if s.kind == "txn" and s.commit_ts <= resolved}
    )
    tsos = {txns[0] - 1, resolved, ddl.commit_ts - 1, ddl.commit_ts, *txns[::7]}
    tsos |= {ts for ts in applied.values() if ts is not None}
    tsos |= {ts + 1 for ts in applied.values() if ts is not None}
    assert max(applied.values()) < resolved  # the last third is staged only
    checks = []  # (what, the truth, schema, the read)
    merged_reads, across_ddl = 0, 0
    for tso in sorted(t for t in tsos if t <= resolved):
        truth, schemas = history.truth(tso)
        read = as_of(spark, project, tso)
        assert read.at.tso == tso
        for qualified, rows in truth.items():
            schema = schemas[qualified]
            name = schema.table
            df = read.frames[name]
            assert [f.name for f in df.schema.fields if f.name != "_commit_ts"] == [
                c.name for c in schema.columns
            ], f"{qualified} as of {tso}"
            checks.append((f"{qualified} as of {tso}", rows, schema, df))
            merged_reads += read.pending[name] > 0
            # The ADD COLUMN replayed in the read: between the version and the TSO.
            across_ddl += name == ddl.ddl.table and read.applied[name] < ddl.commit_ts <= tso
    # The reads of a table as of several TSOs are collected in one Spark job.
    got = collect_each([df for *_, df in checks])
    for (what, rows, schema, _), read_rows in zip(checks, got, strict=True):
        assert_table_equals(read_rows, rows, schema, what)
    assert len(checks) > 20 and merged_reads > 5 and across_ddl > 0


def test_latest_views_and_refusals(spark, tmp_path):
    history = generate(
        HistoryConfig(seed=11, transactions=30, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, "open-protocol", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path,
        protocol="open-protocol",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    project = load(root)
    first, second = enc.chunks(2)
    write_captures(root, "cdc", _records(first))
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    write_captures(root, "cdc", _records(second))
    _stage_only(spark, project)
    resolved = history.resolved_ts()
    read = as_of(spark, project, "latest")
    assert read.at.tso == resolved and read.at.held_by == "src"
    names = register_views(spark, read.frames)
    truth, schemas = history.truth(resolved)
    for qualified, rows in truth.items():
        schema = schemas[qualified]
        assert schema.table in names
        keys = ", ".join(f"`{k}`" for k in schema.handle_key())
        got = [
            r.asDict() for r in spark.sql(f"SELECT * FROM {schema.table} ORDER BY {keys}").collect()
        ]
        assert_table_equals(got, rows, schema, f"view {qualified}")
    # Beyond what is resolved: refused, naming the source.
    with pytest.raises(UserError, match="newer than source src's resolved TSO"):
        as_of(spark, project, resolved + 1)
    # The snapshot command's view: not exact while changes are staged after the versions.
    s = snap.snapshot(project, "latest")
    assert s.at.tso == resolved
    assert any(not t.exact and t.pending > 0 for t in s.targets)
    # After a run applies them, every target is exact at the resolved TSO.
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    s = snap.snapshot(project, resolved)
    assert all(t.exact for t in s.targets), snap.render(s)
    # `ticdc-sync snapshot --format json`, and a plain Delta reader at the version it names.
    import polars as pl

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(
            ["snapshot", "--project", str(root), "--as-of", str(resolved), "--format", "json"]
        )
    assert code == 0
    body = json.loads(out.getvalue())
    assert body["as_of"]["tso"] == resolved and body["exact"]
    for t in body["targets"]:
        assert t["available"] and t["exact"] and "VERSION AS OF" in t["sql"]
        schema = next(sc for sc in schemas.values() if sc.table == t["name"])
        keys = list(schema.handle_key())
        rows = pl.read_delta(t["location"], version=t["version"]).sort(keys).to_dicts()
        want = truth[schema.qualified]
        assert [tuple(r[k] for k in keys) for r in rows] == [
            tuple(r[k] for k in keys) for r in want
        ]
        assert [r["_commit_ts"] for r in rows] == [r["_commit_ts"] for r in want]


def test_a_run_records_a_sync_point_readers_read_with_time_travel(spark, tmp_path):
    from ticdc_sync.commands import status
    from ticdc_sync.read import sync_points

    history = generate(
        HistoryConfig(seed=5, transactions=30, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, "open-protocol", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path,
        protocol="open-protocol",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
        defaults="sync_points: every 1m\n",
    )
    project = load(root)
    first, second = enc.chunks(2)
    write_captures(root, "cdc", _records(first))
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    write_captures(root, "cdc", _records(second))
    _stage_only(spark, project)  # staged after the sync point: the versions stay exact
    point = sync_points.newest(project)
    assert point is not None and point["source"] == "src"
    tso = point["tso"]
    truth, schemas = history.truth(tso)
    assert set(point["targets"]) == {s.table for s in schemas.values()}
    s = snap.snapshot(project, tso)
    for t in s.targets:
        assert t.exact and t.version == point["targets"][t.name]["version"], snap.render(s)
        schema = next(sc for sc in schemas.values() if sc.table == t.name)
        keys = list(schema.handle_key())
        df = spark.read.format("delta").option("versionAsOf", t.version).load(t.location)
        got = [r.asDict() for r in df.orderBy(*keys).collect()]
        assert_table_equals(got, truth[schema.qualified], schema, f"{t.name} at sync point")
    rep = status.report(project)
    assert rep["sync_point"]["tso"] == tso and rep["consistent_read"]["tso"] > tso


C = Column


def _table(name: str, *cols: Column) -> TableSchema:
    return TableSchema("shop", name, (C("id", "int", nullable=False), *cols), ("id",))


CUSTOMERS = _table("customers", C("name", "varchar", length=20), C("tier", "int"))
ITEMS = _table("items", C("sku", "char", length=8), C("price", "decimal", precision=10, scale=2))
ORDERS = _table("orders", C("customer", "int"), C("note", "varchar", length=32))
LATE = _table("late", C("v", "varchar", length=20))


def test_targets_whose_tables_did_not_exist_at_the_tso_are_absent_not_refused(spark, tmp_path):
    """Tables created late (clients by RENAME TABLE customers TO clients, orders by CREATE
    TABLE) and one dropped (items): a read of every target as of a TSO before, between and
    after those DDL answers for each target whose table existed then, equal to the upstream,
    and names the others with when their table was created, renamed or dropped. Two runs
    apply the first part, the rest (the DROP among it) is only staged; then a CREATE TABLE
    staged but not applied holds status's consistent read and refuses a read after it, until
    a run creates the target."""
    u = Scripted("shop", partitions=2, seed=41, replay_probability=0.4)
    born = {"customers": u.create(CUSTOMERS), "items": u.create(ITEMS)}
    u.insert("customers", {"id": 1, "name": "ann", "tier": 1}, {"id": 2, "name": "bob", "tier": 2})
    u.insert("items", {"id": 1, "sku": "a1", "price": Decimal("1.50")}, {"id": 2, "sku": "b2"})
    u.watermark()
    u.update("customers", 2, tier=3)
    u.delete("items", 1)
    u.watermark()
    applied_first = u.history()
    renamed = u.rename("customers", "clients")
    u.insert("clients", {"id": 3, "name": "cy", "tier": 1})
    u.watermark()
    created = u.create(ORDERS)
    u.insert("orders", {"id": 1, "customer": 3, "note": "first"})
    u.update("clients", 1, name="ann b")
    u.watermark()
    applied_second = u.history()
    u.insert("orders", {"id": 2, "customer": 1, "note": "second"})
    u.update("items", 2, price=Decimal("2.25"))
    dropped = u.drop("items")
    u.update("orders", 1, note="changed")
    resolved = u.watermark()
    staged = u.history()
    late = u.create(LATE)
    u.insert("late", {"id": 1, "v": "late one"})
    u.update("clients", 3, tier=2)
    end = u.watermark()
    history = u.history()
    phases = [encode(h, "canal-json", "cdc").records for h in (applied_first, applied_second)]
    phases += [encode(h, "canal-json", "cdc").records for h in (staged, history)]
    for shorter, longer in itertools.pairwise(phases):
        assert longer[: len(shorter)] == shorter  # each phase's records go on from the last
    chunks = [b[len(a) :] for a, b in zip([[], *phases[:-1]], phases, strict=True)]

    root = make_project(tmp_path, protocol="canal-json", topic="cdc")
    project = load(root)
    for chunk in chunks[:2]:
        write_captures(root, "cdc", _records(chunk))
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
    write_captures(root, "cdc", _records(chunks[2]))
    _stage_only(spark, project)

    everyone = {"customers", "items", "clients", "orders"}

    # Why each target is absent at `tso` (None: its table existed then).
    def why(name: str, tso: int) -> str | None:
        if name in born and tso < born[name]:
            return f"shop.{name} created at TSO {born[name]}"
        if name == "customers" and tso >= renamed:
            return f"shop.customers renamed to shop.clients at TSO {renamed}"
        if name == "clients" and tso < renamed:
            return f"shop.clients renamed in from shop.customers at TSO {renamed}"
        if name == "orders" and tso < created:
            return f"shop.orders created at TSO {created}"
        if name == "items" and tso >= dropped:
            return f"shop.items dropped at TSO {dropped}"
        return None

    ddl = [s.commit_ts for s in history.steps if s.kind == "ddl" and s.commit_ts <= resolved]
    txns = [s.commit_ts for s in history.steps if s.kind == "txn" and s.commit_ts <= resolved]
    tsos = sorted({*ddl, *(ts - 1 for ts in ddl), *txns[::3], resolved})
    checks = []  # (what, the truth, schema, the read)
    merged = 0
    for tso in tsos:
        truth, schemas = history.truth(tso)
        read = as_of(spark, project, tso)
        assert read.at.tso == tso
        present = {schemas[q].table for q in truth}
        assert set(read.frames) == present, f"as of {tso}"
        assert {n: a.why for n, a in read.absent.items()} == {
            n: why(n, tso) for n in everyone - present
        }, f"as of {tso}"
        assert all(why(n, tso) is None for n in present), f"as of {tso}"
        for qualified, rows in truth.items():
            schema = schemas[qualified]
            df = read.frames[schema.table]
            assert [f.name for f in df.schema.fields if f.name != "_commit_ts"] == [
                c.name for c in schema.columns
            ], f"{qualified} as of {tso}"
            checks.append((f"{qualified} as of {tso}", rows, schema, df))
            merged += read.pending[schema.table] > 0
    got = collect_each([df for *_, df in checks])
    for (what, rows, schema, _), read_rows in zip(checks, got, strict=True):
        assert_table_equals(read_rows, rows, schema, what)
    assert len(checks) > 20 and merged > 3

    # One absent target asked for alone: an empty read naming it; its frame, a clear error.
    read = as_of(spark, project, renamed - 1, ["clients"])
    assert dict(read.frames) == {} and set(read.absent) == {"clients"}
    assert read.absent["clients"].created_ts == renamed
    with pytest.raises(
        KeyError, match=f"target clients did not exist upstream at TSO {renamed - 1}"
    ):
        read.frames["clients"]

    # Views: only the present targets; a view an earlier read left of an absent one is dropped.
    assert sorted(register_views(spark, as_of(spark, project, renamed - 1))) == [
        "customers",
        "items",
    ]
    views = register_views(spark, as_of(spark, project, resolved))
    assert sorted(views) == ["clients", "orders"]
    assert sorted(views.absent) == ["customers", "items"]
    assert [spark.catalog.tableExists(n) for n in ("clients", "orders", "customers", "items")] == [
        True,
        True,
        False,
        False,
    ]
    truth, schemas = history.truth(resolved)
    for name in ("clients", "orders"):
        got_rows = [r.asDict() for r in spark.sql(f"SELECT * FROM {name}").collect()]
        assert_table_equals(got_rows, truth[f"shop.{name}"], schemas[f"shop.{name}"], name)

    # `ticdc-sync snapshot`: the absent targets with why, the others with their versions.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(
            ["snapshot", "--project", str(root), "--as-of", str(created - 1), "--format", "json"]
        )
    assert code == 0
    body = {t["name"]: t for t in json.loads(out.getvalue())["targets"]}
    assert body["orders"]["absent"] and body["orders"]["absent_until"] == created
    assert body["orders"]["reason"] == f"shop.orders created at TSO {created}"
    assert body["customers"]["absent"] and body["customers"]["absent_since"] == renamed
    assert body["clients"]["available"] and body["items"]["available"]
    text = snap.render(snap.snapshot(project, created - 1))
    assert (
        "  orders: absent at TSO, nothing to read: its upstream table did not exist then: "
        f"shop.orders created at TSO {created}"
    ) in text

    # status: the staged DROP of items holds nothing (a read after it leaves items out).
    from ticdc_sync.commands import status

    rep = status.report(project)["consistent_read"]
    assert rep["tso"] == resolved, rep
    assert set(rep["absent"]) == {"customers", "items"}

    # A CREATE TABLE staged, not applied: the table exists from it on, the target does not
    # yet; reads up to just before it answer, later ones refuse until a run creates it.
    write_captures(root, "cdc", _records(chunks[3]))
    _stage_only(spark, project)
    rep = status.report(project)["consistent_read"]
    assert (rep["tso"], rep["held_by"]) == (
        late - 1,
        "target late: not created yet (a run creates it)",
    )
    read = as_of(spark, project, late - 1)
    assert read.absent["late"].why == f"shop.late created at TSO {late}"
    with pytest.raises(UserError, match="target late has no Delta table yet, though its upstream"):
        as_of(spark, project, end)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert status.report(project)["consistent_read"]["tso"] == end
    read = as_of(spark, project, end)
    truth, schemas = history.truth(end)
    assert set(read.frames) == {"clients", "orders", "late"}
    assert set(read.absent) == {"customers", "items"}
    for q, rows in truth.items():
        got_rows = [r.asDict() for r in read.frames[schemas[q].table].collect()]
        assert_table_equals(got_rows, rows, schemas[q], f"{q} as of {end}")
