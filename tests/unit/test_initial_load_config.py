"""`initial_load` in sources/*.yml and tables/*.yml: loading, checks, and `validate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.dumpling import DumplingFlags, write_export
from ticdc_sync.commands import cli
from ticdc_sync.core.errors import ProjectError
from ticdc_sync.core.model import DumplingOptions, ExportFiletype
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.project import load_project

PROFILES = "t:\n  target: dev\n  outputs:\n    dev:\n      transport: {type: files}\n"
TS = 445644800004909736


def _project(root: Path, source_extra: str, table_extra: str = "", protocol="canal-json") -> Path:
    (root / "sources").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "ticdc_sync.yml").write_text("name: t\nprofile: t\n")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: s\n    protocol: {protocol}\n    topics: [a]\n{source_extra}"
    )
    (root / "tables" / "t.yml").write_text(f"tables:\n  - upstream: shop.*\n{table_extra}")
    return root


def test_initial_load_is_read_with_dumplings_defaults(tmp_path):
    root = _project(tmp_path, "    initial_load:\n      dumpling: exports/shop\n")
    p = load_project(root)
    il = p.sources[0].initial_load
    assert il is not None and il.dumpling == "exports/shop"
    assert il.options == DumplingOptions()
    assert il.options.csv_null_value == "\\N" and il.options.csv_line_terminator == "\r\n"
    assert il.origin.render() == "sources/s.yml:5"
    assert p.tables[0].initial_load is True


def test_initial_load_options_and_table_opt_out(tmp_path):
    root = _project(
        tmp_path,
        "    initial_load:\n      dumpling: s3a://b/x\n      options:\n        filetype: csv\n"
        "        csv-separator: '|'\n        csv-delimiter: ''\n        csv-null-value: 'NULL'\n"
        "        no-header: true\n        time-zone: Asia/Shanghai\n",
        "    initial_load: false\n",
    )
    p = load_project(root)
    o = p.sources[0].initial_load.options
    assert o == DumplingOptions(
        filetype=ExportFiletype.CSV,
        csv_separator="|",
        csv_delimiter="",
        csv_null_value="NULL",
        no_header=True,
        time_zone="Asia/Shanghai",
    )
    assert p.tables[0].initial_load is False


@pytest.mark.parametrize(
    "extra, protocol, message",
    [
        (
            "      options: {csv-separator: ';'}\n",
            "debezium",
            "sources/s.yml:7: sources[0].initial_load.options.csv-separator: option "
            "'csv-separator' applies to CSV exports only",
        ),
        (
            "      options: {escape-backslash: false}\n",
            "debezium",
            "initial_load.options.escape-backslash: exports made with --escape-backslash=false",
        ),
        (
            "      options: {filetype: csv, csv-separator: '\"', csv-delimiter: '\"'}\n",
            "debezium",
            "csv-delimiter '\"' and csv-separator '\"' overlap",
        ),
        ("", "canal-json\n    options: {enable-tidb-extension: false}", "needs the changefeed's"),
        ("      options: {filetype: parquet}\n", "debezium", "'parquet' is not one of"),
    ],
)
def test_bad_initial_load_settings(tmp_path, extra, protocol, message):
    root = _project(tmp_path, "    initial_load:\n      dumpling: x\n" + extra, protocol=protocol)
    with pytest.raises(ProjectError) as e:
        load_project(root)
    assert message in str(e.value)


def test_validate_reads_the_export(tmp_path, capsys):
    root = _project(tmp_path, "    initial_load:\n      dumpling: exp\n")
    assert cli.main(["validate", "--project", str(root)]) == 1
    err = capsys.readouterr().err
    assert "sources/s.yml:5: initial_load: source s: exp: cannot list the export's folder" in err
    (root / "exp").mkdir()
    assert cli.main(["validate", "--project", str(root)]) == 1
    err = capsys.readouterr().err
    assert "sources/s.yml:5: initial_load: source s: exp/metadata: no such file" in err
    schema = TableSchema("shop", "t", (Column("id", "int", nullable=False),), ("id",))
    write_export(root / "exp", [(schema, [{"id": 1}])], TS, DumplingFlags())
    assert cli.main(["validate", "--project", str(root)]) == 0
    (root / "exp" / "metadata").write_text("Started dump at: x\n")
    assert cli.main(["validate", "--project", str(root)]) == 1
    assert "exp/metadata: no `Pos:`" in capsys.readouterr().err
