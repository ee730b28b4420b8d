"""Partitioned tables with every partition DDL, on real Delta targets, in every protocol and mode.

One scripted upstream (`testkit.history.Scripted` with `testkit.partitions`, TiDB's rules
simulated apart from ticdc-sync's): a time-partitioned `events` table (RANGE on TO_DAYS) whose
partitions are truncated, dropped, reorganized and exchanged with `events_archive`; HASH on
negative and large keys with ADD PARTITION PARTITIONS and COALESCE; KEY on BIGINT UNSIGNED;
LIST on MOD with a DEFAULT partition; RANGE COLUMNS with MAXVALUE on two columns; LIST COLUMNS
with DEFAULT; a plain table partitioned by ALTER, with ADD PARTITION, then unpartitioned.
Around the DDL: a transaction just before one (an insert, an update, and a key moved between
partitions by UPDATE, which TiCDC splits), rows inserted into a partition after it, keys
moved into a partition before it is truncated. A mirror takes the stream in three runs, the
other modes in one.

Per protocol and mode: a mirror target equals its table; a soft-delete target's live rows
equal it, the partition's rows marked deleted at the DDL's commit_ts; a history target cut
just before and at each partition DDL equals the table then. Nothing blocks.
"""

from __future__ import annotations

import datetime as dt

import pytest

from testkit.history import Scripted, encode
from testkit.partitions import MAXVALUE, Layout, Part, to_days
from tests.spark.engine_harness import load, make_project, read_target, write_captures
from tests.spark.truth import assert_table_equals
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

C = Column
D = dt.date


def _t(name: str, cols: tuple[Column, ...], pk: tuple[str, ...]) -> TableSchema:
    return TableSchema("shop", name, (*cols, C("v", "varchar", length=20)), pk)


EVENT_COLS = (C("id", "int", nullable=False), C("d", "date", nullable=False))
EVENTS = _t("events", EVENT_COLS, ("id", "d"))
ARCHIVE = _t("events_archive", EVENT_COLS, ("id", "d"))
HASHED = _t("hashed", (C("id", "bigint", nullable=False),), ("id",))
KEYED = _t("keyed", (C("id", "bigint", unsigned=True, nullable=False),), ("id",))
LISTED = _t("listed", (C("id", "int", nullable=False),), ("id",))
RCOLS = _t(
    "rcols",
    (
        C("a", "int", nullable=False),
        C("dt", "datetime", nullable=False),
        C("id", "int", nullable=False),
    ),
    ("id", "a", "dt"),
)
LCOLS = _t(
    "lcols",
    (C("c", "int", nullable=False), C("d", "date", nullable=False), C("id", "int", nullable=False)),
    ("id", "c", "d"),
)
REPART = _t("repart", (C("id", "int", nullable=False),), ("id",))


def _month(y: int, m: int) -> Part:
    bound = D(y + (m == 12), m % 12 + 1, 1)
    return Part(f"p{y}_{m:02d}", to_days(bound), f"TO_DAYS('{bound.isoformat()}')")


def _by_days(parts: list[Part]) -> Layout:
    return Layout("RANGE", "TO_DAYS(`d`)", lambda r: to_days(r["d"]), tuple(parts))


def _hash(n: int) -> Layout:
    return Layout("HASH", "`id`", lambda r: r["id"], tuple(Part(f"p{i}") for i in range(n)))


