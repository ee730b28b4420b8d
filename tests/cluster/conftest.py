"""A Spark standalone cluster (one master, two workers) from pyspark's own launcher.

The daemons are started with `$SPARK_HOME/bin/spark-class` (pyspark's wheel ships no
`sbin/start-master.sh`), each in its own process group, bound to 127.0.0.1 with one core
and little memory per worker. Readiness is read from the master's JSON status page, every
wait is bounded, and everything is killed at the end of the module. Tests here are marked
`cluster` and `slow`; they also use the shared Spark session and the session broker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

from tests.conftest import SHORT_LIVED_JVM
from tests.kafka.conftest import kafka_broker  # noqa: F401 - the session broker
from tests.kafka.helpers import broker_module
from tests.spark.conftest import spark  # noqa: F401 - the one shared SparkSession fixture

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "cluster: starts a Spark standalone cluster on 127.0.0.1")


def cluster_env(log_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_DAEMON_MEMORY": "256m",
        # The master and workers live for the module: compiled for a short life, as the
        # tests' drivers are (tests/conftest.py).
        "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TZ": "UTC",
    }


class Daemon:
    """One master or worker JVM in its own process group, logging to a file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                # Gone with the test run, even a SIGKILLed one (spark-class execs the JVM).
                preexec_fn=broker_module().die_with_parent(),
            )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
        """Signal the whole group (a worker's executors are its children), wait bounded,
        then SIGKILL whatever of the group is left."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=15)


class StandaloneCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port, self.ui_port = broker_module().free_ports(2)
        self.env = cluster_env(root / "logs")
        (root / "logs").mkdir(parents=True, exist_ok=True)
        self.master: Daemon | None = None
        self.workers: list[Daemon] = []
        self.work_dirs: list[Path] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def status(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return {}

    def alive_workers(self) -> int:
        return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")

    def start(self, workers: int = 2, timeout: float = 180) -> None:
        self.master = Daemon(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
            self.env,
            self.root / "logs" / "master.log",
        )
        self._wait("the master", lambda: bool(self.status()), timeout)
        for _ in range(workers):
            self.add_worker()
        self._wait(f"{workers} workers", lambda: self.alive_workers() >= workers, timeout)

    def add_worker(self) -> Daemon:
        i = len(self.workers)
        work = self.root / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        w = Daemon(
            f"worker-{i}",
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(broker_module().free_port()),
                "--work-dir",
                str(work),
                self.url,
            ],
            self.env,
            self.root / "logs" / f"worker-{i}.log",
        )
        self.workers.append(w)
        self.work_dirs.append(work)
        return w

    def _wait(self, what: str, cond, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            dead = [d.name for d in [self.master, *self.workers] if d and not d.alive]
            if dead:
                break
            time.sleep(1)
        logs = "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
            for p in sorted((self.root / "logs").glob("*.log"))
        )
        raise RuntimeError(f"standalone cluster: no {what} within {timeout}s:\n{logs}")

    def stop(self) -> None:
        for d in [*self.workers, self.master]:
            if d is not None:
                d.kill(signal.SIGTERM)


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        cluster.start(workers=2)
        yield cluster
    finally:
        cluster.stop()
