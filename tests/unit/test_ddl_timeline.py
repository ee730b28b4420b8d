"""The DDL timeline: one replay of a source's DDL over its tables, whatever the target order."""

from __future__ import annotations

from pathlib import Path

from ticdc_sync.core.model import (
    DdlOverride,
    Defaults,
    Output,
    OverrideAction,
    Project,
    Protocol,
    Source,
    TableEntry,
)
from ticdc_sync.core.upstream import Version, key
from ticdc_sync.core.window import DdlEvent
from ticdc_sync.ddl import parse_schema_sql
from ticdc_sync.ddl.timeline import build


def project(seed_sql: str = "", overrides: tuple[DdlOverride, ...] = ()) -> Project:
    seeds = {(s.db, s.table): s for s in parse_schema_sql(seed_sql, "shop", "x.sql")}
    return Project(
        name="p",
        root=Path("."),
        output=Output("dev"),
        defaults=Defaults(),
        sources=(Source("src", Protocol.CANAL_JSON, ("t",)),),
        tables=(TableEntry("shop.*", "{table}"),),
        seed_schemas=seeds,
        ddl_overrides=overrides,
    )


def ev(ts: int, tbl: str, sql: str, offset: int = 0) -> DdlEvent:
    return DdlEvent("shop", tbl, ts, sql, offset=offset)


def cols(schema) -> list[str]:
    return [c.name for c in schema.columns]


def test_rename_to_a_name_that_sorts_first_sees_the_old_schema() -> None:
    t = build(
        project(),
        "src",
        [
            ev(10, "customers", "CREATE TABLE shop.customers (id INT PRIMARY KEY, n INT)"),
            ev(20, "customers", "ALTER TABLE shop.customers ADD COLUMN e INT"),
            ev(30, "clients", "RENAME TABLE shop.customers TO shop.clients"),
        ],
    )
    assert all(g.problem is None for g in t.groups)
    assert cols(t.at("shop", "clients", 30)) == ["id", "n", "e"]
    assert t.at("shop", "customers", 30) is None
    assert cols(t.at("shop", "customers", 29)) == ["id", "n", "e"]
    assert t.groups[-1].renames() == {key("shop", "customers"): ("shop", "clients")}


def test_chain_and_swap_in_one_commit_ts_compose() -> None:
    seed = (
        "CREATE TABLE a (id INT PRIMARY KEY, x INT);"
        "CREATE TABLE b (id INT PRIMARY KEY, y INT, z INT);"
    )
    t = build(
        project(seed),
        "src",
        [
            ev(50, "tmp", "RENAME TABLE shop.a TO shop.tmp", 1),
            ev(50, "a", "RENAME TABLE shop.b TO shop.a", 2),
            ev(50, "b", "RENAME TABLE shop.tmp TO shop.b", 3),
        ],
    )
    (g,) = t.groups
    assert g.problem is None
    assert g.renames() == {key("shop", "a"): ("shop", "b"), key("shop", "b"): ("shop", "a")}
    assert cols(t.at("shop", "a", 50)) == ["id", "y", "z"]
    assert cols(t.at("shop", "b", 50)) == ["id", "x"]
    assert t.at("shop", "tmp", 50) is None
    # One statement with the three pairs gives the same result.
    t2 = build(project(seed), "src", [ev(50, "b", "RENAME TABLE a TO tmp, b TO a, tmp TO b")])
    assert t2.groups[0].renames() == g.renames()
    assert cols(t2.at("shop", "a", 50)) == ["id", "y", "z"]


def test_chain_over_two_commits() -> None:
    seed = "CREATE TABLE a (id INT PRIMARY KEY);"
    t = build(
        project(seed),
        "src",
        [
            ev(60, "c", "RENAME TABLE shop.b TO shop.c"),
            ev(50, "b", "RENAME TABLE shop.a TO shop.b"),
        ],
    )
    assert [g.commit_ts for g in t.groups] == [50, 60]
    assert t.at("shop", "c", 60) is not None and t.at("shop", "b", 60) is None
    assert t.spans("shop", "b", 0, 70)[1][2] is not None


def test_unparsed_ddl_is_its_own_kind_and_an_override_reads_it() -> None:
    seed = "CREATE TABLE orders (id INT PRIMARY KEY);"
    sql = "ALTER TABLE shop.orders ADD COLUMN c INT, ALGORITHM=INSTANT, LOCK=NONE, FROBNICATE"
    t = build(project(seed), "src", [ev(70, "orders", sql)])
    (change,) = t.groups[0].effects[0].changes
    assert change.kind.value == "unparsed"
    assert cols(t.at("shop", "orders", 70)) == ["id"]
    fixed = DdlOverride(
        "shop.orders", 70, OverrideAction.APPLY_AS, "ALTER TABLE shop.orders ADD COLUMN c INT"
    )
    t = build(project(seed, (fixed,)), "src", [ev(70, "orders", sql)])
    assert cols(t.at("shop", "orders", 70)) == ["id", "c"]
    assert t.groups[0].overrides == (fixed,)
    skipped = DdlOverride("shop.orders", 70, OverrideAction.SKIP)
    t = build(project(seed, (skipped,)), "src", [ev(70, "orders", sql)])
    assert t.groups[0].effects == () and cols(t.at("shop", "orders", 70)) == ["id"]


