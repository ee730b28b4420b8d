"""Name the Spark jobs of each phase of a run: staging a source, its bookkeeping, each target.

`phase(spark, "apply orders")` puts every Spark job started by the current thread inside
the block in the job group `ticdc-sync: apply orders`, with that text as the job
description. The Spark UI then shows which phase and target a job belongs to, and the
event log carries the group in each job's properties, so a timeline can add up the
core-seconds of each phase (`benchmarks/timeline.py`). Delta replaces the description of
its own internal jobs while they run, never the group, so the group is what tools read.

Job groups and descriptions are local properties of the calling thread: targets applied
side by side (`fanout`) each label their own thread. What was set before the block (a
notebook's own job group, say) is put back after it. This module must not start jobs,
change any other Spark setting, or decide what a run does. `job_name` names the jobs of
one step inside a phase (the staging read), for progress reports.

Over Spark Connect a client sets no local properties: a phase is an operation tag of the
thread instead (`SparkSession.addTag`, which the server puts on the jobs it runs for
that thread's operations), and `current` tells the progress display the thread's phase;
job names and scheduler pools are left to the server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from ticdc_sync.spark.runtime.remote import is_connect

PREFIX = "ticdc-sync: "
_GROUP = "spark.jobGroup.id"
_DESCRIPTION = "spark.job.description"
_INTERRUPT = "spark.job.interruptOnCancel"


def group_id(text: str) -> str:
    """The job group of the phase `text` (what `statusTracker().getJobIdsForGroup` takes)."""
    return PREFIX + text


_thread = threading.local()


def current() -> str | None:
    """The job group of the phase this thread is in (None outside phases)."""
    return getattr(_thread, "group", None)


@contextmanager
def phase(spark: SparkSession, text: str) -> Iterator[None]:
    """Label the Spark jobs this thread starts inside the block as the phase `text`."""
    before_group = current()
    _thread.group = group_id(text)
    try:
        if is_connect(spark):
            with _tagged(spark, group_id(text)):
                yield
            return
        with _job_group(spark, text):
            yield
    finally:
        _thread.group = before_group


@contextmanager
def _tagged(spark: SparkSession, tag: str) -> Iterator[None]:
    # A tag may not hold a comma (Spark Connect's rule); the thread's tags are the client's.
    tag = tag.replace(",", ";")
    had = tag in spark.getTags()
    spark.addTag(tag)
    try:
        yield
    finally:
        if not had:
            spark.removeTag(tag)


@contextmanager
def _job_group(spark: SparkSession, text: str) -> Iterator[None]:
    sc = spark.sparkContext
    before = {key: sc.getLocalProperty(key) for key in (_GROUP, _DESCRIPTION, _INTERRUPT)}
    # interruptOnCancel False: what Spark's own setJobGroup defaults to.
    sc.setJobGroup(group_id(text), group_id(text), interruptOnCancel=False)
    try:
        yield
    finally:
        for key, value in before.items():
            # setLocalProperty with None removes the property.
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]


_SHORT_CALL_SITE = "callSite.short"
_LONG_CALL_SITE = "callSite.long"


@contextmanager
def job_name(spark: SparkSession, text: str) -> Iterator[None]:
    """Name the Spark jobs this thread starts inside the block `text` (the job's call
    site, which Spark otherwise takes from the stack: `save at ...`), so that a job can be
    told apart within its phase (`progress` finds the staging read by it)."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    before = {key: sc.getLocalProperty(key) for key in (_SHORT_CALL_SITE, _LONG_CALL_SITE)}
    sc.setLocalProperty(_SHORT_CALL_SITE, text)
    sc.setLocalProperty(_LONG_CALL_SITE, text)
    try:
        yield
    finally:
        for key, value in before.items():
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]


def read_job(source: str) -> str:
    """The name of the job that reads, decodes and stages a source's new records."""
    return f"{PREFIX}read {source}"


# Spark's FAIR scheduler pools (`session.DEFAULT_CONF`, `fairscheduler.xml`): staging a
# poll is weighted above applying targets, so that staging keeps pace with the stream while
# targets are applied on the same cores; the staging table's compaction, beside both, is
# weighted like the applies.
STAGE_POOL = "stage"
APPLY_POOL = "apply"
COMPACT_POOL = "compact"
_POOL = "spark.scheduler.pool"


@contextmanager
def pool(spark: SparkSession, name: str) -> Iterator[None]:
    """Run the Spark jobs this thread starts inside the block in scheduler pool `name`."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    before = sc.getLocalProperty(_POOL)
    sc.setLocalProperty(_POOL, name)
    try:
        yield
    finally:
        sc.setLocalProperty(_POOL, before)  # type: ignore[arg-type]
