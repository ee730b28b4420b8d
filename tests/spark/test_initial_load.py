"""Initial load from a Dumpling export, then the changefeed: overlap, DDL, formats, bad input."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from testkit.dumpling import DumplingFlags, write_export
from testkit.encode import make_tso
from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.spark import runner
from ticdc_sync.upstream import Column, TableSchema

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
