"""Initial load from a Dumpling export, then the changefeed: overlap, DDL, formats, bad input."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from testkit.dumpling import DumplingFlags, write_export
from testkit.encode import make_tso
from tests.processes import kill_tree
from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

MS = 1_700_000_000_000


def ts(n: int) -> int:
    return make_tso(MS + n * 1000)


S = ts(10)  # the export's snapshot
T = TableSchema(
    "shop",
    "t",
    (
        Column("id", "int", nullable=False),
        Column("v", "varchar", length=10),
        Column("n", "decimal", precision=10, scale=2),
    ),
    ("id",),
)
MT = {"id": "int", "v": "varchar", "n": "decimal"}


def row(op: str, at: int, data: dict, old: dict | None = None, table: str = "t") -> bytes:
    return canal_row("shop", table, op, at, data, MT, ["id"], old)


def ddl(at: int, sql: str, table: str = "t", kind: str = "ALTER") -> bytes:
    return json.dumps(
        {
            "id": 0,
            "database": "shop",
            "table": table,
            "pkNames": None,
            "isDdl": True,
            "type": kind,
            "es": at >> 18,
            "ts": 0,
            "sql": sql,
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"commitTs": at},
        }
    ).encode()


def project_with_export(tmp_path, rows, flags: DumplingFlags | None = None, extra: str = ""):
    flags = flags or DumplingFlags()
    root = make_project(tmp_path / "p", protocol="canal-json")
    write_export(root / "export", [(T, rows)], S, flags)
    opts = f"        filetype: {flags.filetype}\n" if flags.filetype != "sql" else ""
    src = (root / "sources" / "s.yml").read_text()
    src += "    initial_load:\n      dumpling: export\n"
    if opts or extra:
        src += "      options:\n" + opts + extra
    (root / "sources" / "s.yml").write_text(src)
    return root


def out_lines():
    lines: list[str] = []
    return lines, lines.append


def test_load_then_stream_with_overlap_ddl_and_a_new_table(spark, tmp_path):
    exported = [
        {"id": 1, "v": "a2", "n": Decimal("1.50")},
        {"id": 2, "v": "b", "n": None},
        {"id": 4, "v": 'q"\\,x\ny', "n": Decimal("-4.00")},
    ]
    root = project_with_export(tmp_path, exported, DumplingFlags(filetype="csv", rows_per_file=2))
    # The changefeed started before the snapshot: its first events are already in the
    # export and must not be applied again.
    recs = [
        (0, 0, None, row("INSERT", ts(2), {"id": "1", "v": "a", "n": "1.50"})),
        (
            0,
            1,
            None,
            row("UPDATE", ts(3), {"id": "1", "v": "a2", "n": "1.50"}, {"id": "1", "v": "a"}),
        ),
        (0, 2, None, row("INSERT", ts(4), {"id": "3", "v": "gone", "n": None})),
        (0, 3, None, row("DELETE", ts(5), {"id": "3", "v": "gone", "n": None})),
        (0, 4, None, wm(ts(5))),
        (0, 5, None, ddl(ts(11), "ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7")),
        (
            0,
            6,
            None,
            row(
                "UPDATE",
                ts(12),
                {"id": "2", "v": "b2", "n": None, "extra": "8"},
                {"id": "2", "v": "b"},
            ),
        ),
        (0, 7, None, row("DELETE", ts(12), {"id": "4", "v": "x", "n": None, "extra": "7"})),
        (
            0,
            8,
            None,
            ddl(ts(13), "CREATE TABLE u (id INT PRIMARY KEY, v VARCHAR(10))", "u", "CREATE"),
        ),
        (0, 9, None, row("INSERT", ts(14), {"id": "9", "v": "new"}, table="u")),
        (0, 10, None, wm(ts(15))),
    ]
    write_captures(root, "t", recs)
    project = load(root)
    lines, out = out_lines()
    assert runner.run(project, spark=spark, out=out) == 0
    assert any("loaded 3 row(s) from 2 file(s)" in x for x in lines), lines
    got = read_target(spark, project, "t", "id")
    assert [(r["id"], r["v"], r["n"], r["extra"], r["_commit_ts"]) for r in got] == [
        (1, "a2", Decimal("1.50"), 7, S),
        (2, "b2", None, 8, ts(12)),
    ]
    assert [(r["id"], r["v"]) for r in read_target(spark, project, "u", "id")] == [(9, "new")]
    results = json.loads((root / "target" / "run_results.json").read_text())
    assert results["targets"]["t"]["loaded"] == 3
    # A second run does not load again.
    lines.clear()
    assert runner.run(project, spark=spark, out=out) == 0
    assert not any("loaded" in x for x in lines), lines
    assert len(read_target(spark, project, "t", "id")) == 2


# One export per dialect, each feeding its own source and targets, loaded in one run.
DIALECTS = {
    "sqlplain": DumplingFlags(),
    "csvplain": DumplingFlags(filetype="csv"),
    "csvodd": DumplingFlags(
        filetype="csv",
        csv_separator="|",
        csv_delimiter="",
        csv_null_value="NULL",
        no_header=True,
        csv_line_terminator="\n",
        compress="gzip",
        time_zone="Asia/Shanghai",
    ),
    "sqlzst": DumplingFlags(compress="zstd", rows_per_file=7, rows_per_statement=3),
    "csvmulti": DumplingFlags(
        filetype="csv", csv_separator=";;", csv_delimiter="'", compress="zstd", rows_per_file=9
    ),
}


def _options_yaml(f: DumplingFlags) -> str:
    lines = [f"        filetype: {f.filetype}"]
    if f.filetype == "csv":
        lines += [
            f"        csv-separator: {json.dumps(f.csv_separator)}",
            f"        csv-delimiter: {json.dumps(f.csv_delimiter)}",
            f"        csv-null-value: {json.dumps(f.csv_null_value)}",
            f"        csv-line-terminator: {json.dumps(f.csv_line_terminator)}",
            f"        no-header: {json.dumps(f.no_header)}",
        ]
    lines.append(f"        time-zone: {f.time_zone}")
    return "\n".join(lines) + "\n"


def test_every_type_in_every_dialect_loads_exactly(spark, tmp_path):
    import random

    from testkit.history import default_tables, gen_value
    from tests.spark.truth import assert_table_equals

    tables = default_tables("app")
    rng = random.Random(7)
    data = {}
    for t in tables:
        rows = []
        keys = set()
        while len(rows) < 25:
            r = {c.name: gen_value(c, rng) for c in t.columns}
            k = tuple(r[n] for n in t.primary_key)
            if k not in keys and all(v is not None for v in k):
                keys.add(k)
                rows.append(r)
        data[t.qualified] = rows
    root = tmp_path / "p"
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: test\nprofile: test\n")
    from tests.spark.engine_harness import PROFILES

    (root / "profiles.yml").write_text(PROFILES)
    sources, entries = ["sources:"], ["tables:"]
    for name, flags in DIALECTS.items():
        write_export(root / name, [(t, data[t.qualified]) for t in tables], S, flags)
        sources.append(
            f"  - name: {name}\n    protocol: debezium\n    topics: [{name}]\n"
            f"    initial_load:\n      dumpling: {name}\n      options:\n"
            + _options_yaml(flags).rstrip("\n")
        )
        entries.append(f'  - upstream: "app.*"\n    source: {name}\n    name: "{name}_{{table}}"')
    (root / "sources" / "s.yml").write_text("\n".join(sources) + "\n")
    (root / "tables" / "t.yml").write_text("\n".join(entries) + "\n")
    project = load(root)
    lines, out = out_lines()
    assert runner.run(project, spark=spark, out=out) == 0, [x for x in lines if "error" in x]
    for name in DIALECTS:
        for t in tables:
            truth = [{**r, "_commit_ts": S} for r in data[t.qualified]]
            got = read_target(spark, project, f"{name}_{t.table}", ",".join(t.primary_key))
            assert_table_equals(got, truth, t, f"{name}_{t.table}")


def _history_marker(spark, location):
    from ticdc_sync.core.window import Marker

    rows = spark.sql(f"DESCRIBE HISTORY delta.`{location}`").collect()
    return [Marker.from_user_metadata(r["userMetadata"]) for r in rows]


def test_bad_rows_fail_naming_file_and_line_and_nothing_is_committed(spark, tmp_path):
    from ticdc_sync.warehouse.locations import target_location, warehouse_path

    rows = [{"id": i, "v": f"v{i}", "n": Decimal(i)} for i in range(1, 7)]
    root = project_with_export(tmp_path, rows, DumplingFlags(filetype="csv", rows_per_file=3))
    f = root / "export" / "shop.t.000000001.csv"
    lines = f.read_bytes().split(b"\r\n")
    # Line 3 of the second file: a value that does not fit DECIMAL(10,2).
    lines[2] = b'5,"v5",123456789012.5'
    f.write_bytes(b"\r\n".join(lines))
    project = load(root)
    got, out = out_lines()
    assert runner.run(project, spark=spark, out=out) == 1
    err = next(x for x in got if x.startswith("error:"))
    assert "export/shop.t.000000001.csv:3: table shop.t: value does not fit its column: n = " in err
    assert "nothing of this load was committed" in err
    loc = target_location(warehouse_path(project), "t")
    assert spark.read.format("delta").load(loc).count() == 0
    assert not any(m is not None and m.applied_ts >= 0 for m in _history_marker(spark, loc))

    # A line with a field too many, and one cut short (a quoted value never closed).
    lines[2] = b'5,"v5",5,6'
    lines[1] = b'4,"v4,4'
    f.write_bytes(b"\r\n".join(lines))
    got.clear()
    assert runner.run(project, spark=spark, out=out) == 1
    err = next(x for x in got if x.startswith("error:"))
    assert "export/shop.t.000000001.csv:2: table shop.t: cannot read this line" in err or (
        "export/shop.t.000000001.csv:3: table shop.t: the line has 4 fields, but shop.t has 3"
        in err
    ), err

    # Quarantine: the other rows load; the bad lines are kept with their bytes, once.
    (root / "tables" / "t.yml").write_text(
        'tables:\n  - upstream: "shop.*"\n    name: "{table}"\n    on_bad_message: quarantine\n'
    )
    project = load(root)
    got.clear()
    assert runner.run(project, spark=spark, out=out) == 0, got
    assert [r["id"] for r in read_target(spark, project, "t", "id")] == [1, 2, 3, 6]
    q = spark.read.format("delta").load(str(root / "warehouse" / "_ticdc_sync" / "quarantine"))
    kept = sorted(bytes(r["raw_value"]) for r in q.collect())
    assert kept == [b'4,"v4,4', b'5,"v5",5,6']
    assert all(r["topic"] == "dumpling:export/shop.t.000000001.csv" for r in q.collect())


def test_sql_export_with_generated_columns_and_a_foreign_insert_line(spark, tmp_path):
    from ticdc_sync.ddl import parse_schema_sql

    (g,) = parse_schema_sql(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), w INT AS (id * 2) STORED, "
        "n DECIMAL(10,2))",
        "shop",
        "x",
    )
    root = make_project(tmp_path / "p", protocol="canal-json")
    write_export(root / "export", [(g, [{"id": 1, "v": "it's", "n": 1}])], S)
    data = (root / "export" / "shop.t.000000000.sql").read_text()
    assert "INSERT INTO `t` (`id`,`v`,`n`) VALUES\n(1,'it\\'s',1.00);\n" in data
    src = (root / "sources" / "s.yml").read_text()
    (root / "sources" / "s.yml").write_text(src + "    initial_load:\n      dumpling: export\n")
    project = load(root)
    got, out = out_lines()
    assert runner.run(project, spark=spark, out=out) == 0, [x for x in got if "error" in x]
    (r,) = read_target(spark, project, "t", "id")
    assert (r["id"], r["v"], r["w"], r["n"], r["_commit_ts"]) == (1, "it's", None, 1, S)

    # An INSERT into another table in this table's file is not loaded silently.
    (root / "export" / "shop.t.000000000.sql").write_text(
        data.replace("INSERT INTO `t` (`id`,`v`,`n`)", "INSERT INTO `t2` (`id`,`v`,`n`)")
    )
    (root / "warehouse").rename(root / "old-warehouse")
    got.clear()
    assert runner.run(load(root), spark=spark, out=out) == 1
    err = next(x for x in got if x.startswith("error:"))
    assert "export/shop.t.000000000.sql:2: table shop.t: not a line of a Dumpling INSERT" in err


def test_kill_9_during_the_load_then_run_again(spark, tmp_path):
    """SIGKILL the whole run (JVM included) while the load writes its files: no commit, so
    the next run loads again, and the target has every row once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from ticdc_sync.warehouse.locations import target_location, warehouse_path

    n = 60_000
    rows = [{"id": i, "v": f"v{i % 97}", "n": Decimal(i) / 4} for i in range(n)]
    root = project_with_export(tmp_path, rows, DumplingFlags(filetype="csv", rows_per_file=n // 6))
    write_captures(
        root,
        "t",
        [
            (0, 0, None, row("DELETE", ts(12), {"id": "5", "v": "v5", "n": "1.25"})),
            (0, 1, None, row("INSERT", ts(3), {"id": "5", "v": "replay", "n": None})),
            (0, 2, None, wm(ts(12))),
        ],
    )
    project = load(root)
    table = target_location(warehouse_path(project), "t")
    env = dict(os.environ, TZ="UTC", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ticdc_sync.commands.cli", "run", "--project", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    killed = False
    try:
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            # The load's data files land in the table's folder before its commit.
            if os.path.isdir(table) and any(p.endswith(".parquet") for p in os.listdir(table)):
                # The JVM too, at once: ticdc-sync starts it in a session of its own.
                kill_tree(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert killed, "the run ended before its load wrote a file"
    # The killed load left files but no commit: the table holds nothing, and shows no load.
    assert spark.read.format("delta").load(table).count() == 0
    assert not any(m is not None and m.applied_ts >= 0 for m in _history_marker(spark, table))
    assert runner.run(project, spark=spark, out=lambda _: None) == 0
    got = read_target(spark, project, "t", "id")
    assert len(got) == n - 1 and 5 not in {r["id"] for r in got}
    assert {r["_commit_ts"] for r in got} == {S}
    assert got[0]["v"] == "v0" and got[-1]["id"] == n - 1


def test_reload_a_target_from_a_newer_export(spark, tmp_path, capsys):
    from ticdc_sync.commands import cli

    root = project_with_export(tmp_path, [{"id": 1, "v": "a", "n": None}])
    write_captures(
        root,
        "t",
        [
            (0, 0, None, row("INSERT", ts(12), {"id": "2", "v": "b", "n": None})),
            (0, 1, None, ddl(ts(13), "ALTER TABLE t ADD COLUMN extra INT DEFAULT 1")),
            (0, 2, None, wm(ts(14))),
        ],
    )
    assert cli.main(["run", "--project", str(root)]) == 0
    project = load(root)
    assert [(r["id"], r["extra"]) for r in read_target(spark, project, "t", "id")] == [
        (1, 1),
        (2, 1),
    ]
    capsys.readouterr()
    # The target applied changes after the snapshot: a reload needs --force.
    assert cli.main(["run", "--project", str(root), "--reload", "t"]) == 1
    assert "add --force" in capsys.readouterr().err
    # A newer export (after the ADD COLUMN): reload it; only later changes apply on top.
    s2 = ts(14)
    newer = TableSchema(
        "shop", "t", (*T.columns, Column("extra", "int", has_default=True, default="1")), ("id",)
    )
    import shutil

    shutil.rmtree(root / "export")
    write_export(
        root / "export",
        [(newer, [{"id": 1, "v": "a", "n": None, "extra": 1}, {"id": 3, "v": "c", "extra": 9}])],
        s2,
    )
    write_captures(
        root,
        "t",
        [
            (0, 3, None, row("INSERT", ts(14), {"id": "2", "v": "b", "n": None})),  # replay
            (0, 4, None, row("INSERT", ts(15), {"id": "4", "v": "d", "n": None, "extra": "4"})),
            (0, 5, None, wm(ts(16))),
        ],
    )
    assert cli.main(["run", "--project", str(root), "--reload", "t"]) == 0
    got = read_target(spark, project, "t", "id")
    assert [(r["id"], r["extra"], r["_commit_ts"]) for r in got] == [
        (1, 1, s2),
        (3, 9, s2),
        (4, 4, ts(15)),
    ]


def test_unescape_undoes_every_backslash_escape_exactly(spark):
    # Fields as Dumpling escapes them: plain characters (any Latin-1 byte but a backslash)
    # and backslash pairs, in random runs that put pairs next to pairs (`\\\n`, `\\n`).
    import random

    from pyspark.sql import functions as F

    from ticdc_sync.spark.apply.load import unescape

    named = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
    plain = ["a", "n", "Z", "0", '"', ",", "'", "\xe9", "\xff", "\x01", "$", "1"]
    rng = random.Random(11)
    cases = []
    for _ in range(400):
        text, want = [], []
        for _ in range(rng.randrange(0, 12)):
            if rng.random() < 0.5:
                c = rng.choice(plain)
                text.append(c)
                want.append(c)
            else:
                c = rng.choice(["\\", *named, *plain])
                text.append("\\" + c)
                want.append(named.get(c, c))
        cases.append(("".join(text), "".join(want)))
    df = spark.createDataFrame(cases, "text STRING, want STRING")
    got = df.select("want", unescape(F.col("text")).alias("got")).collect()
    bad = [
        (c, r["want"], r["got"]) for c, r in zip(cases, got, strict=True) if r["got"] != r["want"]
    ]
    assert not bad, bad[:5]


def _fast_csv_cases(rng, o) -> list[str]:
    """Lines as Dumpling writes them (bare, quoted, quoted) from values full of what its
    escapes and Spark's CSV parser treat specially, and lines no Dumpling writes."""
    from testkit.dumpling import DumplingFlags, escape_csv

    flags = DumplingFlags(
        filetype="csv",
        csv_separator=o.csv_separator,
        csv_delimiter=o.csv_delimiter,
        csv_null_value=o.csv_null_value,
    )
    sep, delim, null = o.csv_separator, o.csv_delimiter, o.csv_null_value
    chars = ["a", "N", "n", "0", "Z", "\\", '"', "'", ",", "|", " ", "\t", "\0", "\r", "\n"]
    chars += ["\x1a", "\xe9", "\xff", "é", "😀"]
    texts = ["", "\\N", "NULL", null, sep, delim, "\\", delim + delim]

    def text() -> str:
        if rng.random() < 0.3:
            return rng.choice(texts)
        return "".join(rng.choice(chars) for _ in range(rng.randrange(0, 7)))

    def value(bare: bool) -> str:
        if rng.random() < 0.15:
            return null
        if bare:
            return rng.choice(["1", "-2.50", "0", "1e3", " 7", ""])
        raw = text().encode("utf-8")
        return (delim.encode() + escape_csv(raw, flags) + delim.encode()).decode("latin-1")

    noise = ["a", sep, delim, "\\", "N", "n", " ", "1", null]

    def odd() -> str:
        """A field no Dumpling writes: bare or quoted noise, unescaped."""
        junk = "".join(rng.choice(noise) for _ in range(rng.randrange(0, 5)))
        return rng.choice([junk, delim + junk + delim, delim + junk, junk + delim])

    lines = [sep.join([value(True), value(False), value(False)]) for _ in range(1500)]
    for _ in range(1500):
        fields = [value(i == 0) for i in range(rng.choice([2, 3, 3, 3, 4]))]
        fields[rng.randrange(len(fields))] = odd()
        lines.append(sep.join(fields))
    lines += ["".join(rng.choice(noise) for _ in range(rng.randrange(0, 9))) for _ in range(500)]
    return lines


@pytest.mark.parametrize(
    "dialect",
    [{}, {"csv_separator": "|", "csv_delimiter": "'", "csv_null_value": "NULL"}],
    ids=["default", "pipe"],
)
def test_spark_csv_reading_is_used_only_where_it_equals_the_exact_parser(spark, dialect):
    """Every line read both ways: Spark's CSV parser first (what it reads where it is proven,
    the exact parser elsewhere) and the exact parser alone give the same fields, count and
    well-formedness; and Spark's parser reads most of what Dumpling writes."""
    import random

    from pyspark.sql import functions as F

    from ticdc_sync.core.model import DumplingOptions, ExportFiletype
    from ticdc_sync.spark.apply.load import fast_csv, parse_fields

    o = DumplingOptions(filetype=ExportFiletype.CSV, **dialect)
    assert fast_csv(o)
    lines = _fast_csv_cases(random.Random(5), o)
    df = spark.createDataFrame([(x, i) for i, x in enumerate(lines)], "line STRING, i INT")
    bare = [True, False, False]
    cols = ["i", "__r0", "__r1", "__r2", "__count", "__ok"]
    both = parse_fields(df, o, bare).select(*cols, "__proven").collect()
    exact = parse_fields(df, o, bare, fast=False).select(*cols).collect()
    by_line = {r["i"]: r for r in exact}
    differ = [
        (lines[r["i"]], r.asDict(), by_line[r["i"]].asDict())
        for r in both
        if tuple(r[c] for c in cols) != tuple(by_line[r["i"]])
    ]
    assert not differ, differ[:5]
    proven = [r["i"] for r in both if r["__proven"]]
    assert len([i for i in proven if i < 1500]) > 600, len(proven)
    # A dialect Spark's parser cannot read exactly is read by the exact parser alone.
    multi = DumplingOptions(filetype=ExportFiletype.CSV, csv_separator=";;")
    assert not fast_csv(multi)
    assert not parse_fields(df.limit(5), multi, bare).where(F.col("__proven")).count()
