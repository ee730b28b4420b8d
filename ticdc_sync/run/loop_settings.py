"""What a run loop is asked to do (`Settings`), how it is stopped (`StopRequest`), and how it
sleeps and is woken (`Sleeper`, `Waiter`).

No I/O, no pyspark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ticdc_sync.core.model import Source
from ticdc_sync.plan.model import Plan
from ticdc_sync.run.schedule import MAX_BACKOFF_MS
from ticdc_sync.warehouse.state import WarehouseState

Out = Callable[[str], None]
Replan = Callable[[WarehouseState], Plan]


# The longest wait before a source that could not be read is read again (a Kafka outage).
SOURCE_MAX_BACKOFF_MS = 60_000


@dataclass(frozen=True)
class Settings:
    """What a run loop is asked to do."""

    sources: Sequence[Source]
    workers: int  # targets applied at once (`plan.workers.apply_workers`)
    follow: bool = False
    # --follow: the stager's rest between two polls, from the end of one to the start of
    # the next. From the end, not the start: a poll slower than this (on cores the applies
    # share) would otherwise follow the last at once, and staging would take a core for
    # itself, slowing the applies and so every poll further (benchmarks/README.md).
    poll_seconds: float = 2.0
    # --follow: after this many polls, apply everything pending (as a plain run does) and
    # end. None: until stopped.
    max_polls: int | None = None
    retention_ms: int = 7 * 24 * 3600 * 1000  # `staging.retention`
    trim_every_seconds: float = 60.0  # --follow: how often the staging table is trimmed
    max_backoff_ms: int = MAX_BACKOFF_MS  # longest wait before a failed target is retried
    selected: Callable[[str], bool] = lambda _name: True  # --select / --exclude
    # `sync_points: every ...`: how often (in TiDB time) the targets of a source are brought
    # to one TSO and it is recorded (`Engine.record_sync_point`). None: never.
    sync_every_ms: int | None = None


class StopRequest:
    """How far the run is asked to stop: 0 not at all, 1 after the current steps (no more
    staging), 2 at once. Safe to call from a signal handler."""

    def __init__(self) -> None:
        self._level = 0
        self._listeners: list[Callable[[], None]] = []

    @property
    def level(self) -> int:
        return self._level

    def request(self) -> int:
        """One more request (the first signal, then the second); the level now."""
        self._level = min(2, self._level + 1)
        for fn in list(self._listeners):
            fn()
        return self._level

    def listen(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)


class Sleeper(Protocol):
    """The loop's sleep: until a timeout (None: none), or until woken."""

    def wait(self, seconds: float | None) -> None: ...

    def wake(self) -> None: ...


class Waiter:
    """The loop's sleep: until a timeout, or until woken (an apply ended, a stop came)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def wait(self, seconds: float | None) -> None:
        self._event.wait(seconds)
        self._event.clear()
