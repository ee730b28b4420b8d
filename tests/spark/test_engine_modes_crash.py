"""Killing `run` with SIGKILL at random moments loses nothing and doubles nothing in the
soft_delete and history modes: after a clean run, the targets of the simulated upstream of
`test_engine_modes` pass the same checks (the mirror, the mirror plus deleted rows, every
cut of the history), so no version was opened or closed twice."""

from __future__ import annotations

import random

import pytest

from tests.spark.engine_harness import KillPoints, kill_at, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.test_engine_modes import ENTRIES, SCHEMA, check, messages, simulate
from ticdc_sync.spark import runner

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_sigkill_at_random_moments_then_resume_keeps_every_mode_exact(spark, tmp_path):
    m = simulate(seed=23, steps=50)
    batches = messages(m, random.Random(9))
    root = make_project(tmp_path / "p", protocol="canal-json", schema_sql=SCHEMA, tables=ENTRIES)
    points = KillPoints(random.Random(2026))
    outcomes = []
    offset = 0
    half = len(batches) // 2
    resolved = 0
    # Two runs, each killed at a random moment inside it: the second on top of targets the
    # first left half applied.
    for lo, hi in ((0, half), (half, len(batches))):
        chunk = []
        for _ts, batch in batches[lo:hi]:
            for msg in batch:
                chunk.append((0, offset, None, msg))
                offset += 1
        resolved = batches[hi - 1][0]
        chunk.append((0, offset, None, wm(resolved)))
        offset += 1
        write_captures(root, "t", chunk)
        run = ["run", "--project", str(root)]
        outcomes.append(str(kill_at(run, points.next())))
    assert any(o.startswith("killed") for o in outcomes), outcomes
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0, outcomes
    check(spark, project, m, resolved)
