"""Session settings scoped to a block, and the userMetadata every Delta commit in it carries.

A target's progress marker and the staging tallies travel to Delta as the commit's
`userMetadata`, which Delta takes from a session conf: setting it for exactly the block
that commits is how a marker is recorded atomically with the data. Sessions are per
thread of work (`fanout`), so blocks in different sessions do not see each other.
Every ticdc-sync commit first asks `before_commit` whether the run still holds the
warehouse's run lease (`ticdc_sync.warehouse.lease`), naming its crash point
(`core.crash_points`: where a test stops the run as a process death would).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager

from pyspark.sql import SparkSession

from ticdc_sync.core import crash_points
from ticdc_sync.core.window import Marker
from ticdc_sync.warehouse.lease import check_active

MARKER_COMMIT_CONF = "spark.databricks.delta.commitInfo.userMetadata"

# Small work runs without generated code (`INTERPRETED`): every query Spark runs first
# generates Java code and compiles it (Janino), which on a few thousand rows costs more
# than the rows do (benchmarks/README.md). Interpreted is Spark's reference execution of
# the same plan: same results.
WHOLE_STAGE_CODEGEN = "spark.sql.codegen.wholeStage"
CODEGEN_FACTORY = "spark.sql.codegen.factoryMode"
INTERPRETED = {WHOLE_STAGE_CODEGEN: "false", CODEGEN_FACTORY: "NO_CODEGEN"}


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set a session conf inside the block; restore what was there after."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


@contextmanager
def session_confs(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """`session_conf` for every key of `conf` inside the block."""
    with ExitStack() as stack:
        for key, value in conf.items():
            stack.enter_context(session_conf(spark, key, value))
        yield


def before_commit(point: str, *, target: str | None = None, partial_in: str | None = None) -> None:
    """Raise `LeaseLost` if the run lost the warehouse's run lease: a run that may no longer
    hold it must not commit (another run may be working on the warehouse now). `point`
    names the commit (`crash_points.POINTS`), for `target`; `partial_in`: the folder its
    files are written to, where a crash there leaves a half-written one."""
    crash_points.reach(point, target=target, partial_in=partial_in)
    check_active()


def user_metadata(
    spark: SparkSession, text: str, point: str, *, target: str | None = None
) -> AbstractContextManager[None]:
    """Attach `text` as the userMetadata of every Delta commit made inside the block (after
    `before_commit(point)`)."""
    before_commit(point, target=target)
    return session_conf(spark, MARKER_COMMIT_CONF, text)


@contextmanager
def without_user_metadata(spark: SparkSession) -> Iterator[None]:
    """Delta commits made inside the block carry no userMetadata (a session that may have
    been copied from one with it set)."""
    before = spark.conf.get(MARKER_COMMIT_CONF, None)
    spark.conf.unset(MARKER_COMMIT_CONF)
    try:
        yield
    finally:
        if before is not None:
            spark.conf.set(MARKER_COMMIT_CONF, before)


def commit_marker(
    spark: SparkSession, marker: Marker, point: str, *, target: str | None = None
) -> AbstractContextManager[None]:
    """Attach a target's progress marker to every Delta commit made inside the block, the
    commit named `point` (`before_commit`)."""
    return user_metadata(spark, marker.to_json(), point, target=target)
