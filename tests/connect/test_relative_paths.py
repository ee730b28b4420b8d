"""Relative paths over Spark Connect: a profile whose `warehouse` and `captures` are relative
(as the example's `connect` target has them), an `initial_load` export named relative to the
project, `verify --export` with a relative folder, all run from the project's folder while the
server works in a folder of its own (the fixture's): the client hands the server absolute
locations resolved against the project's folder, so nothing is looked for, or written, in the
server's working folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.dumpling import write_export
from testkit.encode import make_tso
from tests.spark.engine_harness import canal_row, canal_watermark, make_project, write_captures
from ticdc_sync.commands import cli
from ticdc_sync.core.upstream import Column, TableSchema

pytestmark = pytest.mark.connect

T = TableSchema(
    "shop",
    "t",
    (Column("id", "int", nullable=False), Column("v", "varchar", length=10)),
    ("id",),
)
ROWS = [{"id": 0, "v": "z"}, {"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


def ts(n: int) -> int:
    return make_tso(1_700_000_000_000 + n * 1000)


def _project(root: Path, remote: str) -> Path:
    """shop.t loaded from an export at ts(1), then two inserts and a watermark, with every
    location relative to the project."""
    make_project(root, protocol="canal-json")
    (root / "profiles.yml").write_text(
        "test:\n  target: dev\n  outputs:\n    dev:\n"
        f'      spark: {{remote: "{remote}", conf: {{spark.sql.shuffle.partitions: 2}}}}\n'
        "      warehouse: warehouse\n"
        "      transport: {type: files, captures: captures}\n"
    )
    src = root / "sources" / "s.yml"
    src.write_text(src.read_text() + "    initial_load: {dumpling: export}\n")
    write_export(root / "export", [(T, ROWS[:1])], ts(1))
    write_export(root / "final", [(T, ROWS)], ts(9))
    types = {"id": "int", "v": "varchar"}
    records = [
        (0, i, None, canal_row("shop", "t", "INSERT", ts(2 + i), r, types, ["id"]))
        for i, r in enumerate({k: str(v) for k, v in r.items()} for r in ROWS[1:])
    ]
    records.append((0, len(records), None, canal_watermark(ts(9))))
    write_captures(root, "t", records)
    return root


def test_relative_locations_reach_the_server_absolute(
    remote, connect_server, tmp_path, monkeypatch, capsys
):
    server_dir = getattr(connect_server, "root", None)  # None: a server already running
    assert server_dir is None or Path(server_dir).resolve() != tmp_path.resolve()
    before = set(Path(server_dir).iterdir()) if server_dir is not None else set()
    root = _project(tmp_path / "project", connect_server.remote)
    monkeypatch.chdir(root)  # `--project` left out: the project is `.`
    assert cli.main(["validate"]) == 0
    assert cli.main(["run"]) == 0, capsys.readouterr().err
    table = root / "warehouse" / "tables" / "t"
    rows = remote.read.format("delta").load(str(table)).orderBy("id").collect()
    assert [(r["id"], r["v"]) for r in rows] == [(0, "z"), (1, "a"), (2, "b")]
    capsys.readouterr()
    assert cli.main(["verify", "--export", "final"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines()[1].startswith("  t: equal (3 rows, ")
    assert cli.main(["verify"]) == 0, capsys.readouterr().err  # the initial_load export
    assert cli.main(["plan", "--explain"]) == 0
    if server_dir is not None:
        # Nothing landed in the server's own folder (a relative path would have: Spark
        # resolves one against its working folder). Its catalog folder is its own setting.
        new = {p.name for p in set(Path(server_dir).iterdir()) - before} - {"spark-warehouse"}
        assert new == set(), new
