"""Session-wide: a SIGTERM to pytest (a CI timeout, `pkill`) tears fixtures down like Ctrl-C.

The Kafka broker and the standalone Spark cluster run in their own process groups, so
only their fixtures' teardown stops them; the default SIGTERM action skips it.
"""

from __future__ import annotations

import signal

_before = None


def _interrupt(signum, _frame):
    # A second SIGTERM (`timeout` forwards the one it got) must not cut the teardown short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    global _before
    _before = signal.signal(signal.SIGTERM, _interrupt)


def pytest_unconfigure(config) -> None:
    if _before is not None:
        signal.signal(signal.SIGTERM, _before)