def upstream() -> tuple[Scripted, dict[str, int]]:
    u = Scripted("shop", partitions=2, seed=71, replay_probability=0.5)
    ts: dict[str, int] = {}
    pmax = Part("pmax", MAXVALUE, "MAXVALUE")
    u.create(EVENTS, _by_days([_month(2024, 1), _month(2024, 2), _month(2024, 3), pmax]))
    u.create(ARCHIVE)
    u.create(HASHED, _hash(4))
    u.create(
        KEYED, Layout("KEY", "`id`", lambda r: (r["id"],), tuple(Part(f"p{i}") for i in range(3)))
    )
    u.create(
        LISTED,
        Layout(
            "LIST",
            "MOD(`id`, 10)",
            lambda r: int(r["id"] - 10 * int(r["id"] / 10)),
            (
                Part("pa", values=(0, 1, 2), values_sql="0, 1, 2"),
                Part("pb", values=(3, 4, 5, -1, -2), values_sql="3, 4, 5, -1, -2"),
                Part("pdef", default=True),
            ),
        ),
    )
    u.create(
        RCOLS,
        Layout(
            "RANGE COLUMNS",
            "`a`, `dt`",
            lambda r: (r["a"], r["dt"]),
            (
                Part("p0", (0, dt.datetime(2024, 2, 1)), "0, '2024-02-01 00:00:00'"),
                Part("p1", (0, MAXVALUE), "0, MAXVALUE"),
                Part("p2", (MAXVALUE, MAXVALUE), "MAXVALUE, MAXVALUE"),
            ),
        ),
    )
    u.create(
        LCOLS,
        Layout(
            "LIST COLUMNS",
            "`c`, `d`",
            lambda r: (r["c"], r["d"]),
            (
                Part(
                    "p0",
                    values=((1, D(2024, 1, 1)), (2, D(2024, 1, 2))),
                    values_sql="(1, '2024-01-01'), (2, '2024-01-02')",
                ),
                Part("pd", default=True),
            ),
        ),
    )
    u.create(REPART)

    days = [
        D(2024, 1, 5),
        D(2024, 1, 31),
        D(2024, 2, 1),
        D(2024, 2, 20),
        D(2024, 3, 3),
        D(2024, 3, 31),
        D(2024, 4, 2),
        D(2025, 6, 1),
    ]
    u.insert("events", *[{"id": i, "d": d, "v": f"e{i}"} for i, d in enumerate(days, 1)])
    u.insert("events", *[{"id": 10 + i, "d": d, "v": f"e{10 + i}"} for i, d in enumerate(days, 1)])
    u.insert(
        "events_archive", *[{"id": 100 + i, "d": D(2024, 3, 1 + i), "v": f"a{i}"} for i in range(4)]
    )
    hashed = [0, 1, 3, 4, -1, -3, -4, -7, 9, 10, 11, 1 << 40, -(1 << 40), (1 << 63) - 1, -(1 << 63)]
    u.insert("hashed", *[{"id": i, "v": f"h{i}"} for i in hashed])
    keyed = [0, 1, 2, 3, 5, 8, 13, 123456789, (1 << 63) + 5, (1 << 64) - 1]
    u.insert("keyed", *[{"id": i, "v": f"k{i}"} for i in keyed])
    u.insert("listed", *[{"id": i, "v": f"l{i}"} for i in range(-12, 13)])
    u.insert(
        "rcols",
        *[
            {"a": a, "dt": t, "id": i, "v": f"r{i}"}
            for i, (a, t) in enumerate(
                [
                    (-5, dt.datetime(2030, 1, 1)),
                    (0, dt.datetime(2024, 1, 31, 23, 59, 59)),
                    (0, dt.datetime(2024, 2, 1)),
                    (0, dt.datetime(2025, 1, 1)),
                    (1, dt.datetime(2000, 1, 1)),
                ],
                1,
            )
        ],
    )
    u.insert(
        "lcols",
        *[
            {"c": c, "d": d, "id": i, "v": f"c{i}"}
            for i, (c, d) in enumerate(
                [(1, D(2024, 1, 1)), (2, D(2024, 1, 2)), (1, D(2024, 1, 2)), (3, D(2024, 1, 1))], 1
            )
        ],
    )
    u.insert("repart", *[{"id": i, "v": f"x{i}"} for i in (1, 5, 12, 15, 19)])
    u.watermark()

    # events: a transaction just before the TRUNCATE (an insert into the partition, an
    # update in it, a key moved into it by UPDATE), then rows into it after.
    u.txn(
        "events",
        ("insert", {"id": 30, "d": D(2024, 2, 14), "v": "txn"}),
        ("update", ((4, D(2024, 2, 20)), {"v": "updated"})),
        ("update", ((1, D(2024, 1, 5)), {"d": D(2024, 2, 2)})),
    )
    ts["truncate"] = u.truncate_partition("events", "p2024_02")
    u.insert("events", {"id": 31, "d": D(2024, 2, 10), "v": "after"})
    u.update("events", (2, D(2024, 1, 31)), v="jan kept")
    ts["drop"] = u.drop_partition("events", "p2024_01")
    u.insert("events", {"id": 32, "d": D(2024, 1, 9), "v": "jan into feb"})  # p2024_02 now
    u.watermark()
    ts["reorganize"] = u.reorganize_partition(
        "events", ("pmax",), _month(2024, 4), Part("pmax", MAXVALUE, "MAXVALUE")
    )
    u.move("events", (5, D(2024, 3, 3)), d=D(2024, 4, 20))  # into the new partition
    ts["truncate_new"] = u.truncate_partition("events", "p2024_04")
    ts["exchange"] = u.exchange_partition("events", "p2024_03", "events_archive")
    u.update("events", (101, D(2024, 3, 2)), v="came in")
    u.insert("events_archive", {"id": 200, "d": D(1999, 1, 1), "v": "archive row"})
    u.update("events_archive", (6, D(2024, 3, 31)), v="went out")

    # hashed: negative keys and the ends of BIGINT, through ADD and COALESCE.
    ts["hash"] = u.truncate_partition("hashed", "p1")
    u.add_partitions("hashed", 2)
    u.insert("hashed", *[{"id": i, "v": f"h{i}"} for i in (5, 17, -5, -17, 23)])
    u.truncate_partition("hashed", "p5")
    u.coalesce_partition("hashed", 3)
    u.truncate_partition("hashed", "p0")
    ts["key"] = u.truncate_partition("keyed", "p2")
    u.truncate_partition("listed", "pdef")
    u.insert("listed", {"id": 27, "v": "after"}, {"id": 40, "v": "pa"})
    u.truncate_partition("listed", "pa")
    u.truncate_partition("rcols", "p1")
    u.truncate_partition("lcols", "pd")
    u.watermark()
    # repart: partitioned by ALTER, a partition added, one truncated, then unpartitioned.
    repart = Layout(
        "RANGE",
        "`id`",
        lambda r: r["id"],
        (Part("p0", 10, "10"), Part("p1", 20, "20")),
    )
    u.partition_by("repart", repart)
    u.add_partition("repart", Part("p2", 30, "30"))
    u.insert("repart", {"id": 25, "v": "p2"}, {"id": 16, "v": "p1"})
    ts["repart"] = u.truncate_partition("repart", "p1")
    u.remove_partitioning("repart")
    u.insert("repart", {"id": 99, "v": "plain again"})
    u.watermark()
    return u, ts


