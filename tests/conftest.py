"""Session-wide: a SIGTERM to pytest (a CI timeout, `pkill`) tears fixtures down like Ctrl-C;
tests marked `needs_shared` are skipped when ../shared is absent (tests/shared_paths.py);
the JVMs that tests start compile for a short life and map a class-data-sharing archive
once one exists (tests/jvm_archive.py); tests that share a costly fixture run in one worker
when the suite runs in parallel (pytest-xdist, `--dist loadgroup`); the children tests
start import this checkout (PYTHONPATH).

The Kafka broker and the standalone Spark cluster run in their own process groups, so
only their fixtures' teardown stops them; the default SIGTERM action skips it.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import pytest

from tests import jvm_archive
from tests.shared_paths import SHARED_ABSENT, shared_present

_before = None

# Every Spark driver a test starts through spark-submit (the CLI runs of tests/runtime,
# tests/kafka, tests/cluster, tests/s3 and the crash tests; not the cluster's daemons or
# executors) lives for seconds to a minute: the client compiler alone (C1) and the serial
# collector spend about half the CPU of the default tiered compilation and G1 on such a
# JVM, measured on this project's runs. What the JVM executes is the same. The shared test
# session of each worker, which lives for the whole run, takes them too: its many small
# queries of new shapes gave the full compiler more work than it saved
# (tests/spark/conftest.py). A developer's own SPARK_SUBMIT_OPTS is left alone.
# C1 alone also shrinks the code cache to 48 MiB, which a run with the S3 connector and
# nine targets filled ("Out of space in CodeCache for adapters"): it keeps the default size.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)

# Those drivers also load the same classes of Spark, Hadoop and Delta at every start: once a
# class-data-sharing archive of them exists (made in the background by the first session that
# runs tests starting such drivers: those outside tests/unit and tests/spark, and the slow
# ones), the tests that start after it pass it on (tests/jvm_archive.py).
_archive: dict = {"path": None, "maker": None}

# Spark's scratch space (SPARK_LOCAL_DIRS, honoured by every driver, executor and daemon a
# test starts, and inherited by xdist's workers): a folder of this session's, removed at its
# end. A driver cleans its own `spark-*` folder when it exits, but one killed with SIGKILL
# (the crash tests, Ctrl-C twice) cannot: left in /tmp, each held copies of the session's
# jars, hundreds of MiB, and the suite's runs filled the disk. A developer's own setting is
# left alone.
_scratch: dict = {"path": None}


def pytest_collection_finish(session) -> None:
    """The tests selected to run (in each worker of a parallel run) start such drivers:
    start making the archive, unless it exists or is being made."""
    config = session.config
    if os.environ.get("SPARK_SUBMIT_OPTS") != SHORT_LIVED_JVM or config.option.collectonly:
        return
    if not any(
        not item.nodeid.startswith(("tests/unit/", "tests/spark/"))
        or item.get_closest_marker("slow")
        for item in session.items
    ):
        return
    path = jvm_archive.archive_path(SHORT_LIVED_JVM)
    if path is None:
        return
    _archive["path"] = path
    log = config.rootpath / ".pytest_cache" / "jvm-archive.log"
    log.parent.mkdir(exist_ok=True)
    _archive["maker"] = jvm_archive.start(path, SHORT_LIVED_JVM, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    path = _archive["path"]
    opts = os.environ.get("SPARK_SUBMIT_OPTS")
    if path is not None and opts == SHORT_LIVED_JVM and path.exists():
        os.environ["SPARK_SUBMIT_OPTS"] = f"{SHORT_LIVED_JVM} {jvm_archive.options(path)}"


# Parallel runs (pytest-xdist, `-n N --dist loadgroup`, as scripts/test.sh runs them): the
# tests that share a session fixture holding a process, or a module fixture, run in one
# worker, which builds it once. xdist's scheduler sees test ids only, so the groups are
# named by file; at collection every test's fixtures are checked against this list, so a
# test that needs a group and is outside its files fails the run at once.
FIXTURE_GROUPS = {
    "s3_server": "s3-server",
    "standalone_cluster": "spark-cluster",
    "connect_server": "connect-server",
    "kafka_broker": "kafka-broker",
    "hive_metastore": "hive-metastore",
}
FILE_GROUPS = {
    "tests/s3/": "s3-server",
    "tests/cluster/": "spark-cluster",
    "tests/connect/": "connect-server",
    "tests/catalog/": "hive-metastore",
    "tests/kafka/test_capture.py": "kafka-broker",
    "tests/kafka/test_capture_replay.py": "kafka-broker",
    "tests/kafka/test_e2e_protocols.py": "kafka-broker",
    "tests/kafka/test_follow_metrics.py": "kafka-broker",
    "tests/kafka/test_kafka_read.py": "kafka-broker",
    # A module-scoped warehouse, and an S3 server of moto's for the module.
    "tests/spark/test_lake.py": "module-test_lake",
    # The example project's run, verified, then copied and tampered with.
    "tests/spark/test_verify.py": "module-test_verify",
    # A history with a RENAME and a DROP TABLE, run once, verified against two exports.
    "tests/spark/test_verify_absent.py": "module-test_verify_absent",
    # Each variant's uninterrupted play, compared with every crash point's.
    "tests/spark/test_crash_points_paths.py": "module-test_crash_points_paths",
    "tests/spark/test_crash_points_merge.py": "module-test_crash_points_merge",
}


def group_of(nodeid: str) -> str | None:
    """The worker group of a test id (`tests/x/test_y.py::test_z[p]`), None if it has none."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in FILE_GROUPS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return group
    return None


