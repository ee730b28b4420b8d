#!/usr/bin/env python3
"""A local single-node Kafka (KRaft) from Apache Kafka's Maven Central jars: no Docker.

    python scripts/kafka.py fetch            # download the jars once (needs `mvn` and Java 17)
    python scripts/kafka.py start [--port N] # format storage, start, print the bootstrap address
    python scripts/kafka.py status           # is the broker started by `start` still running?
    python scripts/kafka.py topic NAME -p 3  # create a topic with 3 partitions
    python scripts/kafka.py stop             # stop it and delete its data (unless --keep)

From Python (pytest fixtures): `with KafkaBroker() as b: b.bootstrap; b.restart(); ...`.

The jars (`org.apache.kafka:kafka_2.13`, `kafka-tools` and their runtime dependencies) are
resolved by Maven into ~/.cache/ticdc-sync/kafka-<version>/libs once. Only the Python
standard library is used here, so the script runs before anything is installed. It binds
127.0.0.1 only, waits for readiness with a deadline, and never leaves a broker behind when
used as a context manager. It must not contain ticdc-sync logic.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

# 4.3.1 is the newest Kafka whose whole runtime tree (including kafka-tools) is on Maven
# Central; 4.4.0's kafka-tools/kafka-tools-api were missing there when this was written.
DEFAULT_VERSION = "4.3.1"
# Kafka 4 logs through log4j2 but ships no SLF4J binding as a Maven dependency (its tarball
# adds one): without it every broker log line is lost. 3.x logs through reload4j.
LOG4J2_SLF4J = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.4")
RELOAD4J_SLF4J = ("org.slf4j", "slf4j-reload4j", "1.7.36")
STARTED_LINE = "Kafka Server started"  # logged by kafka.server.KafkaRaftServer when ready
HEAP = os.environ.get("TICDC_SYNC_KAFKA_HEAP", "-Xms128m -Xmx512m")


def version() -> str:
    return os.environ.get("TICDC_SYNC_KAFKA_VERSION", DEFAULT_VERSION)


def cache_root() -> Path:
    # Same rule as ticdc_sync.spark.runtime.session.cache_dir (not imported: stdlib only here).
    base = os.environ.get("TICDC_SYNC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ticdc-sync"
    )
    return Path(base)


def _pom(ver: str) -> str:
    binding = LOG4J2_SLF4J if not ver.startswith(("2.", "3.")) else RELOAD4J_SLF4J
    deps = [
        ("org.apache.kafka", "kafka_2.13", ver),
        # TopicCommand, DeleteRecordsCommand, console tools (org.apache.kafka.tools.*).
        ("org.apache.kafka", "kafka-tools", ver),
        binding,
    ]
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.ticdc-sync</groupId><artifactId>kafka-fetch</artifactId><version>1</version>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def fetch(ver: str | None = None, *, timeout: float = 900) -> Path:
    """Resolve Kafka's jars into the cache once; return the libs folder."""
    ver = ver or version()
    home = cache_root() / f"kafka-{ver}"
    libs = home / "libs"
    if (home / "COMPLETE").exists() and any(libs.glob("kafka_2.13-*.jar")):
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise RuntimeError(
            "Maven (`mvn`) is needed once to download Kafka's jars from Maven Central "
            "(hint: install maven, or fill "
            f"{libs} with the jars of an Apache Kafka {ver} distribution and create {home}/COMPLETE)"
        )
    home.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fetch-", dir=home))
    try:
        (work / "pom.xml").write_text(_pom(ver))
        cmd = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(work / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={work / 'libs'}",
        ]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"downloading Kafka {ver} jars timed out after {timeout}s") from e
        if p.returncode != 0:
            tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-15:])
            raise RuntimeError(
                f"cannot download Kafka {ver} from Maven Central (is its whole dependency "
                f"tree published? try TICDC_SYNC_KAFKA_VERSION={DEFAULT_VERSION}):\n{tail}"
            )
        if libs.exists():
            shutil.rmtree(libs)
        (work / "libs").rename(libs)
        (home / "COMPLETE").write_text(ver + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return libs


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("no `java` on PATH (hint: install Java 17 or set JAVA_HOME)")
    return found


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports. The sockets are held open until all n are bound:
    one closed before the next bind lets the OS hand the same port out twice, and Kafka's
    storage format refuses a broker and a controller listener on one port."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _cluster_id() -> str:
    # Kafka's Uuid text form: URL-safe base64 of 16 bytes without padding. One starting
    # with "-" reads as an option to StorageTool's argument parser (1 in 64 formats failed),
    # so, like Kafka's own Uuid.randomUuid, draw again.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _api_versions_ok(port: int, timeout: float = 2.0) -> bool:
    """Send an ApiVersions v0 request; True when the broker answers with error code 0."""
    client = b"ticdc-sync-probe"
    req = struct.pack(">hhih", 18, 0, 7, len(client)) + client
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(req)) + req)
            head = b""
            while len(head) < 10:
                chunk = s.recv(10 - len(head))
                if not chunk:
                    return False
                head += chunk
            _size, corr, err = struct.unpack(">iih", head)
            return corr == 7 and err == 0
    except OSError:
        return False


