"""An initial load whose changefeed started before the Dumpling snapshot, with DDL in between.

One scripted upstream (`testkit.history.Scripted`): tables that exist before the changefeed
starts, then in the overlap (after the changefeed's start, at or below the snapshot) an ADD,
a DROP and a RENAME COLUMN, a CREATE TABLE with rows, a CREATE TABLE that stays empty, a
RENAME TABLE, DROP TABLEs of a table with rows in the stream and of one without, a
transaction and a DDL at the two snapshots, then more DDL and rows after them; one table
the stream never mentions; value edge cases (`\\N` text vs NULL vs empty string, quotes,
separators, CR/LF, tab, NUL, 0x1A, 4-byte UTF-8, ENUM, SET, DECIMAL, BIT, VARBINARY,
TIMESTAMP) before, inside and after the overlap.

The history goes to one topic per protocol and is exported three times, one export per
source: Canal-JSON with a CSV export (CRLF, gzip, `-r` and `-F` names of 13 digits, several
files per table) at a DDL's commit_ts; Debezium with an SQL export in another time zone at
a transaction's commit_ts; Open Protocol with a CSV export (LF, `;` and `'`, NULL as the null
value, no header) at the DDL, whose schema file of one table cannot be read. One project,
one run: every target equals its upstream table value for value (the testkit's truth), the
tables gone by the snapshot are never created, and the table with the broken schema file
fails alone with its reason.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from testkit.dumpling import DumplingFlags, write_export
from testkit.history import Scripted, encode
from tests.spark.engine_harness import PROFILES, load, read_target, write_captures
from tests.spark.truth import assert_table_equals
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = pytest.mark.spark

C = Column


def _t(name: str, *cols: Column) -> TableSchema:
    return TableSchema("shop", name, (C("id", "int", nullable=False), *cols), ("id",))


T1_0 = _t(
    "t1",
    C("a", "varchar", length=20),
    C("b", "int"),
    C("c", "varchar", length=20),
)
T1_1 = T1_0.with_(columns=(*T1_0.columns, C("d", "decimal", precision=12, scale=3)))
T1_2 = T1_1.with_(columns=tuple(c for c in T1_1.columns if c.name != "b"))
T1_3 = T1_2.with_(columns=tuple(c.with_(name="c2") if c.name == "c" else c for c in T1_2.columns))
T1_4 = T1_3.with_(columns=(*T1_3.columns, C("e", "int", has_default=True, default="5")))
VALS_0 = _t(
    "vals",
    C("s", "varchar", length=64),
    C("tx", "text"),
    C("e", "enum", members=("a", "b", "c")),
    C("st", "set", members=("x", "y", "z")),
    C("n", "decimal", precision=20, scale=6),
    C("vb", "varbinary", length=32, binary=True),
    C("bt", "bit", length=10),
    C("at", "timestamp", fsp=3),
)
VALS_1 = VALS_0.with_(
    columns=(*VALS_0.columns, C("extra", "varchar", length=8, has_default=True, default="x"))
)
SMALL = (C("v", "varchar", length=40),)
BORN, EMPTY, QUIET = _t("born", *SMALL), _t("empty", *SMALL), _t("quiet", *SMALL)
GONE, GONE2, OLD, BAD = (
    _t("gone", *SMALL),
    _t("gone2", *SMALL),
    _t("old", *SMALL),
    _t("bad", *SMALL),
)

TEXTS = [
    "\\N",
    "NULL",
    "",
    None,
    "q\"uo'te",
    "a,b|c;d",
    "cr\rlf\ncrlf\r\n",
    "\ttab\t",
    "nul\x00nul",
    "sub\x1asub",
    "4-byte \U0001f600\U0001d11e",
    "back\\slash\\n",
    "\\",
    " spaced ",
]
BYTES = [b"", b"\x00", b"\x00\x1a\r\n\\,\"'|;\t\xff", bytes(range(32)), None]
ENUMS = ["a", "b", "c", None]
SETS = ["", "x", "x,z", "x,y,z", None]
DECIMALS = [Decimal("0.000001"), Decimal("-12345678.123456"), Decimal("0.000000"), None]
BITS = [0, 1, 1023, 0b1010101010, None]
TIMES = [
    dt.datetime(2001, 2, 3, 4, 5, 6, 789000),
    dt.datetime(1971, 1, 1),
    dt.datetime(2037, 12, 31, 23, 59, 59, 999000),
    None,
]


def _vals(first: int, n: int) -> list[dict]:
    rows = []
    for i in range(first, first + n):
        rows.append(
            {
                "id": i,
                "s": TEXTS[i % len(TEXTS)],
                "tx": TEXTS[(i * 5 + 3) % len(TEXTS)],
                "e": ENUMS[i % len(ENUMS)],
                "st": SETS[i % len(SETS)],
                "n": DECIMALS[i % len(DECIMALS)],
                "vb": BYTES[i % len(BYTES)],
                "bt": BITS[i % len(BITS)],
                "at": TIMES[i % len(TIMES)],
            }
        )
    return rows


def upstream() -> tuple[Scripted, int, int, int]:
    """The history; the changefeed's first commit, the snapshot at a transaction and the
    snapshot at a DDL."""
    u = Scripted("shop", partitions=2, seed=37, replay_probability=0.7)
    # Before the changefeed: only in the exports.
    for t in (T1_0, VALS_0, QUIET, GONE, GONE2, OLD, BAD):
        u.create(t)
    u.insert("t1", *[{"id": i, "a": f"a{i}", "b": i, "c": f"c{i}"} for i in range(1, 6)])
    u.insert("vals", *_vals(1, len(TEXTS)))
    for t in ("quiet", "gone", "gone2", "old", "bad"):
        u.insert(t, *[{"id": i, "v": f"{t}{i}"} for i in range(1, 4)])
    # The overlap: in the stream and in the exports.
    since = u.insert("t1", {"id": 10, "a": "o10", "b": 10, "c": "c10"})
    u.update("vals", 1, s="overlap\r\n", e="c")
    u.update("gone", 1, v="touched")
    u.alter("t1", "ALTER TABLE t1 ADD COLUMN d DECIMAL(12,3)", T1_1, 5)
    u.insert("t1", {"id": 11, "a": "o11", "b": 11, "c": "c11", "d": Decimal("1.500")})
    u.watermark()
    u.alter("t1", "ALTER TABLE t1 DROP COLUMN b", T1_2, 6)
    u.create(BORN)
    u.insert("born", {"id": 1, "v": "born1"}, {"id": 2, "v": "born2"})
    u.update("t1", 1, a="updated", d=Decimal("-2.250"))
    u.alter("t1", "ALTER TABLE t1 RENAME COLUMN c TO c2", T1_3, 12, renamed=(("c", "c2"),))
    u.insert("t1", {"id": 12, "a": "o12", "c2": "c12", "d": Decimal("3.000")})
    u.create(EMPTY)
    u.update("old", 1, v="before the rename")
    u.rename("old", "moved")
    u.insert("moved", {"id": 5, "v": "after the rename"})
    u.drop("gone")
    u.drop("gone2")
    u.insert("vals", *_vals(20, 6))
    u.delete("t1", 2)
    u.watermark()
    at_txn = u.update("born", 1, v="at the snapshot")
    at_ddl = u.alter("vals", "ALTER TABLE vals ADD COLUMN extra VARCHAR(8) DEFAULT 'x'", VALS_1, 5)
    # After the snapshots: only in the stream.
    u.alter("t1", "ALTER TABLE t1 ADD COLUMN e INT DEFAULT 5", T1_4, 5)
    u.insert("t1", {"id": 13, "a": "o13", "c2": "c13", "e": 9})
    u.update("t1", 3, c2="after", e=6)
    u.insert("vals", *[{**r, "extra": "y"} for r in _vals(40, len(TEXTS))])
    u.update("vals", 2, tx="\\N", vb=b"\\N", st="y")
    u.delete("vals", 3)
    u.insert("empty", {"id": 1, "v": "first"})
    u.update("moved", 2, v="moved later")
    u.insert("born", {"id": 3, "v": "born3"})
    u.update("bad", 1, v="streamed")
    u.delete("t1", 10)
    u.watermark()
    return u, since, at_txn, at_ddl


# (source, protocol, snapshot: "txn" or "ddl", the export's flags). Two sets, so that every
# protocol meets a CSV export and an SQL one, each run as its own project.
SOURCES = [
    (
        "canal",
        "canal-json",
        "ddl",
        DumplingFlags(filetype="csv", compress="gzip", rows_per_file=4, rows_and_filesize=True),
    ),
    (
        "dbz",
        "debezium",
        "txn",
        DumplingFlags(time_zone="Asia/Shanghai", rows_per_file=9, rows_per_statement=4),
    ),
    (
        "open",
        "open-protocol",
        "ddl",
        DumplingFlags(
            filetype="csv",
            csv_separator=";",
            csv_delimiter="'",
            csv_null_value="NULL",
            csv_line_terminator="\n",
            no_header=True,
            time_zone="America/New_York",
        ),
    ),
]
OTHER_SOURCES = [
    (
        "canal",
        "canal-json",
        "txn",
        DumplingFlags(compress="gzip", rows_per_file=3, rows_per_statement=2),
    ),
    (
        "dbz",
        "debezium",
        "ddl",
        DumplingFlags(
            filetype="csv", rows_per_file=4, rows_and_filesize=True, time_zone="Europe/Berlin"
        ),
    ),
    (
        "open",
        "open-protocol",
        "txn",
        DumplingFlags(compress="gzip", time_zone="Asia/Kolkata"),
    ),
]


def _first_file(flags: DumplingFlags) -> str:
    """The name Dumpling gives the first data file of `shop.t1` under `flags`."""
    index = "0000000000000" if flags.rows_and_filesize else "000000000"
    gz = ".gz" if flags.compress == "gzip" else ""
    return f"shop.t1.{index}.{flags.filetype}{gz}"


def _options(f: DumplingFlags) -> str:
    import json

    lines = [f"        filetype: {f.filetype}", f"        time-zone: {f.time_zone}"]
    if f.filetype == "csv":
        lines += [
            f"        csv-separator: {json.dumps(f.csv_separator)}",
            f"        csv-delimiter: {json.dumps(f.csv_delimiter)}",
            f"        csv-null-value: {json.dumps(f.csv_null_value)}",
            f"        csv-line-terminator: {json.dumps(f.csv_line_terminator)}",
            f"        no-header: {json.dumps(f.no_header)}",
        ]
    return "\n".join(lines)


@pytest.mark.parametrize("exports", [SOURCES, OTHER_SOURCES], ids=["set-a", "set-b"])
def test_overlap_ddl_in_every_protocol_and_export_format(spark, tmp_path, exports):
    u, since, at_txn, at_ddl = upstream()
    history = u.history()
    root = tmp_path / "p"
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: test\nprofile: test\n")
    (root / "profiles.yml").write_text(PROFILES)
    sources, entries, expected = ["sources:"], ["tables:"], {}
    for name, protocol, at, flags in exports:
        snapshot = at_txn if at == "txn" else at_ddl
        tables, schemas = history.truth(snapshot)
        write_export(
            root / name, [(schemas[q], tables[q]) for q in sorted(tables)], snapshot, flags
        )
        enc = encode(history, protocol, name, since=since)
        assert enc.replays > 0 and enc.resolved_ts is not None
        write_captures(root, name, [(r.partition, r.offset, r.key, r.value) for r in enc.records])
        sources.append(
            f"  - name: {name}\n    protocol: {protocol}\n    topics: [{name}]\n"
            f"    initial_load:\n      dumpling: {name}\n      options:\n{_options(flags)}"
        )
        entries.append(f'  - upstream: "shop.*"\n    source: {name}\n    name: "{name}_{{table}}"')
        expected[name] = (snapshot, enc)
    for name, _, _, flags in exports:
        files = sorted(p.name for p in (root / name).iterdir())
        gz = ".gz" if flags.compress == "gzip" else ""
        assert _first_file(flags) in files and f"shop.empty-schema.sql{gz}" in files, files
        assert not any(f.startswith("shop.empty.") for f in files)  # empty: no data file
        assert not any(f.startswith(("shop.gone", "shop.old")) for f in files)
    # The open export's schema file of `bad` cannot be read.
    open_gz = {n: f for n, _, _, f in exports}["open"].compress == "gzip"
    (root / "open" / ("shop.bad-schema.sql.gz" if open_gz else "shop.bad-schema.sql")).unlink()
    (root / "open" / "shop.bad-schema.sql").write_text("CREATE TABLE `bad` (`id` int NOT NULL,\n")
    (root / "sources" / "s.yml").write_text("\n".join(sources) + "\n")
    (root / "tables" / "t.yml").write_text("\n".join(entries) + "\n")
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 1
    errors = [x for x in lines if x.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: target open_bad is blocked: cannot load shop.bad from the Dumpling export open: "
        "open/shop.bad-schema.sql"
    ), errors

    wh = warehouse_path(project)
    for name, (snapshot, enc) in expected.items():
        assert set(enc.truth) == {
            f"shop.{t}" for t in ("t1", "vals", "born", "empty", "quiet", "moved", "bad")
        }
        for q, truth in enc.truth.items():
            schema = enc.schemas[q]
            target = f"{name}_{schema.table}"
            if target == "open_bad":
                continue
            # A row the export holds carries the snapshot as its commit_ts.
            want = [{**r, "_commit_ts": max(r["_commit_ts"], snapshot)} for r in truth]
            got = read_target(spark, project, target, "id")
            assert_table_equals(got, want, schema, target)
            cols = spark.read.format("delta").load(target_location(wh, target)).columns
            assert cols == [*schema.column_names(), "_commit_ts"], (target, cols)
        # Gone by the snapshot: never created. Refused: nothing created either.
        for table in ("gone", "gone2", "old", *(["bad"] if name == "open" else [])):
            assert not Path(target_location(wh, f"{name}_{table}")).exists(), (name, table)
