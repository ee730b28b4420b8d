"""The plan of a key-changing DDL inside a window, text and JSON, byte for byte against
committed golden files: two row segments, merged on `id` and then on `code`, the second
typed in two spans around a fused ADD COLUMN (its rows before the ADD given its default).

Rendered in a fresh interpreter with its own hash seed, as `test_golden_plan` does. When the
plan is meant to change, regenerate the files with `python -m tests.unit.test_golden_key_change
--write` and review the diff like any other change. `tests/spark/test_plan_steps_run.py` runs
such a plan and checks that what ran is what the plan holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ticdc_sync.core.model import Defaults, Output, Project, Protocol, Source, TableEntry
from ticdc_sync.core.staged import PartitionTally, SourceTally
from ticdc_sync.core.window import DdlEvent, Marker
from ticdc_sync.ddl import parse_schema_sql
from ticdc_sync.plan import build_plan, render_json, render_text
from ticdc_sync.plan.model import Plan, Rows
from ticdc_sync.warehouse.state import SourceState, TargetState, WarehouseState

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
FILES = {"text": "key_change_plan.txt", "json": "key_change_plan.json"}

SEED = parse_schema_sql(
    "CREATE TABLE db.t (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL, v INT)", None, "t.sql"
)[0]
PROJECT = Project(
    name="p",
    root=Path("/nonexistent"),
    output=Output("dev"),
    defaults=Defaults(),
    sources=(Source("src", Protocol.CANAL_JSON, ("topic",)),),
    tables=(TableEntry("db.t", "t"),),
    seed_schemas={("db", "t"): SEED},
)
EVENTS = (
    DdlEvent("db", "t", 20, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (code)", offset=20),
    DdlEvent("db", "t", 30, "ALTER TABLE t ADD COLUMN w INT DEFAULT 7", offset=30),
)


def plan() -> Plan:
    """Target `t` applied up to 5; staged: the key change at 20, an ADD COLUMN at 30;
    resolved 40."""
    tally = SourceTally(
        partitions={("topic", 0): PartitionTally("topic", 0, 1, watermark=40)},
        tables={("db", "t"): (3, len(EVENTS))},
    )
    state = WarehouseState(
        sources={"src": SourceState("src", tally=tally, ddl_events=EVENTS)},
        targets={
            "t": TargetState(
                "t",
                True,
                Marker(5),
                columns=(("id", "int"), ("code", "string"), ("v", "int")),
                writer_features=("appendOnly", "invariants"),
            )
        },
    )
    return build_plan(PROJECT, state)


def render(fmt: str) -> str:
    p = plan()
    return render_json(p) if fmt == "json" else render_text(p)


def test_each_segment_has_its_own_keys() -> None:
    t = plan().target_plan("t")
    assert t is not None
    rows = [s for s in t.steps if isinstance(s, Rows)]
    assert [(s.lo, s.hi, s.keys, s.error) for s in rows] == [
        (5, 19, ("id",), None),
        (20, 40, ("code",), None),
    ]
    (table,) = rows[1].tables
    assert [(sp.lo, sp.hi, sp.fill) for sp in table.spans] == [
        (20, 29, (("w", "7"),)),
        (29, 40, ()),
    ]


@pytest.mark.parametrize(("fmt", "seed"), [("text", "1"), ("text", "4242"), ("json", "7")])
def test_key_change_plan_matches_golden(fmt: str, seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    got = subprocess.run(
        [sys.executable, "-m", "tests.unit.test_golden_key_change", fmt],
        capture_output=True,
        env=env,
        cwd=REPO,
        check=True,
        text=True,
    ).stdout
    want = (GOLDEN / FILES[fmt]).read_text("utf-8")
    assert got == want, (
        f"plan differs from tests/golden/{FILES[fmt]} (to regenerate: "
        "python -m tests.unit.test_golden_key_change --write)"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for fmt, name in FILES.items():
            (GOLDEN / name).write_text(render(fmt), "utf-8")
    else:
        sys.stdout.write(render(sys.argv[1]))