TABLES = ("events", "events_archive", "hashed", "keyed", "listed", "rcols", "lcols", "repart")
PROTOCOLS = ("canal-json", "debezium", "open-protocol")


# Each protocol's encoding of every partition DDL into a mirror; each mode's deletes (marked,
# versions closed) in one protocol, Debezium's (whose DDL arrives as text with tableChanges)
# and Open Protocol's (type codes) each once: the decoding does not depend on the mode.
CASES = [
    *[(p, "mirror") for p in PROTOCOLS],
    ("debezium", "soft_delete"),
    ("open-protocol", "history"),
]


@pytest.mark.e2e
@pytest.mark.parametrize("protocol,mode", CASES)
def test_every_partition_ddl_lands_exactly(spark, tmp_path, protocol, mode):
    u, ts = upstream()
    history = u.history()
    enc = encode(history, protocol, "cdc")
    assert enc.resolved_ts is not None
    root = make_project(
        tmp_path / "p", protocol=protocol, topic="cdc", defaults=f"defaults:\n  mode: {mode}\n"
    )
    # The mirror takes the stream in three runs (a DDL's two sides applied in different
    # runs); the other modes in one, to keep the suite's time.
    for chunk in enc.chunks(3 if mode == "mirror" else 1):
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        lines: list[str] = []
        assert runner.run(load(root), spark=spark, out=lines.append) == 0, "\n".join(lines)
    project = load(root)
    for table in TABLES:
        q = f"shop.{table}"
        schema = enc.schemas[q]
        rows = read_target(spark, project, table, "id")
        if mode == "mirror":
            assert_table_equals(rows, enc.truth[q], schema, f"{protocol} {table}")
        elif mode == "soft_delete":
            live = [r for r in rows if not r["_is_deleted"]]
            assert_table_equals(live, enc.truth[q], schema, f"{protocol} {table} live")
        else:
            for at in sorted({t + d for t in ts.values() for d in (-1, 0)} | {enc.resolved_ts}):
                want, _ = history.truth(at)
                cut = [
                    r
                    for r in rows
                    if r["_valid_from"] <= at and (r["_valid_to"] is None or r["_valid_to"] > at)
                ]
                assert_table_equals(cut, want[q], schema, f"{protocol} {table} as of {at}")
    if mode == "soft_delete":
        # The rows the TRUNCATE took, marked deleted at its commit_ts, not later.
        rows = read_target(spark, project, "events", "id")
        gone = {r["id"]: r["_deleted_ts"] for r in rows if r["_is_deleted"]}
        assert gone[30] == gone[4] == ts["truncate"]  # the transaction's rows, just before it
        assert 31 not in gone and gone[13] == ts["truncate"]


