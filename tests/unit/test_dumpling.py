"""Dumpling exports: layout discovery, `metadata`, file names, schema files, and bad exports."""

from __future__ import annotations

import pytest

from testkit.dumpling import DumplingFlags, create_table_sql, metadata_text, write_export
from ticdc_sync.codecs import dumpling_export as dumpling
from ticdc_sync.core.model import DumplingOptions, ExportFiletype
from ticdc_sync.core.upstream import Column, TableSchema
from ticdc_sync.ddl import parse_schema_sql

TS = 445644800004909736
C = Column
ORDERS = TableSchema(
    "shop",
    "orders",
    (
        C("id", "bigint", nullable=False),
        C(
            "status",
            "enum",
            members=("new", "it's"),
            nullable=False,
            has_default=True,
            default="new",
        ),
        C("total", "decimal", precision=14, scale=2),
        C("note", "varchar", length=50, has_default=True, default="a'b\\c"),
        C("at", "timestamp", fsp=3),
        C("flags", "bit", length=5),
        C("avatar", "varbinary", length=8, binary=True),
    ),
    ("id",),
)
ODD = TableSchema("my.db", "t-schema/x", (C("id", "int", nullable=False),), ("id",))


def _export(tmp_path, tables, flags=None, ts=TS):
    folder = tmp_path / "exp"
    write_export(folder, tables, ts, flags)
    return folder


def _discover(folder, filetype=ExportFiletype.SQL):
    return dumpling.discover(str(folder), "exp", DumplingOptions(filetype=filetype))


def test_names_escape_like_dumpling_and_back():
    assert dumpling.escape_name("my.db") == "my%2Edb"
    assert dumpling.escape_name("t-schema/x") == "t%2Dschema%2Fx"
    assert dumpling.escape_name("t-SCHEMA") == "t%2DSCHEMA"
    assert dumpling.escape_name("a%b") == "a%25b"
    assert dumpling.escape_name("naïve") == "naïve"
    for name in ("my.db", "t-schema/x", "a%b", "x:y*z", "tab\there"):
        assert dumpling.unescape_name(dumpling.escape_name(name)) == name


def test_metadata_gives_the_snapshot_tso():
    assert dumpling.parse_metadata(metadata_text(TS)) == TS
    newer = metadata_text(TS).replace("SHOW MASTER STATUS:", "SHOW BINARY LOG STATUS:")
    assert dumpling.parse_metadata(newer) == TS
    # The block written after the connection pool is set up repeats the snapshot.
    again = metadata_text(TS).replace(
        "Finished",
        f"SHOW MASTER STATUS: /* AFTER CONNECTION POOL ESTABLISHED */\n\tLog: "
        f"tidb-binlog\n\tPos: {TS}\n\tGTID:\n\nFinished",
    )
    assert dumpling.parse_metadata(again) == TS


@pytest.mark.parametrize(
    "text, message",
    [
        ("Started dump at: x\nFinished dump at: y\n", "no `Pos:`"),
        ("SHOW MASTER STATUS:\n\tLog: mysql-bin.000001\n\tPos: 106\n", "metadata:3: `Pos: 106`"),
        ("SHOW MASTER STATUS:\n\tPos: abc\n", "metadata:2: `Pos: abc` is not a TiDB TSO"),
        (
            f"SHOW MASTER STATUS:\n\tPos: {TS}\n\nSHOW MASTER STATUS:\n\tPos: {TS + 1}\n",
            "the positions differ",
        ),
        # A follower's position is not the snapshot.
        (f"SHOW SLAVE STATUS:\n\tHost: h\n\tPos: {TS}\n", "no `Pos:`"),
    ],
)
def test_metadata_without_a_tso_is_refused(text, message):
    with pytest.raises(dumpling.ExportError, match="metadata") as e:
        dumpling.parse_metadata(text)
    assert message in str(e.value)


def test_create_table_text_reads_back_as_the_same_schema():
    for schema in (ORDERS, ODD):
        (back,) = parse_schema_sql(create_table_sql(schema), schema.db, "x.sql")
        assert back.columns == schema.columns
        assert back.primary_key == schema.primary_key


def test_discover_finds_tables_files_and_tso(tmp_path):
    rows = [{"id": i, "status": "new", "total": None} for i in range(5)]
    folder = _export(tmp_path, [(ORDERS, rows), (ODD, [{"id": 1}])], DumplingFlags(rows_per_file=2))
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "metadata",
        "my%2Edb-schema-create.sql",
        "my%2Edb.t%2Dschema%2Fx-schema.sql",
        "my%2Edb.t%2Dschema%2Fx.000000000.sql",
        "shop-schema-create.sql",
        "shop.orders-schema.sql",
        "shop.orders.000000000.sql",
        "shop.orders.000000001.sql",
        "shop.orders.000000002.sql",
    ]
    exp = _discover(folder)
    assert exp.snapshot_ts == TS
    assert sorted(exp.tables) == [("my.db", "t-schema/x"), ("shop", "orders")]
    t = exp.table("shop", "ORDERS")
    assert t is not None and t.schema.columns == ORDERS.columns
    assert [f.name for f in t.files] == [
        "shop.orders.000000000.sql",
        "shop.orders.000000001.sql",
        "shop.orders.000000002.sql",
    ]
    assert t.bytes == sum((folder / f.name).stat().st_size for f in t.files)
    assert all(f.location == f"{folder}/{f.name}" and f.compression is None for f in t.files)
    odd = exp.table("my.db", "t-schema/x")
    assert odd is not None and [f.name for f in odd.files] == [
        "my%2Edb.t%2Dschema%2Fx.000000000.sql"
    ]


