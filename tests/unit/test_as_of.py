"""The pure part of reading as of a TSO (`as_of`): what a request means, which version holds
the state at or before it, which targets are absent at it (their upstream tables did not
exist then), and the refusals."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Defaults, Output, Project, Protocol, Source, TableEntry
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.ddl import parse_schema_sql
from ticdc_sync.ddl.timeline import Timeline
from ticdc_sync.ddl.timeline import build as build_timeline
from ticdc_sync.plan.model import OP_RECORD, OP_SQL
from ticdc_sync.read import as_of as ao


def _meta(m: Marker) -> str:
    return m.to_json()


def test_parse_tso_time_and_latest():
    assert ao.parse_as_of(455000000000000000) == 455000000000000000
    assert ao.parse_as_of("455000000000000000") == 455000000000000000
    assert ao.parse_as_of(" Latest ") == ao.LATEST
    when = dt.datetime(2026, 11, 26, 22, 45, tzinfo=dt.timezone.utc)
    tso = ao.parse_as_of("2026-11-26T22:45:00Z")
    assert tso == int(when.timestamp() * 1000) << 18
    assert ao.parse_as_of("2026-11-26 22:45:00") == tso  # UTC unless it says otherwise
    assert ao.parse_as_of("2026-11-26T23:45:00+01:00") == tso
    assert ao.parse_as_of(when) == tso
    assert ao.time_of_tso(tso + 5) == when  # the logical part is below a millisecond
    with pytest.raises(UserError, match="neither a TSO"):
        ao.parse_as_of("yesterday")
    with pytest.raises(UserError, match="not a TSO"):
        ao.parse_as_of(-1)


def test_resolve_latest_names_the_source_holding_it_back():
    at = ao.resolve("latest", {"a": 900, "b": 700})
    assert (at.tso, at.held_by) == (700, "b")
    assert ao.resolve(650, {"a": 900, "b": 700}).tso == 650
    with pytest.raises(UserError, match="newer than source b's resolved TSO 700"):
        ao.resolve(800, {"a": 900, "b": 700})
    with pytest.raises(UserError, match="source a has no resolved TSO"):
        ao.resolve("latest", {"a": -1, "b": 700})


def test_versions_inherit_markers_only_over_commits_that_keep_rows():
    commits = [
        {"version": 0, "operation": "CREATE TABLE"},
        {"version": 1, "operation": "MERGE", "userMetadata": _meta(Marker(100))},
        {"version": 2, "operation": "OPTIMIZE"},
        {"version": 3, "operation": "MERGE", "userMetadata": _meta(Marker(200))},
        {"version": 4, "operation": "DELETE"},  # a user's: rows changed, state unknown
        {"version": 5, "operation": "VACUUM END"},
    ]
    vs = ao.versions(reversed(commits))
    assert [v.marker for v in vs] == [Marker(), Marker(100), Marker(100), Marker(200), None, None]
    assert ao.version_at(vs, 50).version == 0
    assert ao.version_at(vs, 150).version == 2
    assert ao.version_at(vs, 10**9).version == 3
    assert ao.version_at(vs, 150, readable_from=3) is None
    # A gap in the log (entries expired): what the first listed commit inherits is unknown.
    gap = ao.versions([commits[1], {"version": 7, "operation": "OPTIMIZE"}])
    assert gap[1].marker is None


def test_a_version_with_a_ddl_after_the_tso_or_half_done_is_not_used():
    # A DDL moved ahead of its rows (fuse_additive) commits before them: applied ts stays.
    assert not ao.usable(Marker(100, ddl_ts=150, ddl_part=0, ddl_parts=1), 120)
    assert ao.usable(Marker(100, ddl_ts=150, ddl_part=0, ddl_parts=1), 150)
    # The first of two parts of a DDL: the table is half changed.
    assert not ao.usable(Marker(149, ddl_ts=150, ddl_part=0, ddl_parts=2), 200)
    assert ao.usable(Marker(150, ddl_ts=150, ddl_part=1, ddl_parts=2), 200)
    assert not ao.usable(None, 200)


def test_staging_floor_refuses_trimmed_changes():
    ao.staging_floor_check("t", "s", applied_ts=500, floor=400, tso=900)
    ao.staging_floor_check("t", "s", applied_ts=300, floor=400, tso=300)  # exact: no change
    with pytest.raises(UserError, match="older than what is still readable for target t"):
        ao.staging_floor_check("t", "s", applied_ts=300, floor=400, tso=900)


def test_tally_keeps_how_far_it_was_trimmed():
    from ticdc_sync.core.staged import SourceTally, from_user_metadata, to_user_metadata

    t = SourceTally()
    assert (
        "trimmed" not in json.loads(to_user_metadata({"s": t}))["ticdc_sync_staged"]["sources"]["s"]
    )
    t.trimmed = 1234
    back = from_user_metadata(to_user_metadata({"s": t}))
    assert back is not None and back["s"].trimmed == 1234 and back["s"].copy().trimmed == 1234


def _ddl(ts: int, op: str):
    return NS(commit_ts=ts, parts=(NS(op=op),))


def test_newest_readable_stops_before_an_unapplied_schema_change():
    # An index: passed over.
    a = NS(name="a", source="s", upstreams=(), exists=True, pending=(_ddl(500, OP_RECORD),))
    b = NS(name="b", source="s", upstreams=(), exists=True, pending=(_ddl(800, OP_SQL),))
    assert ao.newest_readable({"s": 900, "t": 1000}, [a], {}) == (900, "source s's resolved TSO")
    assert ao.newest_readable({"s": 900}, [a, b], {}) == (
        799,
        "target b: DDL at commit_ts 800 not applied yet",
    )
    assert ao.newest_readable({"s": -1}, [a], {}) == (None, "source s has nothing resolved")


def _project() -> Project:
    seeds = {
        (s.db, s.table): s
        for s in parse_schema_sql("CREATE TABLE seeded (id INT PRIMARY KEY);", "shop", "x.sql")
    }
    return Project(
        name="p",
        root=Path("."),
        output=Output("dev"),
        defaults=Defaults(),
        sources=(Source("src", Protocol.CANAL_JSON, ("t",)),),
        tables=(TableEntry("shop.*", "{table}"),),
        seed_schemas=seeds,
    )


def _history() -> Timeline:
    """customers and items from the start; customers renamed to clients at 30, orders created
    at 40, items dropped at 50 and created again at 60; `seeded` known from a seed and an
    ALTER only; `lost` dropped by a DDL that cannot be replayed (its schema is unknown)."""
    sqls = [
        (10, "customers", "CREATE TABLE shop.customers (id INT PRIMARY KEY)"),
        (11, "items", "CREATE TABLE shop.items (id INT PRIMARY KEY)"),
        (30, "clients", "RENAME TABLE shop.customers TO shop.clients"),
        (40, "orders", "CREATE TABLE shop.orders (id INT PRIMARY KEY)"),
        (50, "items", "DROP TABLE shop.items"),
        (60, "items", "CREATE TABLE shop.items (id INT PRIMARY KEY, v INT)"),
        (70, "seeded", "ALTER TABLE shop.seeded ADD COLUMN x INT"),
        (80, "lost", "DROP TABLE shop.lost"),
    ]
    return build_timeline(_project(), "src", [DdlEvent("shop", t, ts, sql) for ts, t, sql in sqls])


def _target(name: str, *tables: str, exists: bool = True, pending=()):
    ups = tuple(("shop", x) for x in tables or (name,))
    return NS(name=name, source="src", upstreams=ups, exists=exists, pending=pending)


def test_a_target_whose_tables_did_not_exist_at_the_tso_is_absent_with_why():
    tl = _history()

    def absent(target, tso: int):
        return ao.absent_at(target, tl, tso)

    clients, customers = _target("clients"), _target("customers")
    orders, items = _target("orders"), _target("items")
    # Created late by a RENAME TABLE: absent before it, there from its commit_ts on.
    a = absent(clients, 29)
    assert a is not None and (a.gone_ts, a.created_ts) == (None, 30)
    assert a.why == "shop.clients renamed in from shop.customers at TSO 30"
    assert a.message().startswith("target clients did not exist upstream at TSO 29 (")
    assert absent(clients, 30) is None
    # Its old name is gone from the rename on.
    assert absent(customers, 29) is None
    a = absent(customers, 30)
    assert a is not None and a.why == "shop.customers renamed to shop.clients at TSO 30"
    assert (a.gone_ts, a.created_ts) == (30, None)
    # Created late by a CREATE TABLE; before the first DDL of the history too.
    assert absent(orders, 39).why == "shop.orders created at TSO 40"
    assert absent(orders, 5).created_ts == 40
    assert absent(orders, 40) is None
    # Dropped, then created again.
    assert absent(items, 49) is None
    a = absent(items, 55)
    assert a is not None and a.why == "shop.items dropped at TSO 50 (created again at TSO 60)"
    assert (a.gone_ts, a.created_ts) == (50, 60)
    assert absent(items, 60) is None
    # Nothing says a seeded table did not exist before its first DDL: it is read (and a
    # missing version refuses that read); a DDL not replayed still drops by its text.
    assert absent(_target("seeded"), 5) is None
    assert absent(_target("lost"), 79) is None
    assert absent(_target("lost"), 80).why == "shop.lost dropped at TSO 80"
    # Shards merged into one target: absent only while none of its tables exists.
    merged = _target("both", "customers", "orders")
    assert absent(merged, 35).why == (
        "shop.customers renamed to shop.clients at TSO 30; shop.orders created at TSO 40"
    )
    assert absent(merged, 25) is None and absent(merged, 45) is None


def test_a_target_that_existed_without_a_readable_version_still_refuses():
    oldest = ao.Version(3, None, "MERGE", Marker(300))
    err = str(ao.no_version("clients", 250, oldest))
    assert "older than every readable version of target clients, although its upstream " in err
    assert "oldest version reachable, 3, holds applied ts 300" in err
    assert "hint: read at a TSO at or after 300" in err


def test_newest_readable_passes_targets_absent_then_and_waits_for_created_ones():
    tl = _history()
    # items has not applied its DROP: a read after it leaves items out, so it holds nothing.
    items = _target("items", pending=(_ddl(50, OP_SQL),))
    assert ao.newest_readable({"src": 55}, [items], {"src": tl}) == (
        55,
        "source src's resolved TSO",
    )
    # orders is not created yet: a read as of 40 or later needs it; before, it is absent.
    orders = _target("orders", exists=False, pending=(_ddl(40, OP_SQL),))
    assert ao.newest_readable({"src": 55}, [items, orders], {"src": tl}) == (
        39,
        "target orders: not created yet (a run creates it)",
    )
    # A target whose table exists from the start and that no run has created: no TSO.
    seeded = _target("seeded", exists=False)
    assert ao.newest_readable({"src": 55}, [seeded], {"src": tl}) == (
        None,
        "target seeded: not created yet (a run creates it)",
    )


def test_versions_lost_to_vacuum_and_log_cleanup_are_not_reachable(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from ticdc_sync.core.lake import LakeTable

    path = str(tmp_path / "t")
    conf = {"delta.logRetentionDuration": "interval 0 seconds"}
    write_deltalake(path, pa.table({"a": [1]}), configuration=conf)
    write_deltalake(path, pa.table({"a": [2]}), mode="overwrite")
    assert LakeTable(path).oldest_reachable() == 0
    assert LakeTable(path).files_present(0)
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    table = LakeTable(path)
    assert not table.files_present(0) and table.files_present(1)
    # Log entries before a checkpoint expire: versions before it cannot be rebuilt.
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, pa.table({"a": [3]}), mode="append")
    DeltaTable(path).cleanup_metadata()
    table = LakeTable(path)
    newest_checkpoint = 3  # the two writes, VACUUM START and VACUUM END
    assert table.oldest_reachable() == newest_checkpoint
    assert min(int(c["version"]) for c in table.commits()) == newest_checkpoint


def test_a_read_replays_add_column_only():
    from types import SimpleNamespace as NS

    from ticdc_sync.ddl.changes import AddColumn, DropColumn
    from ticdc_sync.plan.model import OP_BACKFILL, OP_REBUILD, OP_RECORD, OP_SQL

    add = AddColumn("c", "STRING", backfill_sql="'d1'")
    apply, skip = NS(action="apply"), NS(action="skip")

    def ddl(changes, ops):
        return NS(
            steps=tuple(NS(change=c, decision=d) for c, d in changes), parts=[NS(op=o) for o in ops]
        )

    assert ao._added_columns(ddl([], [OP_RECORD])) == ()
    assert ao._added_columns(ddl([(add, apply)], [OP_SQL, OP_BACKFILL])) == (add,)
    assert ao._added_columns(ddl([(add, apply), (DropColumn("x"), skip)], [OP_SQL])) == (add,)
    assert ao._added_columns(ddl([(DropColumn("x"), apply)], [OP_SQL])) is None
    assert ao._added_columns(ddl([(add, NS(action="rebuild"))], [OP_REBUILD])) is None
