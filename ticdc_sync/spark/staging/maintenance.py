"""The staging table's maintenance, on a thread of its own beside the polls: trims' DELETEs
(`trim.py`), then a compaction (OPTIMIZE, then VACUUM: `Staging.compact`) when one is due.

Either, run between two polls, held `--follow`'s staging back for as long as it took (a
compaction took tens of seconds once the stream was fast, and the changes that piled up
behind it were the staging freshness's p99: benchmarks/README.md). Here they run on a daemon
thread, in a Spark session of its own, while the loop goes on staging: Delta commits a poll's
blind append beside an OPTIMIZE without a conflict, and a trim keeps its commit apart from its
work, in a window of milliseconds (`trim.py`); none of the maintenance's commits carries
tallies. A trim and a compaction (and a batch's rewrite) would conflict with each other, so
one runs at a time, and each holds `Staging.rewrite_lock`.

Starts at most one round at a time and reports how each ended (`Maintained`); decides
nothing about when the loop trims or to which bound, and knows nothing of targets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from ticdc_sync.core import crash_points
from ticdc_sync.run.engine import Compacted
from ticdc_sync.spark.runtime import fanout, labels
from ticdc_sync.spark.staging import trim
from ticdc_sync.spark.staging.table import COMPACT_ABOVE_FILES, Staging
from ticdc_sync.spark.staging.trim import TrimJob

# Maintenance shares the cores with staging and applies: weighted like the applies
# (`fairscheduler.xml`), so that staging keeps its lead over it.
POOL = labels.COMPACT_POOL


@dataclass
class Maintained:
    """How a round of maintenance ended."""

    # Per source trimmed: (the bound its events were deleted up to, how many were deleted).
    trimmed: dict[str, tuple[int, int]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # per source not trimmed: why
    compacted: Compacted | None = None  # None: no compaction was due


class Maintenance:
    """Trims and compacts `staging` on a thread of its own, in a session from `session()`."""

    def __init__(self, staging: Staging, session: Callable[[], SparkSession]) -> None:
        self._staging = staging
        self._session = session
        self._thread: threading.Thread | None = None
        self._ended: list[Maintained] = []
        self._lock = threading.Lock()

    def busy(self) -> bool:
        """Whether a round is running."""
        return self._thread is not None and self._thread.is_alive()

    def start(
        self, trims: Sequence[TrimJob] = (), compact_above: int | None = COMPACT_ABOVE_FILES
    ) -> bool:
        """Start a round unless one is running: the DELETE of each of `trims`, then a
        compaction if more than `compact_above` files were added to the staging table since
        the last one (`Staging.compaction_due`; None: none). Whether one started (not when
        there is nothing to do)."""
        if self.busy():
            return False
        compact = compact_above is not None and self._staging.compaction_due(compact_above)
        if not trims and not compact:
            return False
        self._thread = threading.Thread(
            target=self._run_until_stopped,
            args=(tuple(trims), compact),
            name="ticdc-sync-maintenance",
            daemon=True,
        )
        self._thread.start()
        return True

    def start_if_due(self, above_files: int = COMPACT_ABOVE_FILES) -> bool:
        """Start a compaction alone, if one is due (`start`)."""
        return self.start((), above_files)

    def ended(self) -> list[Maintained]:
        """How the rounds that ended since the last call ended, once each."""
        with self._lock:
            ended, self._ended = self._ended, []
        return ended

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds (None: however long) for a running round; whether
        none is running now."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.busy()

    def _run_until_stopped(self, trims: tuple[TrimJob, ...], compact: bool) -> None:
        try:
            self._run(trims, compact)
        except crash_points.SimulatedCrash:
            # The run "died" at a crash point on this thread: it ends here, as a killed
            # process's threads do, and the loop's next commit stops it too.
            return

    def _run(self, trims: tuple[TrimJob, ...], compact: bool) -> None:
        done = Maintained()
        try:
            spark = self._session()
        except Exception as e:  # noqa: BLE001 - reported; the next round starts over
            why = _why(e)
            done.failed = {j.source: why for j in trims}
            if compact:
                done.compacted = Compacted(0.0, why)
            self._end(done)
            return
        try:
            with labels.pool(spark, POOL):
                for job in trims:
                    try:
                        n = self._trim(spark, job)
                    except Exception as e:  # noqa: BLE001 - reported; tried again later
                        done.failed[job.source] = _why(e)
                    else:
                        done.trimmed[job.source] = (job.upto_ts, n)
                if compact:
                    done.compacted = self._compact(spark)
        finally:
            # A Connect session goes back to the run's pool (`fanout.done`).
            fanout.done(spark)
        self._end(done)

    def _trim(self, spark: SparkSession, job: TrimJob) -> int:
        with (
            self._staging.rewrite_lock,
            labels.job_name(spark, f"{labels.PREFIX}trim {job.source}"),
        ):
            return trim.delete(spark, self._staging.events_path, job)

    def _compact(self, spark: SparkSession) -> Compacted:
        t0 = time.monotonic()
        error = None
        try:
            with labels.job_name(spark, f"{labels.PREFIX}compact"):
                self._staging.compact(spark)
        except Exception as e:  # noqa: BLE001 - reported; the next one starts over
            error = _why(e)
        return Compacted(time.monotonic() - t0, error)

    def _end(self, done: Maintained) -> None:
        with self._lock:
            self._ended.append(done)


def _why(e: BaseException) -> str:
    """The first line of `e` that says what went wrong (a JVM error's first line only names
    the call that raised it)."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):
        lines = [lines[1].removeprefix(": ")]
    return (lines[0] if lines else type(e).__name__)[:300]
