"""Killing `run` with SIGKILL (process group, JVM included) at random moments loses nothing:
the real kills of two families, the MERGE and staging beside applies. Each commit point is
tested deterministically in the shared session (`crash_scenario.py`); these cover what one
JVM cannot (a process that is gone, its lease with it).

Each attempt runs `ticdc-sync run` in its own process group, kills that group and its JVM's
at a random moment of its work, and finally a clean run must leave tables equal to the
generated history's truth: nothing lost, nothing doubled. The moment is a random delay after
a line the run prints at one of its steps (staging, resolve, applies), so that the kill lands
inside the run however fast or loaded the machine is (`engine_harness.kill_at`,
`KillPoints`).
"""

from __future__ import annotations

import random
import shutil

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.spark.engine_harness import (
    KillPoints,
    kill_at,
    load,
    make_project,
    read_target,
    run_and_kill,
    write_captures,
)
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.spark import runner

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_sigkill_at_random_moments_of_merges_then_resume_equals_truth(spark, tmp_path):
    history = generate(
        HistoryConfig(seed=11, transactions=50, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "canal-json", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        schema_sql=sql,
        # Every segment by the MERGE (the rewrite and the round have their own kill test).
        tables='  - upstream: "app.*"\n    name: "{table}"\n    rewrite_below: 0\n',
    )
    points = KillPoints(random.Random(2024))
    outcomes = []
    # Two chunks: the first run is killed while merging; the second while applying on top
    # of a half-applied target. Each kill lands at a random moment inside the run.
    for chunk in enc.chunks(2):
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        run = ["run", "--project", str(root)]
        outcomes.append(str(kill_at(run, points.next())))
    assert any(o.startswith("killed") for o in outcomes), outcomes
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0, outcomes
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"after kills {outcomes}: {qualified}")


def _write_chunk(root, n: int, chunk) -> None:
    """Capture lines of `chunk` as new files (written aside, then renamed into place), so
    that a `--follow` run reading the folder never sees half a file."""
    staging = root / f"chunk-{n}"
    write_captures(staging, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
    folder = root / "captures" / "cdc"
    folder.mkdir(parents=True, exist_ok=True)
    for f in sorted((staging / "captures" / "cdc").iterdir()):
        f.rename(folder / f"{f.stem}-{n:03d}.jsonl")
    shutil.rmtree(staging)


def test_sigkill_while_staging_and_applies_overlap_then_resume_equals_truth(spark, tmp_path):
    """A `--follow` run stages new records while its targets are applied (lag 0); killed at
    random moments of that, then resumed, it leaves the truth."""
    history = generate(
        HistoryConfig(seed=12, transactions=60, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "canal-json", "cdc")
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        schema_sql=sql,
        tables='  - upstream: "app.*"\n    name: "{table}"\n    target_lag: 0\n',
    )
    rng = random.Random(4096)
    chunks = enc.chunks(4)
    _write_chunk(root, 0, chunks[0])
    outcomes = []
    for n in (1, 3):
        # Each follower gets one chunk at its start and one fed while it works.
        if n == 3:
            _write_chunk(root, 2, chunks[2])
        # `run --follow` (targets at lag 0); once it has polled, it is fed more captures
        # (while it stages and applies), and killed a random moment after its first poll.
        killed = run_and_kill(
            ["run", "--follow", "--project", str(root)],
            rng.uniform(1.0, 12.0),
            started=("poll ",),
            on_start=lambda n=n: _write_chunk(root, n, chunks[n]),
        )
        outcomes.append(str(killed))
    assert all(o.startswith("killed") for o in outcomes), outcomes
    project = load(root)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0, outcomes
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(spark, project, schema.table, ",".join(schema.handle_key()))
        assert_table_equals(rows, truth, schema, f"after kills {outcomes}: {qualified}")