def _needs_group(item) -> str | None:
    """What `item`'s fixtures need: a FIXTURE_GROUPS name, "module" for a fixture of module
    or class scope (any group of its file keeps the module whole), or None."""
    for fixture, group in FIXTURE_GROUPS.items():
        if fixture in item.fixturenames:
            return group
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        if defs and defs[-1].scope in ("module", "class", "package"):
            return "module"
    return None


def _check_groups(items) -> None:
    wrong = []
    for item in items:
        need, has = _needs_group(item), group_of(item.nodeid)
        if need and (has is None if need == "module" else has != need):
            wrong.append(f"{item.nodeid}: needs {need!r}, has {has!r}")
    if wrong:
        raise pytest.UsageError(
            "tests/conftest.py FILE_GROUPS: these tests share a fixture that one worker of a "
            "parallel run must hold; add their files:\n  " + "\n  ".join(wrong)
        )


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` by FILE_GROUPS: a group is one unit of work, handed out largest
    first; every other test is a unit of its own. (xdist's `xdist_group` marks cannot
    reach its scheduler under pytest 9, whose test ids xdist can no longer suffix.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # an xdist_group mark, where it works
                return nodeid.rsplit("@", 1)[-1]
            return group_of(nodeid) or nodeid

    return FileGroupScheduling(config, log)


def _interrupt(signum, _frame):
    # A second SIGTERM (`timeout` forwards the one it got) must not cut the teardown short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    global _before
    _before = signal.signal(signal.SIGTERM, _interrupt)
    if "SPARK_LOCAL_DIRS" not in os.environ:
        _scratch["path"] = tempfile.mkdtemp(prefix="ticdc-sync-tests-spark-")
        os.environ["SPARK_LOCAL_DIRS"] = _scratch["path"]
    # The children tests start (`python -m ticdc_sync...`, Spark's Python workers) import
    # this checkout, not whatever `pip install -e` last pointed at: an install from another
    # clone, since deleted, failed every such test with "No module named 'ticdc_sync'".
    # Tests that need a child without it remove it themselves (the Connect server, the
    # application virtualenv of tests/runtime).
    repo = str(config.rootpath)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if repo not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([repo, *paths])
    config.addinivalue_line(
        "markers", "needs_shared: reads ../shared (third-party corpus, protocol docs)"
    )


def pytest_collection_modifyitems(config, items) -> None:
    _check_groups(items)
    if hasattr(config, "workerinput"):
        # In a worker of a parallel run: the minutes-long tests (the real kills, then the
        # multi-run engine scenarios) are handed out first (after the groups, which xdist
        # hands out largest first), so none starts last and runs alone at the end. The same
        # order in every worker, as xdist requires.
        items.sort(
            key=lambda item: (
                item.get_closest_marker("slow") is None,
                item.get_closest_marker("e2e") is None,
            )
        )
    if shared_present():
        return
    skip = pytest.mark.skip(reason=SHARED_ABSENT)
    for item in items:
        if item.get_closest_marker("needs_shared"):
            # First, so that its reason wins over pytest's own for an empty parameter
            # set (a parametrization built from the corpus finds no cases).
            item.add_marker(skip, append=False)


def pytest_sessionfinish(session, exitstatus) -> None:
    # The archive's maker, if this session started it: waited for (it is made once),
    # unless the session was interrupted.
    if _archive["path"] is not None and exitstatus != pytest.ExitCode.INTERRUPTED:
        jvm_archive.stop(_archive["maker"], _archive["path"], wait=jvm_archive.WAIT_AT_END)


def pytest_unconfigure(config) -> None:
    if _archive["path"] is not None:
        jvm_archive.stop(_archive["maker"], _archive["path"])
    if _before is not None:
        signal.signal(signal.SIGTERM, _before)
    if _scratch["path"] is not None:
        # Made by this process (the controller of a parallel run, after its workers).
        shutil.rmtree(_scratch["path"], ignore_errors=True)
        os.environ.pop("SPARK_LOCAL_DIRS", None)