def test_discover_reads_compressed_schema_and_data_files(tmp_path):
    for how, ext in (("gzip", ".gz"), ("zstd", ".zst")):
        folder = tmp_path / how
        write_export(folder, [(ORDERS, [{"id": 1}])], TS, DumplingFlags(compress=how))
        exp = dumpling.discover(str(folder), how, DumplingOptions())
        t = exp.table("shop", "orders")
        assert t is not None and t.schema.columns == ORDERS.columns
        assert [(f.name, f.compression) for f in t.files] == [
            (f"shop.orders.000000000.sql{ext}", how)
        ]


def test_snappy_exports_are_refused_with_a_hint(tmp_path):
    folder = _export(tmp_path, [(ORDERS, [{"id": 1}])], DumplingFlags(compress="snappy"))
    with pytest.raises(dumpling.ExportError, match="snappy") as e:
        _discover(folder)
    assert "exp/shop-schema-create.sql.snappy" in str(e.value)
    assert "--compress gzip" in str(e.value)


def test_views_and_tables_without_rows(tmp_path):
    folder = _export(tmp_path, [(ORDERS, [])])
    (folder / "shop.v-schema.sql").write_text("CREATE TABLE `v` (`id` int);\n")
    (folder / "shop.v-schema-view.sql").write_text("CREATE VIEW v AS SELECT 1;\n")
    (folder / "shop.s-schema-sequence.sql").write_text("CREATE SEQUENCE s;\n")
    exp = _discover(folder)
    assert sorted(exp.tables) == [("shop", "orders")]
    assert exp.tables[("shop", "orders")].files == ()


def test_generated_columns_are_not_in_data_files(tmp_path):
    (s,) = parse_schema_sql(
        "CREATE TABLE t (id int PRIMARY KEY, a int, b int AS (a + 1) STORED, c int)", "d", "x"
    )
    assert dumpling.data_columns(s) == ("id", "a", "c")
    assert dumpling.data_columns(ORDERS) == tuple(c.name for c in ORDERS.columns)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda f: (f / "metadata").unlink(), "exp/metadata: no such file"),
        (
            lambda f: (f / "metadata").write_text("Started dump at: x\n"),
            "exp/metadata: no `Pos:`",
        ),
        (
            lambda f: (f / "shop.orders-schema.sql").unlink(),
            "exp/shop.orders.000000000.sql: data of shop.orders without its schema file",
        ),
        (
            lambda f: (f / "shop.orders.000000000.sql").rename(f / "shop.orders.000000000.csv"),
            "the export holds .csv data files, but `initial_load.options.filetype` is sql",
        ),
        (
            lambda f: (f / "orders-part1.sql").write_text("x"),
            "exp/orders-part1.sql: not a file name Dumpling's default naming produces",
        ),
    ],
)
def test_bad_exports_name_the_file(tmp_path, mutate, message):
    folder = _export(tmp_path, [(ORDERS, [{"id": 1}])])
    mutate(folder)
    with pytest.raises(dumpling.ExportError) as e:
        _discover(folder)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "/*!40101 SET NAMES binary*/;\nCREATE TABLE `orders` (\n  `id` bigint NOT NULL,\n"
            "  `x` varchar(10) WHATEVER\n);\n",
            "exp/shop.orders-schema.sql:2: statement 1: unknown column option 'WHATEVER'",
        ),
        (
            "CREATE TABLE `other` (a int);\n",
            "exp/shop.orders-schema.sql: expected the CREATE TABLE of shop.orders, found shop.other",
        ),
    ],
)
def test_a_schema_file_that_cannot_be_read_sets_its_table_aside(tmp_path, text, message):
    """The table is not loaded (nor its rows read); the other tables are found as usual."""
    folder = _export(tmp_path, [(ORDERS, [{"id": 1}]), (ORDERS.with_(table="b"), [{"id": 2}])])
    (folder / "shop.orders-schema.sql").write_text(text)
    e = _discover(folder)
    assert list(e.tables) == [("shop", "b")]
    ((k, u),) = e.unreadable.items()
    assert k == ("shop", "orders") and (u.db, u.table) == ("shop", "orders")
    assert u.schema_file == "shop.orders-schema.sql" and message in u.why


def test_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(dumpling.ExportError, match="cannot list the export's folder"):
        _discover(tmp_path / "nope")
