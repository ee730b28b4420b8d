"""The example project's tables against what it must land (projects_example/shop/expected).

`differences(spark, project)` reads each target of the example (three protocols, three
tables) through Spark and lists every way it differs from the expected rows: nothing when
the run was exact. Used by tests/spark/test_example_project.py, and by tests/s3 in a child
process for the example's s3 target.
"""

from __future__ import annotations

import json

from testkit import values as V
from tests.spark.engine_harness import read_target
from tests.spark.truth import canon_delta
from ticdc_sync.core.model import Project

PREFIXES = ("canal_", "debezium_", "open_")


def _canon_expected(schema, col: str, v):
    c = schema.column(col)
    if v is None or c is None:
        return v
    if V.base_of(c) == "time":
        return V.fmt_time(v, c.fsp or 0)
    return v


def differences(spark, project: Project) -> list[str]:
    """Every difference between the example's targets and its expected rows."""
    found: list[str] = []
    schemas = dict(project.seed_schemas)
    for expected_file in sorted((project.root / "expected").glob("*.json")):
        expected = json.loads(expected_file.read_text())
        db, tbl = expected["table"].split(".")
        schema = schemas[(db, tbl)]
        want = [{k: _canon_expected(schema, k, v) for k, v in r.items()} for r in expected["rows"]]
        for prefix in PREFIXES:
            name = prefix + tbl
            # The rows a target holds now: a soft_delete target's live rows, a history
            # target's current versions (docs/history.md).
            rows = [
                r
                for r in read_target(spark, project, name, "id")
                if not r.get("_is_deleted") and r.get("_valid_to") is None
            ]
            got = [{k: canon_delta(schema.column(k), v) for k, v in r.items()} for r in rows]
            if [r["id"] for r in got] != [r["id"] for r in want]:
                found.append(f"{name}: ids {[r['id'] for r in got]} != {[r['id'] for r in want]}")
                continue
            for g, w in zip(got, want, strict=True):
                diff = {k: (g.get(k), w[k]) for k in w if g.get(k) != w[k]}
                if diff:
                    found.append(f"{name} id {w['id']}: (got, want) {diff}")
    return found
