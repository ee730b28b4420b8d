"""Reads as of a TSO and sync points stay true when `run` is killed with SIGKILL at random
moments: after each kill, targets read as of TSOs up to the resolved one equal the upstream
at those TSOs, and every sync point recorded (by any run, killed or not) names versions
that hold exactly the upstream at its TSO.

Uses the kill harness of the crash tests (`engine_harness.kill_at`: a `ticdc-sync run`
process group killed a random delay after a line it prints at one of its steps,
`KillPoints`).
"""

from __future__ import annotations

import random

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.spark.engine_harness import (
    STEP_LINES,
    KillPoints,
    collect_each,
    kill_at,
    load,
    make_project,
    write_captures,
)
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.lake import LakeTable
from ticdc_sync.read import snapshot as snap
from ticdc_sync.read import sync_points
from ticdc_sync.spark import runner
from ticdc_sync.spark.as_of import as_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _check_reads(spark, project, history, tsos, what: str) -> int:
    """Every target read as of each of `tsos` equals the upstream at it; how many reads."""
    checks = []  # (what, the truth, schema, the read)
    for tso in tsos:
        truth, schemas = history.truth(tso)
        read = as_of(spark, project, tso)
        for qualified, rows in truth.items():
            schema = schemas[qualified]
            frame = read.frames[schema.table]
            checks.append((f"{what}: {qualified} as of {tso}", rows, schema, frame))
    # The reads of a table as of several TSOs are collected in one Spark job.
    got = collect_each([frame for *_, frame in checks])
    for (text, rows, schema, _), read_rows in zip(checks, got, strict=True):
        assert_table_equals(read_rows, rows, schema, text)
    return len(checks)


def _reads_after_a_run(spark, project, history, txns, rng, outcome: str) -> int:
    """Check reads as of the resolved TSO and up to 3 earlier ones; how many were made (0:
    nothing resolved yet, or a target not created yet, which the read refuses)."""
    try:
        latest = snap.snapshot(project, "latest").at.tso
    except Exception:  # noqa: BLE001 - killed before anything was resolved
        return 0
    below = [t for t in txns if t <= latest]
    tsos = sorted({latest, *rng.sample(below, min(3, len(below)))})
    try:
        return _check_reads(spark, project, history, tsos, f"after {outcome[:40]!r}")
    except UserError as e:
        # Killed before it created every target: refused, with why (nothing wrong read).
        assert "has no Delta table yet" in str(e), str(e)
        return 0


def test_reads_and_sync_points_after_sigkill_equal_the_upstream(spark, tmp_path):
    history = generate(
        HistoryConfig(seed=11, transactions=40, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "open-protocol", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path / "p",
        protocol="open-protocol",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
        defaults="sync_points: every 1s\n",
    )
    rng = random.Random(39)
    points = KillPoints(rng)
    txns = sorted({s.commit_ts for s in history.steps if s.kind == "txn"})
    outcomes, reads = [], 0
    # Each chunk's run is killed at a random moment; when every kill landed before the
    # targets existed (their creates come first, and a faster run puts more of its share
    # there), one more run on what is staged, killed once a target is applied, so that
    # what a kill leaves is read at least once.
    late = KillPoints(rng, 1.0, first=len(STEP_LINES) - 1)
    rounds = [(chunk, points) for chunk in enc.chunks(2)]
    while rounds:
        chunk, at = rounds.pop(0)
        if chunk:
            write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        outcome = str(kill_at(["run", "--project", str(root)], at.next()))
        outcomes.append(outcome)
        reads += _reads_after_a_run(spark, load(root), history, txns, rng, outcome)
        if not rounds and reads == 0 and at is points:
            rounds.append(([], late))
    assert any(o.startswith("killed") for o in outcomes), outcomes
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0, outcomes
    # Every sync point recorded, by the killed runs too, names versions exact at its TSO.
    recorded = LakeTable(sync_points.location(project)).read().to_pylist()
    assert recorded, outcomes
    locations = {t.name: t.location for t in snap.snapshot(project, "latest").targets}
    points = [r for r in recorded if r["at_tso"]]
    # Sync points a second apart often name the same version of a target: each version
    # named is read once (those of a table with one schema in one Spark job), and checked
    # against the upstream at every TSO that names it.
    named = sorted({(r["target"], r["version"]) for r in points})
    frames = [
        spark.read.format("delta").option("versionAsOf", v).load(locations[t]) for t, v in named
    ]
    at_version = dict(zip(named, collect_each(frames), strict=True))
    for tso in sorted({r["tso"] for r in points}):
        truth, schemas = history.truth(tso)
        by_table = {s.table: s for s in schemas.values()}
        for r in (r for r in points if r["tso"] == tso):
            schema = by_table[r["target"]]
            got = at_version[(r["target"], r["version"])]
            assert_table_equals(got, truth[schema.qualified], schema, f"sync point {tso}")
    assert reads > 0, outcomes
