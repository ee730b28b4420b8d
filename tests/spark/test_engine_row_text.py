"""Canal-JSON and Debezium row images staged as JSON text (`before_json`/`after_json`).

A partial `old` (only-output-updated-columns, codec facts 1.5) still moves a key when it
carries the key, and keeps it when it does not. An image that repeats a column name or
is not a JSON object is a bad record with its reason, never a silently chosen value. A
staging table from before the text columns existed gains them, and rows it staged as maps
apply next to rows staged as text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.spark._encoders import canal, debezium
from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core import events
from ticdc_sync.core.model import Protocol, Source
from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.spark import runner
from ticdc_sync.spark.staging.decode import decode_records, with_row_maps
from ticdc_sync.spark.staging.table import STAGED_SCHEMA
from ticdc_sync.warehouse.locations import state_location, warehouse_path

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10), n INT);\n"
MT = {"id": "int", "v": "varchar", "n": "int"}


def row(op: str, ts: int, data: dict, old: dict | None = None) -> bytes:
    return canal_row("shop", "t", op, ts, data, MT, ["id"], old)


def replace_data(message: bytes, data_text: str) -> bytes:
    """The message with its `data` array replaced by raw JSON text (json.dumps cannot
    write an object that repeats a name)."""
    msg = json.loads(message)
    msg["data"] = "@@DATA@@"
    return json.dumps(msg).replace('"@@DATA@@"', data_text).encode()


def test_partial_old_moves_or_keeps_the_key(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    write_captures(
        root,
        "t",
        [
            (0, 0, None, row("INSERT", 100, {"id": "1", "v": "a", "n": "1"})),
            (0, 1, None, row("INSERT", 101, {"id": "5", "v": "e", "n": "5"})),
            # old without the key: the key did not change.
            (0, 2, None, row("UPDATE", 110, {"id": "1", "v": "a2", "n": "1"}, {"v": "a"})),
            # old with the key only: 5 -> 6 deletes 5.
            (0, 3, None, row("UPDATE", 111, {"id": "6", "v": "e", "n": "5"}, {"id": "5"})),
            (0, 4, None, wm(120)),
        ],
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    rows = read_target(spark, project, "t", "id")
    assert [(r["id"], r["v"], r["n"], r["_commit_ts"]) for r in rows] == [
        (1, "a2", 1, 110),
        (6, "e", 5, 111),
    ]


def test_an_image_repeating_a_name_or_not_an_object_is_bad(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        defaults="defaults:\n  on_bad_message: quarantine\n",
    )
    good = row("INSERT", 100, {"id": "1", "v": "a", "n": "1"})
    write_captures(
        root,
        "t",
        [
            (0, 0, None, good),
            (0, 1, None, replace_data(good, '[{"id": "2", "v": "x", "v": "y", "n": "2"}]')),
            (0, 2, None, replace_data(good, '["id=3"]')),
            (0, 3, None, row("INSERT", 103, {"id": "4", "v": "d", "n": "4"})),
            (0, 4, None, wm(120)),
        ],
    )
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    assert [r["id"] for r in read_target(spark, project, "t", "id")] == [1, 4]
    q = (
        spark.read.format("delta")
        .load(str(Path(warehouse_path(project)) / "_ticdc_sync" / "quarantine"))
        .orderBy("offset")
        .collect()
    )
    assert [(r.offset, r.reason) for r in q] == [
        (1, "Canal-JSON row repeats a column name"),
        (2, "invalid Canal-JSON: an element of data or old is not a JSON object"),
    ]


def test_a_staging_table_of_maps_gains_text_columns_and_both_apply(spark, tmp_path):
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA)
    project = load(root)
    events = state_location(warehouse_path(project), "events")
    old_schema = STAGED_SCHEMA.split(", `before_json`")[0]
    assert "before_json" not in old_schema and "kafka_ts" in old_schema
    spark.sql(f"CREATE TABLE {table_ref(events)} ({old_schema}) USING delta")

    # Staged, not yet resolved (no watermark).
    write_captures(
        root,
        "t",
        [
            (0, 0, None, row("INSERT", 100, {"id": "1", "v": "a", "n": "1"})),
            (0, 1, None, row("INSERT", 101, {"id": "2", "v": "b", "n": "2"})),
            (0, 2, None, row("UPDATE", 102, {"id": "3", "v": "b", "n": "2"}, {"id": "2"})),
        ],
    )
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    cols = [f.name for f in spark.read.format("delta").load(events).schema.fields]
    assert cols[-2:] == ["before_json", "after_json"]
    # What an older ticdc-sync staged: the same rows as maps (an UPDATE's old filled).
    spark.sql(
        f"""UPDATE {table_ref(events)} SET
          after = from_json(after_json, 'MAP<STRING,STRING>'),
          before = IF(op = 'U', transform_values(from_json(after_json, 'MAP<STRING,STRING>'),
                                                 (k, x) -> IF(k = 'id', '2', x)),
                      from_json(before_json, 'MAP<STRING,STRING>')),
          after_json = NULL, before_json = NULL
        WHERE kind = 'row'"""
    )
    write_captures(
        root,
        "t",
        [
            (0, 3, None, row("UPDATE", 110, {"id": "1", "v": "a2", "n": "1"}, {"v": "a"})),
            (0, 4, None, row("DELETE", 111, {"id": "3", "v": "b", "n": "2"})),
            (0, 5, None, row("INSERT", 112, {"id": "7", "v": "g", "n": "7"})),
            (0, 6, None, wm(120)),
        ],
    )
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    staged = spark.read.format("delta").load(events).where("kind = 'row'")
    assert staged.where("after IS NOT NULL OR before IS NOT NULL").count() == 3
    assert staged.where("after_json IS NOT NULL OR before_json IS NOT NULL").count() == 3
    rows = read_target(spark, project, "t", "id")
    assert [(r["id"], r["v"], r["_commit_ts"]) for r in rows] == [(1, "a2", 110), (7, "g", 112)]


def _raw_object(message: bytes, field: str, text: str) -> bytes:
    """`message` with the JSON value at `field` (a dotted path) replaced by raw text."""
    msg = json.loads(message)
    node = msg
    *parents, last = field.split(".")
    for name in parents:
        node = node[name]
    node[last] = "@@RAW@@"
    return json.dumps(msg).replace('"@@RAW@@"', text).encode()


@pytest.mark.parametrize("protocol", ["canal-json", "debezium"])
def test_decoded_text_images_read_as_the_maps_they_replace(spark, protocol):
    """Both protocols stage row images as text: the checks that a map parse used to make
    implicitly (an object, no repeated name) are explicit, and the text reads back as the
    map it replaces, non-string values as their JSON text."""
    if protocol == "canal-json":
        ok = canal([{"id": "1", "v": "x"}], {"id": "int", "v": "varchar"})
        field, first = "data", "data"
        dup, not_object = '[{"id": "2", "v": "a", "v": "b"}]', '[["id", "3"]]'
        raw_ok = _raw_object(ok, field, '[{"id": 1, "v": 2.50, "j": {"k": [1, true]}}]')
        want_reason = "invalid Canal-JSON: an element of data or old is not a JSON object"
    else:
        ok = debezium({"id": 1, "v": "x"})
        field = first = "payload.after"
        dup, not_object = '{"id": 2, "v": "a", "v": "b"}', "[1, 2]"
        raw_ok = _raw_object(ok, field, '{"id": 1, "v": 2.50, "j": {"k": [1, true]}}')
        want_reason = "invalid Debezium: before or after is not a JSON object"
    values = [ok, _raw_object(ok, first, dup), _raw_object(ok, first, not_object), raw_ok]
    rows = [("t", 0, i, 0, None, v) for i, v in enumerate(values)]
    df = spark.createDataFrame(rows, events.RECORD_SCHEMA)
    out = with_row_maps(decode_records(df, Source("s", Protocol(protocol), ("t",))))
    got = {r.offset: r for r in out.collect()}
    assert got[0].kind == "row" and got[0].after == {"id": "1", "v": "x"}
    assert got[1].kind == "bad" and "repeats a column name" in got[1].error
    assert got[2].kind == "bad" and got[2].error == want_reason
    assert got[3].kind == "row" and got[3].after == {"id": "1", "v": "2.5", "j": '{"k":[1,true]}'}
