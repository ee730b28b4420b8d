"""The Spark SQL that ddl.delta_sql generates runs on real Delta tables and does what it says."""

from __future__ import annotations

import pytest

from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.ddl import apply_statement, delta_sql, parse_ddl, parse_schema_sql
from ticdc_sync.plan import table_features

pytestmark = pytest.mark.spark


def _evolve(spark, ref, schema, sql):
    for st in parse_ddl(sql, "shop"):
        schema, changes = apply_statement(schema, st)
        for ch in changes:
            # The plan enables the feature a change needs in a part of its own before it.
            feature = table_features.needed_by(ch)
            if feature is not None:
                spark.sql(table_features.enable_sql(feature, ref))
            for stmt in delta_sql(ch, ref):
                spark.sql(stmt)
    return schema


def _cols(spark, ref):
    return [(f.name, f.dataType.simpleString()) for f in spark.table(ref).schema.fields]


def test_ddl_sequence_on_delta(spark, tmp_path) -> None:
    ref = table_ref(str(tmp_path / "t"))
    schema = None
    schema = _evolve(
        spark,
        ref,
        schema,
        "CREATE TABLE t (id int PRIMARY KEY, a int, d decimal(10,2), f float, s varchar(5))",
    )
    spark.sql(
        f"INSERT INTO {ref} VALUES (1, 10, 1.50, 0.5, 'x', 100), (2, 20, 2.50, 1.5, 'y', 100)"
    )

    # ADD COLUMN with position, NOT NULL DEFAULT backfill, implicit default backfill.
    schema = _evolve(
        spark,
        ref,
        schema,
        "ALTER TABLE t ADD COLUMN n int NOT NULL DEFAULT 7 AFTER id, "
        "ADD COLUMN z varchar(3) NOT NULL FIRST, ADD COLUMN q int",
    )
    assert [c for c, _ in _cols(spark, ref)] == [
        "z",
        "id",
        "n",
        "a",
        "d",
        "f",
        "s",
        "q",
        "_commit_ts",
    ]
    rows = spark.sql(f"SELECT id, n, z, q FROM {ref} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, 7, "", None), (2, 7, "", None)]

    # RENAME then write the renamed column.
    schema = _evolve(spark, ref, schema, "ALTER TABLE t RENAME COLUMN a TO a2")
    spark.sql(f"UPDATE {ref} SET a2 = 11 WHERE id = 1")
    assert spark.sql(f"SELECT a2 FROM {ref} WHERE id = 1").first()[0] == 11

    # DROP then re-ADD the same name: old values must not come back.
    schema = _evolve(spark, ref, schema, "ALTER TABLE t DROP COLUMN s")
    schema = _evolve(spark, ref, schema, "ALTER TABLE t ADD COLUMN s varchar(5)")
    assert spark.sql(f"SELECT count(*) FROM {ref} WHERE s IS NOT NULL").first()[0] == 0

    # Type widening: INT -> BIGINT, DECIMAL(10,2) -> DECIMAL(12,2), FLOAT -> DOUBLE.
    schema = _evolve(
        spark,
        ref,
        schema,
        "ALTER TABLE t MODIFY a2 bigint, MODIFY d decimal(12,2), MODIFY f double, "
        "MODIFY z varchar(30)",
    )
    types = dict(_cols(spark, ref))
    assert (types["a2"], types["d"], types["f"], types["z"]) == (
        "bigint",
        "decimal(12,2)",
        "double",
        "string",
    )
    spark.sql(f"UPDATE {ref} SET a2 = 9000000000, d = 1234567890.12 WHERE id = 2")
    r = spark.sql(f"SELECT a2, d, f FROM {ref} WHERE id = 2").first()
    assert (r[0], str(r[1]), r[2]) == (9000000000, "1234567890.12", 1.5)

    # CHANGE = rename + widen, and a move.
    schema = _evolve(spark, ref, schema, "ALTER TABLE t CHANGE n n2 bigint FIRST")
    assert _cols(spark, ref)[0] == ("n2", "bigint")
    assert [c.name for c in schema.columns] == [c for c, _ in _cols(spark, ref)][:-1]

    # TRUNCATE empties the target; inserts afterwards land.
    schema = _evolve(spark, ref, schema, "TRUNCATE TABLE t")
    assert spark.table(ref).count() == 0
    spark.sql(
        f"INSERT INTO {ref} (id, n2, z, a2, d, f, q, s, _commit_ts) VALUES (3, 1, 'k', 1, 1.00, 1.0, NULL, 's', 200)"
    )
    assert spark.table(ref).count() == 1


def test_create_from_seed_and_backfill_literals(spark, tmp_path) -> None:
    (schema,) = parse_schema_sql(
        "CREATE TABLE shop.u (id bigint unsigned PRIMARY KEY, b bit(1), e enum('a','b'))",
        None,
        "s.sql",
    )
    ref = table_ref(str(tmp_path / "u"))
    _evolve(
        spark,
        ref,
        None,
        "CREATE TABLE u (id bigint unsigned PRIMARY KEY, b bit(1), e enum('a','b'))",
    )
    spark.sql(f"INSERT INTO {ref} VALUES (18446744073709551615, true, 'a', 1)")
    _evolve(
        spark,
        ref,
        schema,
        "ALTER TABLE u ADD COLUMN flag bit(1) NOT NULL DEFAULT b'1', "
        "ADD COLUMN e2 enum('x','y') NOT NULL, ADD COLUMN bin varbinary(4) NOT NULL DEFAULT 'ab', "
        "ADD COLUMN dt datetime NOT NULL DEFAULT '2024-01-02 03:04:05', "
        "ADD COLUMN dd decimal(5,2) NOT NULL DEFAULT '1.5'",
    )
    r = spark.sql(f"SELECT flag, e2, bin, dt, dd FROM {ref}").first()
    assert r[0] is True and r[1] == "x" and bytes(r[2]) == b"ab"
    assert str(r[3]) == "2024-01-02 03:04:05" and str(r[4]) == "1.50"
