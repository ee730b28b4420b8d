"""The peak resident memory of the driver's processes (Python and its JVM) over a block of
work, sampled from /proc (Linux). Not a hard bound: a peak between two samples is missed, so
the interval is short beside the runs it measures."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType

INTERVAL_S = 0.05


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` now, MiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def jvm_pid(spark) -> int:
    """The pid of the session's driver JVM (classic Spark: py4j reaches it)."""
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())


class PeakRss:
    """`with PeakRss({"python": os.getpid(), "jvm": jvm_pid(spark)}) as p: ...`; then
    `p.peak` per name and `p.total` (the peak of their sum), in MiB."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self.peak = dict.fromkeys(pids, 0.0)
        self.total = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            now = {n: rss_mib(p) for n, p in self._pids.items()}
            for n, v in now.items():
                self.peak[n] = max(self.peak[n], v)
            self.total = max(self.total, sum(now.values()))
            if self._stop.wait(INTERVAL_S):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()


def driver_pids(spark) -> dict[str, int]:
    return {"python": os.getpid(), "jvm": jvm_pid(spark)}
