"""Ctrl-C and SIGTERM for a long command: the first asks it to stop at the next safe point,
the second ends the process at once, quietly.

`Interrupts` installs the handlers for the duration of a block. The first signal sets
`requested` and says so through `on_first`; the command checks `requested` where it can
stop safely (between two steps, each its own commit). A second signal calls `on_abort`
(write what is known, release the run lock) and exits with 130 through `os._exit`, so
that no exception unwinds through py4j calls in flight and prints their tracebacks.
Pure core: no pyspark. Must not decide where a command stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

EXIT_INTERRUPTED = 130


class Interrupts:
    """Two-stage handling of SIGINT (and SIGTERM, with `term`) inside a `with` block."""

    def __init__(
        self,
        on_first: Callable[[int], None],
        on_abort: Callable[[], None],
        *,
        term: bool = False,
    ) -> None:
        self.on_first = on_first
        self.on_abort = on_abort
        self.signals = (signal.SIGINT, signal.SIGTERM) if term else (signal.SIGINT,)
        self.requested = False
        self._old: dict[int, object] = {}

    def __enter__(self) -> Interrupts:
        self._old = {s: signal.signal(s, self._handle) for s in self.signals}
        return self

    def reinstall(self) -> None:
        """Take the signals back: PySpark's SparkContext installs a SIGINT handler of its
        own when it starts (it cancels every job and raises KeyboardInterrupt)."""
        if self._old:
            for s in self.signals:
                signal.signal(s, self._handle)

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)  # type: ignore[arg-type]
        self._old = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = True
            self.on_first(signum)
            return
        # Second signal: stop now. Nothing may raise from here on.
        try:
            self.on_abort()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # exiting anyway
                    stream.flush()
            os._exit(EXIT_INTERRUPTED)
