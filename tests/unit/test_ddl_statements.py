"""parse_ddl clause kinds, apply_statement Delta changes, delta_sql text, protocol hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shared_paths import SHARED, needs_shared
from ticdc_sync import ddl
from ticdc_sync.core.errors import DdlError
from ticdc_sync.core.model import DdlKind, Defaults, Output, Project
from ticdc_sync.ddl import (
    AddColumn,
    ChangeColumnType,
    ChangeKey,
    CreateTarget,
    DropColumn,
    DropTarget,
    MoveColumn,
    NoOp,
    RenameColumn,
    RenameTarget,
    SetDefault,
    TruncateTarget,
    Unsupported,
    apply_statement,
    delta_sql,
    parse_ddl,
    parse_schema_sql,
)
from ticdc_sync.ddl.statements import (
    AlterTable,
    CreateIndex,
    CreateTable,
    DropIndex,
    DropTable,
    PartitionClause,
    RecoverTable,
    RenameTables,
    SchemaObject,
    TiFlashClause,
    TruncateTable,
    Unknown,
)
from ticdc_sync.ddl.timeline import replay_script

CORPUS = SHARED / "corpus/canal-ddl-meta"
BASE = """CREATE TABLE shop.t (
  id int NOT NULL, a int, b varchar(10) DEFAULT 'x', d decimal(10,2), f float,
  e enum('p','q'), PRIMARY KEY (id) /*T![clustered_index] CLUSTERED */
)"""


EMPTY = Project("p", Path("."), Output("dev"), Defaults(), (), ())


def base():
    return parse_schema_sql(BASE, None, "t.sql")[0]


def run(sql: str, schema=None):
    schema = base() if schema is None else schema
    changes = []
    for st in parse_ddl(sql, "shop"):
        schema, ch = apply_statement(schema, st)
        changes.extend(ch)
    return schema, changes


def test_add_column_positions_and_backfill() -> None:
    s, ch = run(
        "ALTER TABLE t ADD COLUMN n1 int NOT NULL DEFAULT 5 FIRST, "
        "ADD n2 varchar(5) NOT NULL AFTER a, ADD COLUMN n3 int, ADD (n4 bit(1) NOT NULL DEFAULT b'1', "
        "n5 date NOT NULL, n6 binary(2) NOT NULL)"
    )
    assert [c.name for c in s.columns] == [
        "n1",
        "id",
        "a",
        "n2",
        "b",
        "d",
        "f",
        "e",
        "n3",
        "n4",
        "n5",
        "n6",
    ]
    assert all(isinstance(c, AddColumn) and c.effect == "additive" for c in ch)
    n1, n2, n3, n4, n5, n6 = ch
    assert (n1.position.first, n1.backfill_sql, n1.delta_type) == (True, "5", "INT")
    assert (n2.position.after, n2.backfill_sql) == ("a", "''")  # implicit default of NOT NULL
    assert (n3.position.after, n3.backfill_sql) == ("e", None)  # nullable, no default
    assert n4.backfill_sql == "true"
    assert n5.backfill_sql is None  # zero date decodes to NULL
    assert n6.backfill_sql == "X'0000'"
    ref = "delta.`/wh/t`"
    assert delta_sql(n1, ref) == [
        "ALTER TABLE delta.`/wh/t` ADD COLUMNS (`n1` INT FIRST)",
        "UPDATE delta.`/wh/t` SET `n1` = 5",
    ]
    assert delta_sql(n3, ref) == ["ALTER TABLE delta.`/wh/t` ADD COLUMNS (`n3` INT AFTER `e`)"]


def test_add_column_current_timestamp_is_not_backfilled_but_noted() -> None:
    _, (c,) = run("ALTER TABLE t ADD ts datetime NOT NULL DEFAULT CURRENT_TIMESTAMP")
    assert c.backfill_sql is None and "ALTER time" in c.note


def test_drop_rename_change_modify() -> None:
    s, ch = run(
        "ALTER TABLE t DROP COLUMN f, RENAME COLUMN a TO a2, CHANGE b b2 varchar(20), "
        "MODIFY d decimal(12,2), MODIFY a2 bigint AFTER d, MODIFY e enum('p','q','r')"
    )
    assert [c.name for c in s.columns] == ["id", "b2", "d", "a2", "e"]
    assert s.column("e").members == ("p", "q", "r")
    kinds = [(type(c).__name__, getattr(c, "change", None)) for c in ch]
    assert kinds == [
        ("DropColumn", None),
        ("RenameColumn", None),
        ("RenameColumn", None),
        ("ChangeColumnType", "same"),
        ("SetDefault", None),  # CHANGE without DEFAULT drops the default
        ("ChangeColumnType", "widen"),
        ("ChangeColumnType", "widen"),
        ("MoveColumn", None),
        ("ChangeColumnType", "same"),
    ]
    assert ch[0].effect == "destructive" and ch[0].kind is DdlKind.DROP_COLUMN
    assert ch[3].effect == "none" and ch[5].effect == "additive"
    ref = "delta.`/x`"
    assert delta_sql(ch[0], ref) == ["ALTER TABLE delta.`/x` DROP COLUMN `f`"]
    assert delta_sql(ch[1], ref) == ["ALTER TABLE delta.`/x` RENAME COLUMN `a` TO `a2`"]
    assert delta_sql(ch[3], ref) == []
    assert delta_sql(ch[5], ref) == ["ALTER TABLE delta.`/x` ALTER COLUMN `d` TYPE DECIMAL(12,2)"]
    assert delta_sql(ch[7], ref) == ["ALTER TABLE delta.`/x` ALTER COLUMN `a2` AFTER `d`"]


def test_narrowing_is_destructive_and_needs_policy() -> None:
    _, ch = run("ALTER TABLE t MODIFY a smallint")
    (c,) = ch
    assert isinstance(c, ChangeColumnType)
    assert (c.change, c.kind, c.effect) == ("narrow", DdlKind.NARROW_COLUMN, "destructive")
    assert delta_sql(c, "r") == []


def test_defaults() -> None:
    s, ch = run("ALTER TABLE t ALTER COLUMN a SET DEFAULT 3, ALTER b DROP DEFAULT")
    assert ch == [SetDefault("a", "3"), SetDefault("b", None)]
    assert s.column("a").default == "3" and not s.column("b").has_default
    assert all(c.kind is DdlKind.SET_DEFAULT and delta_sql(c, "r") == [] for c in ch)


def test_primary_and_unique_keys_change_the_merge_key() -> None:
    s, ch = run("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)")
    assert s.primary_key == ("id", "a") and not s.column("a").nullable
    assert ch == [ChangeKey(("id", "a"))]
    s, ch = run("ALTER TABLE t DROP PRIMARY KEY")
    assert ch == [ChangeKey(())]
    s, ch = run("ALTER TABLE t MODIFY a int NOT NULL, ADD UNIQUE KEY uk (a)", s)
    assert s.unique_keys == (("a",),) and ch[-1] == ChangeKey(("a",))
    s, ch = run("DROP INDEX uk ON t", s)
    assert s.unique_keys == () and ch[-1] == ChangeKey(())
    s, ch = run("CREATE UNIQUE INDEX u2 ON t (a)", s)
    assert ch[-1] == ChangeKey(("a",)) and ch[-1].kind is DdlKind.PRIMARY_KEY


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t ADD INDEX i (a)",
        "ALTER TABLE t DROP KEY i",
        "ALTER TABLE t RENAME INDEX i TO j",
        "ALTER TABLE t ALTER INDEX i INVISIBLE",
        "ALTER TABLE t COMMENT = 'c'",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
        "ALTER TABLE t DEFAULT CHARSET = utf8mb4",
        "ALTER TABLE t ENGINE = InnoDB",
        "ALTER TABLE t AUTO_INCREMENT = 100",
        "ALTER TABLE t SET TIFLASH REPLICA 2 LOCATION LABELS 'zone'",
        "ALTER TABLE t PLACEMENT POLICY = p1",
        "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (100))",
        "ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4",
        "ALTER TABLE t REMOVE PARTITIONING",
        "ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION a VALUES LESS THAN (5))",
        "ALTER TABLE t COALESCE PARTITION 2",
        "ALTER TABLE t ADD FOREIGN KEY fk (a) REFERENCES o (id)",
        "CREATE INDEX i2 ON t (a)",
        "CREATE VIEW v AS SELECT * FROM t",
        "DROP VIEW v",
        "CREATE SEQUENCE s",
        "CREATE PLACEMENT POLICY p1 PRIMARY_REGION='r1' REGIONS='r1'",
        "CREATE DATABASE d2",
        "ALTER DATABASE shop CHARACTER SET utf8mb4",
    ],
)
def test_noops(sql: str) -> None:
    s0 = base()
    s, ch = run(sql, s0)
    assert ch and all(isinstance(c, NoOp) and c.effect == "none" for c in ch), ch
    assert s.columns == s0.columns
    assert all(delta_sql(c, "r") == [] for c in ch)


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("ALTER TABLE t TRUNCATE PARTITION p0, p1", DdlKind.PARTITION),
        ("ALTER TABLE t DROP PARTITION p0", DdlKind.PARTITION),
        ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t2", DdlKind.PARTITION),
        ("RECOVER TABLE t", DdlKind.RECOVER_TABLE),
        ("FLASHBACK TABLE t TO t3", DdlKind.RECOVER_TABLE),
        ("ALTER TABLE t FROB x", DdlKind.UNPARSED),
    ],
)
def test_unsupported(sql: str, kind: DdlKind) -> None:
    _, ch = run(sql)
    assert [(type(c), c.kind, c.effect) for c in ch] == [(Unsupported, kind, "unsupported")]


def test_table_level_statements() -> None:
    s, ch = run("TRUNCATE TABLE t")
    assert ch == [TruncateTarget()] and delta_sql(ch[0], "r") == ["DELETE FROM r"]
    s, ch = run("DROP TABLE t")
    assert s is None and ch == [DropTarget()] and delta_sql(ch[0], "r") == []
    s, ch = run("RENAME TABLE t TO t9, other TO o2")
    assert (s.db, s.table) == ("shop", "t9") and ch == [RenameTarget("shop", "t9")]
    s, ch = run("ALTER TABLE t RENAME TO s2.t8")
    assert (s.db, s.table) == ("s2", "t8") and ch == [RenameTarget("s2", "t8")]
    s, ch = apply_statement(None, parse_ddl(BASE, None)[0])
    assert isinstance(ch[0], CreateTarget) and ch[0].effect == "additive"
    sql = delta_sql(ch[0], "delta.`/w`")[0]
    assert sql.startswith("CREATE TABLE IF NOT EXISTS delta.`/w` (\n  `id` INT,")
    assert "DECIMAL(10,2)" in sql and "`_commit_ts` BIGINT" in sql


def test_statement_shapes() -> None:
    st = parse_ddl(
        "RENAME TABLE a TO b, x.c TO y.d; DROP TABLE IF EXISTS a1, b1; TRUNCATE t;"
        "ALTER TABLE t SET TIFLASH REPLICA 1; RECOVER TABLE t; CREATE INDEX i ON t (a);"
        "DROP INDEX i ON t; ALTER TABLE t DROP PARTITION p1, p2",
        "db",
    )
    assert st[0] == RenameTables(((("db", "a"), ("db", "b")), (("x", "c"), ("y", "d"))), st[0].sql)
    assert [type(s) for s in st] == [
        RenameTables,
        DropTable,
        DropTable,
        TruncateTable,
        AlterTable,
        RecoverTable,
        CreateIndex,
        DropIndex,
        AlterTable,
    ]
    assert isinstance(st[4].clauses[0], TiFlashClause)
    assert st[8].clauses[0] == PartitionClause("DROP", "DROP PARTITION p1 , p2", ("p1", "p2"))


def test_errors_when_history_is_out_of_step() -> None:
    with pytest.raises(DdlError, match="does not exist"):
        run("ALTER TABLE t DROP COLUMN nope")
    with pytest.raises(DdlError, match="already exists"):
        run("ALTER TABLE t ADD COLUMN a int")
    with pytest.raises(DdlError, match="no known schema"):
        apply_statement(None, parse_ddl("ALTER TABLE t ADD x int", "d")[0])


def test_unknown_statements_never_guess() -> None:
    (u,) = parse_ddl("ALTER TABLE t ADD COLUMN x notatype", "d")
    assert isinstance(u, Unknown) and "unknown column type" in u.reason
    (u,) = parse_ddl("GRANT ALL ON *.* TO x", "d")
    assert isinstance(u, Unknown)


def test_open_protocol_hints() -> None:
    (u,) = parse_ddl("DROP TABLE t", "d", "5")
    assert isinstance(u, Unknown) and "ActionType 5 AddColumn" in u.reason
    (ok,) = parse_ddl("ALTER TABLE t ADD a int, ADD b int", "d", "61")
    assert isinstance(ok, AlterTable)
    (noop,) = parse_ddl("ALTER TABLE t SET TIFLASH MODE fast", "d", "30")
    assert isinstance(noop, SchemaObject)
    (u,) = parse_ddl("ALTER TABLE t WEIRD", "d", "12")
    assert isinstance(u, Unknown)
    (c,) = parse_ddl("CREATE TABLE `d`.`x` (a int);", "d", "60")  # tiflow split CreateTables
    assert isinstance(c, CreateTable)
    assert ddl.open_protocol_action(3).kind is DdlKind.CREATE_TABLE
    assert ddl.open_protocol_action(23).kind is DdlKind.PARTITION
    assert ddl.open_protocol_action(25).kind is DdlKind.RECOVER_TABLE
    assert ddl.open_protocol_action(32).kind is DdlKind.PRIMARY_KEY
    assert ddl.open_protocol_action(61).kind is None
    assert ddl.open_protocol_action(12).kind is None
    assert ddl.open_protocol_action(999).kind is None
    assert ddl.open_protocol_action(47).name == "RenameTables"


def test_canal_hints() -> None:
    (u,) = parse_ddl("TRUNCATE TABLE t", "d", "ALTER")
    assert isinstance(u, Unknown)
    (ok,) = parse_ddl("CREATE INDEX i ON t (a)", "d", "CINDEX")
    assert isinstance(ok, CreateIndex)
    (ok,) = parse_ddl("ALTER TABLE t EXCHANGE PARTITION p WITH TABLE t2", "d", "QUERY")
    assert isinstance(ok, AlterTable)
    assert set(ddl.CANAL_DDL_TYPES) == {
        "CREATE",
        "ALTER",
        "ERASE",
        "TRUNCATE",
        "RENAME",
        "CINDEX",
        "DINDEX",
        "QUERY",
    }


def test_describe_every_change() -> None:
    s = base()
    changes = [
        CreateTarget(s),
        AddColumn("c", "INT"),
        DropColumn("c"),
        RenameColumn("a", "b"),
        ChangeColumnType("c", "INT", "BIGINT", "widen"),
        SetDefault("c", "1"),
        TruncateTarget(),
        DropTarget(),
        RenameTarget("d", "t"),
        ChangeKey(("id",)),
        NoOp("x"),
        Unsupported("y"),
    ]
    for c in changes:
        assert c.describe()
        assert c.effect in ("additive", "destructive", "unsupported", "none")
        assert isinstance(c.kind, DdlKind)
    assert MoveColumn.__dataclass_fields__["kind"].default is DdlKind.OTHER


@needs_shared
def test_canal_single_file_cases() -> None:
    cat = replay_script(EMPTY, (CORPUS / "ddl_test1.sql").read_text(), "yushitai_test")
    t = cat.get(("yushitai_test", "card_record"))
    assert t is not None and t.column("customization_id") is not None
    assert cat.get(("yushitai_test", "_card_record_gho")) is None
    cat = replay_script(EMPTY, (CORPUS / "ddl_test3.sql").read_text(), "test")
    assert cat[("test", "quniya4")].columns[0].name == "id"
    cat = replay_script(EMPTY, (CORPUS / "ddl_create_if_not_exist.sql").read_text(), "test")
    assert len(cat[("test", "table_x1")].columns) == 3
    cat = replay_script(EMPTY, (CORPUS / "ddl_test2.sql").read_text(), "test")
    (t,) = cat.values()
    assert t.primary_key == ("id",) and ("name", "alias") in t.unique_keys
