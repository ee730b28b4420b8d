#!/usr/bin/env python3
"""A local Spark Connect server (Spark 4.2's own, from pyspark's package) for ticdc-sync.

    python scripts/connect_server.py start [--port N]  # start, print its sc:// address
    python scripts/connect_server.py status             # is the one `start` started running?
    python scripts/connect_server.py stop               # stop it

From Python (the pytest fixture of tests/connect): `with ConnectServer(root) as s: s.remote`.

The server is `spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`
with what a server needs for ticdc-sync (`ticdc_sync.spark.runtime.session.server_args`):
the Delta and Kafka connector jars through `--packages` (the coordinates a local run
resolves, `ticdc_sync.spark.runtime.session`), Delta's session extension and catalog. It
binds 127.0.0.1 only, waits for readiness with a deadline (the gRPC port accepts and a
client's first query answers), runs in its own process group and is killed as a group.
Its Python workers run this interpreter without PYTHONPATH: ticdc-sync reaches them as an
artifact each client session uploads, as it would on a managed Spark. It must not contain
ticdc-sync logic.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ticdc_sync.spark.runtime.session import SERVER_CLASS, server_args  # noqa: E402

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """A `preexec_fn`: the server gets SIGKILL when the thread that started it ends (Linux
    `prctl(PR_SET_PDEATHSIG)`), so a test run killed with SIGKILL leaves no server behind."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class ConnectServer:
    """One Spark Connect server JVM on 127.0.0.1, in its own process group."""

    def __init__(
        self,
        root: Path,
        *,
        port: int | None = None,
        master: str = "local[2]",
        memory: str = "1g",
        conf: dict[str, str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        self.root = Path(root)
        self.port = port or free_port()
        self.master = master
        self.memory = memory
        self.conf = dict(conf or {})
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None
        self.started_in: float | None = None  # seconds from launch to ready

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.root / "connect-server.log"

    def command(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.warehouse.dir": (self.root / "spark-warehouse").as_uri(),
            **self.conf,
        }
        return [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--name",
            "ticdc-sync Spark Connect server",
            "--master",
            self.master,
            "--driver-memory",
            self.memory,
            *server_args(conf),
        ]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable,
            TZ="UTC",
        )
        return env

    def start(self, timeout: float = 300) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with open(self.log_file, "ab") as fh:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                cwd=self.root,
                start_new_session=True,
                preexec_fn=_die_with_parent() if self.die_with_parent else None,
            )
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the Spark Connect server exited ({self.proc.returncode}):\n{self.tail()}"
                )
            if self._accepts() and self._answers():
                self.started_in = time.monotonic() - t0
                return self.remote
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Spark Connect server was not ready in {timeout}s:\n{self.tail()}")

    def _accepts(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _answers(self) -> bool:
        """A tiny query through a client: the port may accept before the service is up."""
        code = (
            "from pyspark.sql import SparkSession as S\n"
            f"s = S.builder.remote({self.remote!r}).create()\n"
            "assert s.range(1).count() == 1\n"
            "s.stop()\n"
        )
        try:
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, timeout=60, env=self.env()
            )
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM the server's process group, SIGKILL what is left after `timeout`."""
        if self.proc is None:
            return
        pid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=15)

    def __enter__(self) -> ConnectServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------- command line
def _state_file() -> Path:
    return Path(tempfile.gettempdir()) / "ticdc-sync-connect-server.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start")
    st.add_argument("--port", type=int)
    st.add_argument("--master", default="local[*]")
    st.add_argument("--memory", default="2g")
    sub.add_parser("status")
    sub.add_parser("stop")
    args = ap.parse_args(argv)
    state = _state_file()
    if args.cmd == "start":
        root = Path(tempfile.mkdtemp(prefix="ticdc-sync-connect-"))
        server = ConnectServer(
            root, port=args.port, master=args.master, memory=args.memory, die_with_parent=False
        )
        server.start()
        assert server.proc is not None
        state.write_text(json.dumps({"pid": server.proc.pid, "remote": server.remote}))
        print(server.remote)
        print(f"started in {server.started_in:.1f}s; log {server.log_file}", file=sys.stderr)
        return 0
    if not state.exists():
        print("no server started by this script", file=sys.stderr)
        return 1
    info = json.loads(state.read_text())
    pid = int(info["pid"])
    if args.cmd == "status":
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("stopped")
            return 1
        print(f"running: {info['remote']} (pid {pid})")
        return 0
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    state.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
