"""Which creates delta-rs takes (`rs_create`): protocol 1/2 types and properties only, the
session's property defaults under the statement's. That the table is then the statement's
own is tests/spark/test_rs_create.py."""

from __future__ import annotations

import json

import pytest

from ticdc_sync.spark.runtime.rs_create import PlainCreate, configuration, delta_type, schema_json
from ticdc_sync.spark.staging.state_table import ddl_columns


@pytest.mark.parametrize(
    ("sql", "delta"),
    [
        ("TINYINT", "byte"),
        ("smallint", "short"),
        ("INT", "integer"),
        ("BIGINT", "long"),
        ("DECIMAL(20,0)", "decimal(20,0)"),
        ("decimal(12, 4)", "decimal(12,4)"),
        ("FLOAT", "float"),
        ("DOUBLE", "double"),
        ("STRING", "string"),
        ("BINARY", "binary"),
        ("BOOLEAN", "boolean"),
        ("DATE", "date"),
        ("timestamp", "timestamp"),
        ("ARRAY<STRING>", {"type": "array", "elementType": "string", "containsNull": True}),
        (
            "MAP<STRING, DECIMAL(10,2)>",
            {
                "type": "map",
                "keyType": "string",
                "valueType": "decimal(10,2)",
                "valueContainsNull": True,
            },
        ),
    ],
)
def test_protocol_1_2_types_have_their_delta_names(sql, delta):
    assert delta_type(sql) == delta


@pytest.mark.parametrize(
    "sql", ["TIMESTAMP_NTZ", "ARRAY<TIMESTAMP_NTZ>", "MAP<STRING, TIMESTAMP_NTZ>", "VARIANT", "X"]
)
def test_other_types_are_left_to_the_statement(sql):
    assert delta_type(sql) is None
    assert schema_json([("a", "BIGINT"), ("b", sql)]) is None


def test_timestamp_ntz_is_known_where_asked():
    assert delta_type("TIMESTAMP_NTZ", ntz=True) == "timestamp_ntz"
    assert delta_type("ARRAY<TIMESTAMP_NTZ>", ntz=True) == {
        "type": "array",
        "elementType": "timestamp_ntz",
        "containsNull": True,
    }
    assert delta_type("VARIANT", ntz=True) is None


def test_the_schema_is_nullable_columns_in_order():
    got = json.loads(schema_json([("b", "STRING"), ("a", "BIGINT")]) or "")
    assert got == {
        "type": "struct",
        "fields": [
            {"name": "b", "type": "string", "nullable": True, "metadata": {}},
            {"name": "a", "type": "long", "nullable": True, "metadata": {}},
        ],
    }


def test_properties_are_the_defaults_then_the_statements_and_stay_at_protocol_1_2():
    plain = PlainCreate((("a", "BIGINT"),), None, (("delta.appendOnly", "false"),))
    defaults = {"delta.enableChangeDataFeed": "false", "delta.appendOnly": "true"}
    assert configuration(plain, defaults) == {
        "delta.enableChangeDataFeed": "false",
        "delta.appendOnly": "false",
    }
    parquet = PlainCreate((), None, (("parquet.page.row.count.limit", "100"),))
    assert configuration(parquet, {}) == {"parquet.page.row.count.limit": "100"}
    for key, value in (
        ("delta.enableDeletionVectors", "true"),
        ("delta.enableChangeDataFeed", "true"),
        ("delta.columnMapping.mode", "name"),
        ("delta.feature.timestampNtz", "supported"),
        ("delta.minWriterVersion", "7"),
    ):
        assert configuration(PlainCreate((), None, ((key, value),)), {}) is None, key
        assert configuration(PlainCreate((), None, ()), {key: value}) is None, key


def test_a_state_tables_columns_split_outside_brackets():
    assert ddl_columns("`source` STRING, m MAP<STRING, STRING>, d DECIMAL(10, 2)") == (
        ("source", "STRING"),
        ("m", "MAP<STRING, STRING>"),
        ("d", "DECIMAL(10, 2)"),
    )
