"""The staging table's compaction, on a thread of its own beside the polls.

A compaction (OPTIMIZE, then VACUUM: `Staging.compact`) takes tens of seconds once the
stream is fast; run between two polls, it held `--follow`'s staging back that long, and the
changes that piled up behind it were the staging freshness's p99 (benchmarks/README.md).
Here it runs on a daemon thread in a Spark session of its own while the loop goes on
staging: Delta commits a blind append beside an OPTIMIZE without a conflict, and neither of
the compaction's commits carries tallies. What does conflict with it (a trim's DELETE, a
batch rewritten) waits on `Staging.rewrite_lock` or is put off.

Starts at most one compaction at a time and reports how each ended; decides nothing about
when the loop trims, and knows nothing of targets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from ticdc_sync.run.engine import Compacted
from ticdc_sync.spark.runtime import fanout, labels
from ticdc_sync.spark.staging.table import COMPACT_ABOVE_FILES, Staging

# Compaction shares the cores with staging and applies: weighted like the applies
# (`fairscheduler.xml`), so that staging keeps its lead over it.
POOL = labels.COMPACT_POOL


class Compactor:
    """Compacts `staging` on a thread of its own, in a session from `session()`."""

    def __init__(self, staging: Staging, session: Callable[[], SparkSession]) -> None:
        self._staging = staging
        self._session = session
        self._thread: threading.Thread | None = None
        self._ended: Compacted | None = None
        self._lock = threading.Lock()

    def busy(self) -> bool:
        """Whether a compaction is running."""
        return self._thread is not None and self._thread.is_alive()

    def start_if_due(self, above_files: int = COMPACT_ABOVE_FILES) -> bool:
        """Start a compaction when more than `above_files` files were added to the staging
        table since the last one (`Staging.compaction_due`) and none is running; whether
        one started."""
        if self.busy() or not self._staging.compaction_due(above_files):
            return False
        self._thread = threading.Thread(
            target=self._compact, name="ticdc-sync-compact", daemon=True
        )
        self._thread.start()
        return True

    def ended(self) -> Compacted | None:
        """How the last compaction ended, once (None: none ended since the last call)."""
        with self._lock:
            ended, self._ended = self._ended, None
        return ended

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds (None: however long) for a running compaction;
        whether none is running now."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.busy()

    def _compact(self) -> None:
        t0 = time.monotonic()
        error = None
        try:
            spark = self._session()
            try:
                with labels.pool(spark, POOL), labels.job_name(spark, f"{labels.PREFIX}compact"):
                    self._staging.compact(spark)
            finally:
                fanout.done(spark)
        except Exception as e:  # noqa: BLE001 - reported; the next one starts over
            text = str(e).strip()
            error = (text.splitlines()[0] if text else type(e).__name__)[:300]
        with self._lock:
            self._ended = Compacted(time.monotonic() - t0, error)