def test_recorded_versions_win_and_unknown_tables_are_a_problem() -> None:
    seed = "CREATE TABLE o (id INT PRIMARY KEY);"
    recorded_schema = parse_schema_sql("CREATE TABLE o (id INT PRIMARY KEY, r INT)", "shop", "x")[0]
    t = build(
        project(seed),
        "src",
        [ev(80, "o", "ALTER TABLE shop.o ADD COLUMN c INT")],
        recorded={key("shop", "o"): [Version(80, recorded_schema, "x")]},
    )
    assert cols(t.at("shop", "o", 80)) == ["id", "r"]
    t = build(project(), "src", [ev(90, "nope", "ALTER TABLE shop.nope ADD COLUMN c INT")])
    assert t.groups[0].problem and "no known schema" in t.groups[0].problem


def test_drop_database_drops_each_of_its_tables() -> None:
    # TiCDC sends DROP DATABASE as one schema-level event with no table (codec facts 1.4):
    # every table of the database known just before it is dropped, and no other.
    p = project("CREATE TABLE a (id INT PRIMARY KEY);")
    t = build(
        p,
        "src",
        [
            ev(10, "b", "CREATE TABLE shop.b (id INT PRIMARY KEY)"),
            DdlEvent("other", "c", 11, "CREATE TABLE other.c (id INT PRIMARY KEY)"),
            ev(12, "gone", "CREATE TABLE shop.gone (id INT PRIMARY KEY)"),
            ev(13, "gone", "DROP TABLE shop.gone"),
            DdlEvent("shop", "", 20, "DROP DATABASE IF EXISTS `shop`"),
        ],
    )
    drop = t.groups[-1]
    assert drop.problem is None
    assert [(e.old, e.new) for e in drop.effects] == [(("shop", "a"), None), (("shop", "b"), None)]
    assert [c.kind.value for e in drop.effects for c in e.changes] == ["drop_table", "drop_table"]
    assert t.at("shop", "a", 20) is None and t.at("shop", "b", 19) is not None
    assert t.at("other", "c", 20) is not None


def test_created_here_tells_a_table_born_in_the_history_from_one_met_there() -> None:
    p = project("CREATE TABLE seeded (id INT PRIMARY KEY);")
    t = build(
        p,
        "src",
        [
            ev(10, "fresh", "CREATE TABLE shop.fresh (id INT PRIMARY KEY)"),
            ev(11, "fresh", "ALTER TABLE shop.fresh ADD COLUMN v INT"),
            ev(12, "seeded", "ALTER TABLE shop.seeded ADD COLUMN v INT"),
            ev(13, "moved", "RENAME TABLE shop.fresh TO shop.moved"),
        ],
    )
    assert t.created_here("shop", "fresh", 12)  # an ALTER keeps what the CREATE made
    assert not t.created_here("shop", "fresh", 14)  # renamed away
    assert not t.created_here("shop", "moved", 14)  # its rows began under another name
    assert not t.created_here("shop", "seeded", 13)  # known from a seed only
    assert not t.created_here("shop", "fresh", 10)  # not yet created before its CREATE


def test_exists_at_follows_drops_and_renames_even_of_tables_with_no_known_schema() -> None:
    t = build(
        project(),
        "src",
        [
            ev(10, "a", "DROP TABLE a"),  # a's schema is unknown: cannot be replayed
            ev(20, "c", "RENAME TABLE b TO c"),  # nor b's
            ev(30, "d", "CREATE TABLE d (id INT PRIMARY KEY)"),
            ev(40, "d", "DROP TABLE d"),
            ev(50, "a", "CREATE TABLE a (id INT PRIMARY KEY)"),
            ev(60, "e", "ALTER TABLE e ADD COLUMN x INT"),
        ],
    )
    assert [g.problem is not None for g in t.groups] == [True, True, False, False, False, True]
    assert t.groups[0].moves == ((key("shop", "a"), None),)
    assert t.groups[1].moves == ((key("shop", "b"), key("shop", "c")),)
    assert [t.exists_at("shop", "a", ts) for ts in (9, 10, 49, 50)] == [None, False, False, True]
    assert [t.exists_at("shop", "b", ts) for ts in (19, 20)] == [None, False]
    assert [t.exists_at("shop", "c", ts) for ts in (19, 20)] == [None, True]
    assert [t.exists_at("shop", "d", ts) for ts in (29, 30, 40)] == [None, True, False]
    assert t.exists_at("shop", "e", 60) is None  # an ALTER says nothing about it


def test_existence_counts_the_net_effect_of_each_ddl() -> None:
    from ticdc_sync.ddl.timeline import Existence

    t = build(
        project("CREATE TABLE seeded (id INT PRIMARY KEY);"),
        "src",
        [
            ev(10, "a", "CREATE TABLE a (id INT PRIMARY KEY)"),
            ev(11, "b", "CREATE TABLE b (id INT PRIMARY KEY)"),
            ev(20, "a", "RENAME TABLE a TO tmp, b TO a, tmp TO b"),  # a swap
            ev(30, "c", "RENAME TABLE a TO x, x TO c"),  # a chain: x never holds anything
            ev(40, "c", "DROP TABLE c"),
            ev(50, "seeded", "CREATE TABLE seeded (id INT PRIMARY KEY, v INT)"),
            ev(60, "gone", "DROP TABLE gone"),  # its schema is unknown: by its text
        ],
    )
    assert t.existence("shop", "a") == [Existence(10, True), Existence(30, False, ("shop", "c"))]
    assert t.existence("shop", "b") == [Existence(11, True)]  # swapped, never gone
    assert t.existence("shop", "x") == []
    assert t.existence("shop", "c") == [
        Existence(30, True, ("shop", "a")),
        Existence(40, False, None),
    ]
    # A CREATE over a seeded schema: upstream the table did not exist just before it.
    assert t.existence("shop", "seeded") == [Existence(50, True)]
    assert t.existence("shop", "gone") == [Existence(60, False)]
