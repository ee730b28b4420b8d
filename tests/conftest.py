"""Session-wide: a SIGTERM to pytest (a CI timeout, `pkill`) tears fixtures down like Ctrl-C;
tests marked `needs_shared` are skipped when ../shared is absent (tests/shared_paths.py);
the JVMs that tests start compile for a short life; tests that share a costly fixture run
in one worker when the suite runs in parallel (pytest-xdist, `--dist loadgroup`).

The Kafka broker and the standalone Spark cluster run in their own process groups, so
only their fixtures' teardown stops them; the default SIGTERM action skips it.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.shared_paths import SHARED_ABSENT, shared_present

_before = None

# Every Spark driver a test starts through spark-submit (the CLI runs of tests/runtime,
# tests/kafka, tests/cluster, tests/s3 and the crash tests; not the cluster's daemons or
# executors) lives for seconds to a minute: the client compiler alone (C1) and the serial
# collector spend about half the CPU of the default tiered compilation and G1 on such a
# JVM, measured on this project's runs. What the JVM executes is the same; the one shared
# test session, which lives for the whole run, asks for the full compiler back
# (tests/spark/conftest.py). A developer's own SPARK_SUBMIT_OPTS is left alone.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)

# Session- and module-scoped fixtures that hold a process or an expensive result: under
# pytest-xdist every test that uses one is put in one group, so one worker builds it once
# (`--dist loadgroup`; without xdist the marks change nothing). A module with a fixture of
# its own (module or class scope) is kept whole in the same way.
SHARED_FIXTURE_GROUPS = {
    "s3_server": "s3-server",
    "standalone_cluster": "spark-cluster",
    "kafka_broker": "kafka-broker",
}


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
    # pytest-xdist's own mark, named here too so that a run without xdist knows it.
    config.addinivalue_line("markers", "xdist_group(name): tests that one worker runs")


def _xdist_group(item) -> str | None:
    used = item.fixturenames
    for fixture, group in SHARED_FIXTURE_GROUPS.items():
        if fixture in used:
            return group
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        if defs and defs[-1].scope in ("module", "class", "package"):
            return f"module-{item.module.__name__}"
    return None


# Before xdist's own hook, which reads the group marks to schedule the tests.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        group = _xdist_group(item)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
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