def test_an_exchange_killed_between_its_commits_resumes_exactly(spark, tmp_path, monkeypatch):
    """Each side of an EXCHANGE is two commits, each carrying the target's marker: a run that
    dies after the partition's rows left `events` and before the archive's came in resumes at
    the second commit, and both targets end equal to their tables."""
    from ticdc_sync.spark.apply import ddl_commit

    u, ts = upstream()
    enc = encode(u.history(), "canal-json", "cdc")
    root = make_project(tmp_path / "p", protocol="canal-json", topic="cdc")
    write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in enc.records])
    real = ddl_commit._execute
    died: list[str] = []

    def die_after_the_rows_left(w, part, m, at):
        real(w, part, m, at)
        if at == ts["exchange"] and w.name == "events" and not died:
            died.append(part.describe)
            raise KeyboardInterrupt("killed between the commits of the exchange")

    monkeypatch.setattr(ddl_commit, "_execute", die_after_the_rows_left)
    with pytest.raises(KeyboardInterrupt):
        runner.run(load(root), spark=spark, out=lambda s: None)
    monkeypatch.undo()
    assert died == ["the rows of partition p2024_03 leave"]
    lines: list[str] = []
    assert runner.run(load(root), spark=spark, out=lines.append) == 0, "\n".join(lines)
    project = load(root)
    for table in ("events", "events_archive"):
        q = f"shop.{table}"
        rows = read_target(spark, project, table, "id")
        assert_table_equals(rows, enc.truth[q], enc.schemas[q], table)


def test_an_exchange_with_a_table_no_entry_routes_stops_the_other_side(spark, tmp_path):
    """Only the archive is routed: the EXCHANGE gives it the partition's rows, which are
    unknown here, so its target stops just before the DDL (it used to go on applying on top
    of rows it no longer had), `run` exits 1 naming why, and nothing after it is lost."""
    u = Scripted("shop", partitions=1, seed=3, replay_probability=0.0)
    pmax = Part("pmax", MAXVALUE, "MAXVALUE")
    u.create(EVENTS, _by_days([_month(2024, 1), pmax]))
    u.create(ARCHIVE)
    u.insert("events", {"id": 1, "d": D(2024, 1, 3), "v": "jan"}, {"id": 2, "d": D(2024, 5, 1)})
    u.insert("events_archive", {"id": 9, "d": D(2024, 1, 9), "v": "old"})
    before = u.watermark()
    at = u.exchange_partition("events", "p2024_01", "events_archive")
    u.update("events_archive", (1, D(2024, 1, 3)), v="now here")
    u.watermark()
    enc = encode(u.history(), "debezium", "cdc")
    root = make_project(
        tmp_path / "p",
        protocol="debezium",
        topic="cdc",
        tables='  - upstream: "shop.events_archive"\n    name: archive\n',
    )
    write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in enc.records])
    lines: list[str] = []
    assert runner.run(load(root), spark=spark, out=lines.append) == 1
    text = "\n".join(lines)
    assert f"target archive is blocked at commit_ts {at}" in text, text
    assert "no table entry routes shop.events" in text
    rows = read_target(spark, load(root), "archive", "id")
    want, _ = u.history().truth(before)
    assert_table_equals(rows, want["shop.events_archive"], ARCHIVE, "archive")