LOG4J2_CONF = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
logger.ready.name = kafka.server.KafkaRaftServer
logger.ready.level = INFO
"""
LOG4J1_CONF = """log4j.rootLogger={level}, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaRaftServer=INFO
"""


class _PortTaken(RuntimeError):
    """Kafka could not bind a port."""


class KafkaBroker:
    """One combined broker+controller (KRaft) on 127.0.0.1, in its own process group.

    `start()` formats `data_dir` the first time, `stop()` keeps the data, `restart()` brings
    the same broker back on the same ports with the same data, `close()` stops it and
    deletes a data dir this object created. All waits are bounded.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        kafka_version: str | None = None,
        extra_config: dict[str, str] | None = None,
        log_level: str = "WARN",
        die_with_parent: bool = False,
    ) -> None:
        self.version = kafka_version or version()
        # Tests: the broker goes when the process that started it goes, even by SIGKILL
        # (`die_with_parent`); `kafka.py start` leaves it running for later commands.
        self.die_with_parent = die_with_parent
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="ticdc-sync-kafka-"))
        picked = free_ports(2)
        self.port = port or picked[0]
        self.controller_port = controller_port or next(p for p in picked if p != self.port)
        if self.port == self.controller_port:
            raise ValueError(f"port and controller_port must differ (both {self.port})")
        # Ports we picked may be taken by someone else before Kafka binds them (the
        # machine is shared); those, and only before the first successful start, are
        # re-picked and the start retried.
        self._repick_ports = port is None and controller_port is None
        self._started_once = False
        self.extra_config = dict(extra_config or {})
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.libs: Path | None = None

    # ------------------------------------------------------------------ paths and config
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def _classpath(self) -> str:
        if self.libs is None:
            self.libs = fetch(self.version)
        return str(self.libs / "*")

    def _write_config(self) -> Path:
        conf = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            # One node: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # The machine is small and shared: few threads.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "num.partitions": "1",
            "log.retention.check.interval.ms": "5000",
        }
        conf.update(self.extra_config)
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in sorted(conf.items())))
        (self.data_dir / "log4j2.properties").write_text(LOG4J2_CONF.format(level=self.log_level))
        (self.data_dir / "log4j.properties").write_text(LOG4J1_CONF.format(level=self.log_level))
        return path

    def _jvm_args(self) -> list[str]:
        return [
            java(),
            *HEAP.split(),
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start; throughput is irrelevant here
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
            "-cp",
            self._classpath(),
        ]

    # ------------------------------------------------------------------ lifecycle
    def format(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = self._write_config()
        meta = self.data_dir / "logs" / "meta.properties"
        if meta.exists():
            return
        p = subprocess.run(
            [
                *self._jvm_args(),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                _cluster_id(),
                "-c",
                str(props),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if p.returncode != 0:
            raise RuntimeError(f"kafka storage format failed:\n{p.stdout}{p.stderr}")

    def start(self, timeout: float = 90) -> str:
        """Start the broker; return the bootstrap address once it answers requests."""
        if self.running:
            return self.bootstrap
        for attempt in range(3):
            try:
                self._start_once(timeout)
                self._started_once = True
                return self.bootstrap
            except _PortTaken:
                if not self._repick_ports or self._started_once or attempt == 2:
                    raise
                self.port, self.controller_port = free_ports(2)
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> None:
        self.format()
        self._log_from = self.log_file.stat().st_size if self.log_file.exists() else 0
        log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child process
        try:
            self.proc = subprocess.Popen(
                [*self._jvm_args(), "kafka.Kafka", str(self.data_dir / "server.properties")],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so stop() kills all of it
                cwd=self.data_dir,
                preexec_fn=die_with_parent() if self.die_with_parent else None,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                tail = self._log_tail()
                err = _PortTaken if "Address already in use" in tail else RuntimeError
                raise err(
                    f"Kafka exited with code {code} while starting ({self.log_file}):\n{tail}"
                )
            if self._started_logged() and _api_versions_ok(self.port):
                return
            time.sleep(0.3)
        tail = self._log_tail()
        self.stop()
        raise RuntimeError(
            f"Kafka did not become ready within {timeout}s ({self.log_file}):\n{tail}"
        )

    def _started_logged(self) -> bool:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return False
        # Count starts: after a restart the line must appear once more than before.
        return text.count(STARTED_LINE) > self._starts_seen

    _starts_seen = 0

    _log_from = 0

    def _log_tail(self, n: int = 30) -> str:
        """The last `n` lines this start wrote."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_from)
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-n:])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        """Stop the broker (SIGTERM to its process group, SIGKILL after `timeout`)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            _kill_group(proc.pid, timeout, wait=proc.wait)
        with contextlib.suppress(OSError):
            self._starts_seen = self.log_file.read_text(errors="replace").count(STARTED_LINE)

    def restart(self, timeout: float = 90) -> str:
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ admin tools
    def tool(self, main_class: str, *args: str, timeout: float = 120) -> str:
        """Run one of Kafka's command-line tools against this broker; return its stdout."""
        cmd = [*self._jvm_args(), main_class, *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(
                f"{main_class} {' '.join(args)} failed ({p.returncode}):\n{p.stdout}{p.stderr}"
            )
        return p.stdout

    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None
    ) -> None:
        args = [
            "--bootstrap-server",
            self.bootstrap,
            "--create",
            "--if-not-exists",
            "--topic",
            name,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        ]
        for k, v in sorted((config or {}).items()):
            args += ["--config", f"{k}={v}"]
        self.tool("org.apache.kafka.tools.TopicCommand", *args)

    def delete_records(self, topic: str, before: dict[int, int]) -> None:
        """Delete every record of `topic` below `before[partition]` (moves the log start)."""
        spec = {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "offset": o} for p, o in sorted(before.items())
            ],
        }
        f = self.data_dir / f"delete-{topic}.json"
        f.write_text(json.dumps(spec))
        self.tool(
            "org.apache.kafka.tools.DeleteRecordsCommand",
            "--bootstrap-server",
            self.bootstrap,
            "--offset-json-file",
            str(f),
        )


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent():
    """A `preexec_fn` for `subprocess.Popen`: the child is sent SIGKILL when the thread that
    started it ends, so a test run killed with SIGKILL leaves no broker or daemon behind
    (Linux `prctl(PR_SET_PDEATHSIG)`, kept across exec). Start such children from a thread
    that lives as long as they should. None where prctl is missing (not Linux)."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        # Only a call after fork: no import or allocation-heavy work here.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _kill_group(pid: int, timeout: float, wait=None) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if _wait_gone(pid, timeout, wait):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _wait_gone(pid, 15, wait)


def _wait_gone(pid: int, timeout: float, wait=None) -> bool:
    if wait is not None:
        try:
            wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


# ---------------------------------------------------------------------- command line
def _state_file() -> Path:
    return cache_root() / "kafka-run" / "broker.json"


def _load_state() -> dict | None:
    f = _state_file()
    return json.loads(f.read_text()) if f.exists() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie or a recycled pid is not our broker: check its command line.
    try:
        return b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def main(argv: list[str] | None = None) -> int:
    try:
        return _command(argv)
    except RuntimeError as e:
        # A tool it needs is missing (Maven for the first fetch, Java), or the server did not
        # start: the message says which, and how to fix it; a traceback would bury it.
        print(f"kafka.py: {e}", file=sys.stderr)
        return 1


def _command(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download Kafka's jars from Maven Central into the cache")
    p = sub.add_parser("start", help="start a broker in the background; print its address")
    p.add_argument("--port", type=int, help="client port (default: a free one)")
    p.add_argument("--data-dir", help="keep data here (default: a new temp dir)")
    p.add_argument("--timeout", type=float, default=90)
    p = sub.add_parser("stop", help="stop the broker started by `start`")
    p.add_argument("--keep", action="store_true", help="keep its data dir")
    sub.add_parser("status", help="print the bootstrap address if the broker is running")
    p = sub.add_parser("topic", help="create a topic on the running broker")
    p.add_argument("name")
    p.add_argument("-p", "--partitions", type=int, default=1)
    p.add_argument("--config", nargs="*", default=[], metavar="K=V")
    args = ap.parse_args(argv)

    if args.cmd == "fetch":
        print(fetch())
        return 0
    state = _load_state()
    if args.cmd == "start":
        if state and _alive(state["pid"]):
            print(f"already running: {state['bootstrap']}", file=sys.stderr)
            print(state["bootstrap"])
            return 0
        b = KafkaBroker(args.data_dir, port=args.port)
        b.start(args.timeout)
        assert b.proc is not None
        _state_file().parent.mkdir(parents=True, exist_ok=True)
        _state_file().write_text(
            json.dumps(
                {
                    "pid": b.proc.pid,
                    "bootstrap": b.bootstrap,
                    "data_dir": str(b.data_dir),
                    "own_dir": b._own_dir,
                    "version": b.version,
                }
            )
        )
        print(f"Kafka {b.version} running, data in {b.data_dir}, log {b.log_file}", file=sys.stderr)
        print(b.bootstrap)
        return 0
    if not state:
        print("no broker started by this script", file=sys.stderr)
        return 1 if args.cmd != "stop" else 0
    if args.cmd == "status":
        if _alive(state["pid"]):
            print(state["bootstrap"])
            return 0
        print(f"not running (last: {state['bootstrap']})", file=sys.stderr)
        return 1
    if args.cmd == "stop":
        if _alive(state["pid"]):
            _kill_group(state["pid"], 30)
        if state.get("own_dir") and not args.keep:
            shutil.rmtree(state["data_dir"], ignore_errors=True)
        _state_file().unlink(missing_ok=True)
        print("stopped", file=sys.stderr)
        return 0
    if args.cmd == "topic":
        b = KafkaBroker(state["data_dir"], port=int(state["bootstrap"].rsplit(":", 1)[1]))
        b.create_topic(args.name, args.partitions, dict(kv.split("=", 1) for kv in args.config))
        print(args.name)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
