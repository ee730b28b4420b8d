"""A small target's MERGE runs interpreted up to `rows.SMALL_SOURCE_ROWS` collapsed changes, and
the first append to a target and the copy of a MERGE's source when their source never staged
more row changes than that; with Spark's code generation above: the same rows either way
(`rows._interpreted_conf`). A small poll is staged interpreted too (`batch.small_poll`).

The shared test session runs interpreted (tests/spark/conftest.py), so these tests turn code
generation back on around the runs: above the bound the MERGE then really runs compiled.
"""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import rows
from ticdc_sync.spark.runtime.conf import CODEGEN_FACTORY, WHOLE_STAGE_CODEGEN, session_conf
from ticdc_sync.spark.staging import batch

pytestmark = pytest.mark.spark

SCHEMA = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10), n DECIMAL(10,2));\n"
MT = {"id": "int", "v": "varchar", "n": "decimal"}
INTERPRETED = {WHOLE_STAGE_CODEGEN: "false", CODEGEN_FACTORY: "NO_CODEGEN"}


def _row(op: str, ts: int, data: dict, old: dict | None = None) -> bytes:
    return canal_row("shop", "t", op, ts, data, MT, ["id"], old)


@pytest.mark.parametrize("bound", [0, 10_000], ids=["compiled", "interpreted"])
def test_a_small_targets_merge_lands_the_same_rows_interpreted_or_compiled(
    spark, tmp_path, monkeypatch, bound
):
    chosen: list[dict[str, str]] = []
    real = rows._interpreted_conf

    def recording(source_rows: int) -> dict[str, str]:
        chosen.append(real(source_rows))
        return chosen[-1]

    monkeypatch.setattr(rows, "SMALL_SOURCE_ROWS", bound)
    monkeypatch.setattr(rows, "_interpreted_conf", recording)
    polls: list[bool] = []
    real_poll = batch.small_poll

    def recording_poll(records: int | None, capture_bytes: int | None) -> bool:
        polls.append(real_poll(records, capture_bytes))
        return polls[-1]

    monkeypatch.setattr(batch, "SMALL_POLL_BYTES", batch.SMALL_POLL_BYTES if bound else 0)
    monkeypatch.setattr(batch, "small_poll", recording_poll)
    # The MERGE path (`rewrite_below: 0`), whose execution this test records; a small
    # target's rewrite lands the same rows (tests/spark/test_rewrite.py).
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        defaults="defaults:\n  rewrite_below: 0\n",
    )
    first = [
        _row("INSERT", 100, {"id": str(i), "v": f"v{i}", "n": f"{i}.25"}) for i in range(1, 21)
    ]
    second = [
        _row("UPDATE", 200, {"id": "3", "v": "new", "n": None}, {"id": "3", "v": "v3"}),
        _row("DELETE", 210, {"id": "4", "v": "v4", "n": "4.25"}),
        _row("INSERT", 220, {"id": "30", "v": "é€😀", "n": "-1.50"}),
        _row("UPDATE", 230, {"id": "5", "v": "v5", "n": "9.99"}, {"id": "5", "n": "5.25"}),
        _row("DELETE", 240, {"id": "5", "v": "v5", "n": "9.99"}),
    ]
    records = [*first, wm(150), *second, wm(300)]
    with (
        session_conf(spark, WHOLE_STAGE_CODEGEN, "true"),
        session_conf(spark, CODEGEN_FACTORY, "FALLBACK"),
    ):
        # Into an empty target (an append), then a MERGE of the second batch.
        write_captures(root, "t", [(0, i, None, r) for i, r in enumerate(records[:21])])
        project = load(root)
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
        # The append: bounded by the 20 row changes ever staged for the source.
        assert chosen == [{} if bound == 0 else INTERPRETED]
        write_captures(root, "t", [(0, 21 + i, None, r) for i, r in enumerate(records[21:])])
        assert runner.run(project, spark=spark, out=lambda s: None) == 0
    # The MERGE's source copy (25 row changes ever staged), then the MERGE (its source: 4
    # keys, 3, 4, 30 and 5), against the bound.
    assert chosen == [{} if bound == 0 else INTERPRETED] * 3
    # Each run's poll (a few kB of capture files) staged against its bound.
    assert polls == [bound != 0] * 2
    got = [
        (r["id"], r["v"], r["n"] and str(r["n"])) for r in read_target(spark, project, "t", "id")
    ]
    want = [(i, f"v{i}", f"{i}.25") for i in range(1, 21) if i not in (3, 4, 5)]
    want += [(3, "new", None), (30, "é€😀", "-1.50")]
    assert got == sorted(want)
    # The session's own settings are back (the test session's: interpreted).
    assert {k: spark.conf.get(k) for k in INTERPRETED} == INTERPRETED


def test_the_bound_is_inclusive_and_unknown_is_compiled():
    assert rows._interpreted_conf(rows.SMALL_SOURCE_ROWS) == INTERPRETED
    assert rows._interpreted_conf(rows.SMALL_SOURCE_ROWS + 1) == {}
    assert rows._interpreted_conf(None) == {}
    assert batch.small_poll(batch.SMALL_POLL_RECORDS, None)
    assert not batch.small_poll(batch.SMALL_POLL_RECORDS + 1, 0)  # Kafka: its records
    assert batch.small_poll(None, batch.SMALL_POLL_BYTES)
    assert not batch.small_poll(None, batch.SMALL_POLL_BYTES + 1)
    assert not batch.small_poll(None, None)
    assert batch.kept_poll(batch.KEEP_POLL_RECORDS, None)
    assert not batch.kept_poll(batch.KEEP_POLL_RECORDS + 1, 0)
    assert batch.kept_poll(None, batch.KEEP_POLL_BYTES)
    assert not batch.kept_poll(None, batch.KEEP_POLL_BYTES + 1)
    assert not batch.kept_poll(None, None)
