"""Spark jobs of a run carry the phase and target they belong to (`spark.labels`)."""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.spark import runner
from ticdc_sync.spark.runtime import labels

pytestmark = pytest.mark.spark

SCHEMA = (
    "CREATE TABLE shop.a (id INT PRIMARY KEY, v VARCHAR(10));\n"
    "CREATE TABLE shop.b (id INT PRIMARY KEY, v VARCHAR(10));\n"
)
MT = {"id": "int", "v": "varchar"}


def jobs_of(spark, text: str) -> list[int]:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(labels.group_id(text)))


def test_phase_labels_jobs_and_restores_the_callers_group(spark):
    sc = spark.sparkContext
    sc.setJobGroup("caller", "the caller's own group")
    try:
        with labels.phase(spark, "label test"):
            assert sc.getLocalProperty("spark.job.description") == "ticdc-sync: label test"
            spark.range(10).count()
        assert jobs_of(spark, "label test")
        assert sc.getLocalProperty("spark.jobGroup.id") == "caller"
        assert sc.getLocalProperty("spark.job.description") == "the caller's own group"
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    # Nothing set before: nothing set after.
    with labels.phase(spark, "label test 2"):
        spark.range(3).count()
    assert sc.getLocalProperty("spark.jobGroup.id") is None
    assert sc.getLocalProperty("spark.job.description") is None


def test_a_runs_jobs_are_grouped_by_phase_and_target(spark, tmp_path):
    # A unique source name keeps these groups apart from other tests' runs. Each target
    # takes the MERGE (`rewrite_below: 0`), whose jobs are its own: a new target's create
    # runs none (docs/engine.md), and a round's jobs carry the round's label.
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        schema_sql=SCHEMA,
        defaults="defaults:\n  rewrite_below: 0\n",
    )
    (root / "sources" / "s.yml").write_text(
        "sources:\n  - name: labelled\n    protocol: canal-json\n    topics: [t]\n"
    )
    (root / "tables" / "t.yml").write_text(
        'tables:\n  - upstream: "shop.*"\n    name: "labelled_{table}"\n'
    )
    write_captures(
        root,
        "t",
        [
            (0, 0, None, canal_row("shop", "a", "INSERT", 100, {"id": "1", "v": "x"}, MT, ["id"])),
            (0, 1, None, canal_row("shop", "b", "INSERT", 110, {"id": "2", "v": "y"}, MT, ["id"])),
            (0, 2, None, wm(120)),
        ],
    )
    assert runner.run(load(root), spark=spark, out=lambda s: None) == 0
    # (`resolve labelled` starts no job here: no bad record, no DDL, no target yet.)
    for phase in ("stage labelled", "apply labelled_a", "apply labelled_b"):
        assert jobs_of(spark, phase), f"no Spark job labelled {phase!r}"
    # Each target's jobs are its own: the two groups share no job.
    assert not set(jobs_of(spark, "apply labelled_a")) & set(jobs_of(spark, "apply labelled_b"))
