"""Session-wide: a SIGTERM to pytest (a CI timeout, `pkill`) tears fixtures down like Ctrl-C;
tests marked `needs_shared` are skipped when ../shared is absent (tests/shared_paths.py).

The Kafka broker and the standalone Spark cluster run in their own process groups, so
only their fixtures' teardown stops them; the default SIGTERM action skips it.
"""

from __future__ import annotations

import signal

import pytest

from tests.shared_paths import SHARED_ABSENT, shared_present

_before = None


def _interrupt(signum, _frame):
    # A second SIGTERM (`timeout` forwards the one it got) must not cut the teardown short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    global _before
    _before = signal.signal(signal.SIGTERM, _interrupt)
    config.addinivalue_line(
        "markers", "needs_shared: reads ../shared (third-party corpus, protocol docs)"
    )


def pytest_collection_modifyitems(config, items) -> None:
    if shared_present():
        return
    skip = pytest.mark.skip(reason=SHARED_ABSENT)
    for item in items:
        if item.get_closest_marker("needs_shared"):
            # First, so that its reason wins over pytest's own for an empty parameter
            # set (a parametrization built from the corpus finds no cases).
            item.add_marker(skip, append=False)


def pytest_unconfigure(config) -> None:
    if _before is not None:
        signal.signal(signal.SIGTERM, _before)
