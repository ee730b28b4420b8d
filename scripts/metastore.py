#!/usr/bin/env python3
"""A local Hive metastore server (thrift) from the Hive jars PySpark ships: no Docker.

    python scripts/metastore.py start [--port N] [--data-dir D]  # print thrift://127.0.0.1:N
    python scripts/metastore.py status   # is the server started by `start` still running?
    python scripts/metastore.py stop     # stop it and delete its data (unless --keep)

From Python (pytest fixtures): `with Metastore() as m: m.uri; m.restart(); ...`.

PySpark's `jars/` folder holds Hive's metastore (hive-metastore, hive-exec, Hive 2.3, with
DataNucleus, Derby and Thrift; they come from Maven Central inside the PySpark wheel). The
server keeps its database in Derby in the data folder (`db/`, created on its first start
with `datanucleus.schema.autoCreateAll`), so it persists across restarts of one data dir;
its managed-table warehouse is `warehouse/` there. Only the Python standard library is
used (PySpark is found, not imported). It binds 127.0.0.1 by default, waits for the thrift
port with a deadline, and never leaves a server behind when used as a context manager. It
must not contain ticdc-sync logic.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _kafka_script():
    """scripts/kafka.py (its process helpers), loaded by path: `kafka` may name a package."""
    name = "ticdc_sync_scripts_kafka"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("kafka.py"))
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


_k = _kafka_script()
_kill_group, cache_root, die_with_parent = _k._kill_group, _k.cache_root, _k.die_with_parent
free_port, java = _k.free_port, _k.java

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
HEAP = os.environ.get("TICDC_SYNC_METASTORE_HEAP", "-Xms64m -Xmx384m")


def pyspark_jars() -> Path:
    """PySpark's jar folder (found without importing PySpark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise RuntimeError("pyspark is not installed (hint: pip install pyspark)")
    jars = Path(spec.origin).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise RuntimeError(f"{jars} holds no hive-metastore jar (a PySpark without Hive?)")
    return jars


def site_xml(data_dir: Path) -> str:
    props = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={data_dir / 'db'};create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": (data_dir / "warehouse").as_uri(),
        # Hive's log4j2 setup would pick the async logger, whose LMAX disruptor jar PySpark
        # does not ship: the server then dies at start.
        "hive.async.log.enabled": "false",
        "hive.metastore.event.db.notification.api.auth": "false",
    }
    body = "\n".join(
        f"  <property><name>{k}</name><value>{v}</value></property>" for k, v in props.items()
    )
    return f"<configuration>\n{body}\n</configuration>\n"


def _port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False


class Metastore:
    """One Hive metastore server on `host:port` with its data in `data_dir` (a new temp
    folder, deleted by `close`, when not given)."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        die_with_parent: bool = False,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="ticdc-metastore-")).resolve()
        self.port = port or free_port()
        self.host = host
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "metastore.log"

    def start(self, timeout: float = 120) -> str:
        """Start the server; return its thrift URI once the port accepts connections."""
        if self.running:
            return self.uri
        conf = self.data_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "hive-site.xml").write_text(site_xml(self.data_dir))
        log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child process
        try:
            self.proc = subprocess.Popen(
                [
                    java(),
                    *HEAP.split(),
                    "-XX:TieredStopAtLevel=1",
                    "-XX:+UseSerialGC",
                    f"-Dhive.metastore.host={self.host}",
                    "-cp",
                    f"{conf}{os.pathsep}{pyspark_jars()}/*",
                    MAIN_CLASS,
                    "-p",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so stop() kills all of it
                cwd=self.data_dir,  # derby.log lands here
                preexec_fn=die_with_parent() if self.die_with_parent else None,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise RuntimeError(
                    f"the metastore exited with code {code} while starting ({self.log_file}):\n"
                    + self._log_tail()
                )
            if _port_open(self.host, self.port):
                return self.uri
            time.sleep(0.3)
        tail = self._log_tail()
        self.stop()
        raise RuntimeError(f"the metastore did not open its port within {timeout}s:\n{tail}")

    def _log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after `timeout`)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            _kill_group(proc.pid, timeout, wait=proc.wait)

    def restart(self, timeout: float = 120) -> str:
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Metastore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- command line
def _state_file() -> Path:
    return cache_root() / "metastore-run" / "server.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return MAIN_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("start", help="start a metastore in the background; print its URI")
    p.add_argument("--port", type=int, help="thrift port (default: a free one)")
    p.add_argument("--data-dir", help="keep its Derby database here (default: a new temp dir)")
    p.add_argument("--timeout", type=float, default=120)
    p = sub.add_parser("stop", help="stop the metastore started by `start`")
    p.add_argument("--keep", action="store_true", help="keep its data dir")
    sub.add_parser("status", help="print the thrift URI if the metastore is running")
    args = ap.parse_args(argv)
    f = _state_file()
    state = json.loads(f.read_text()) if f.exists() else None
    try:
        if args.cmd == "start":
            if state and _alive(state["pid"]):
                print(state["uri"])
                return 0
            m = Metastore(args.data_dir, port=args.port)
            m.start(args.timeout)
            assert m.proc is not None
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(
                json.dumps(
                    {
                        "pid": m.proc.pid,
                        "uri": m.uri,
                        "data_dir": str(m.data_dir),
                        "own": m._own_dir,
                    }
                )
            )
            print(f"metastore running, data in {m.data_dir}, log {m.log_file}", file=sys.stderr)
            print(m.uri)
            return 0
    except RuntimeError as e:
        print(f"metastore.py: {e}", file=sys.stderr)
        return 1
    if not state:
        print("no metastore started by this script", file=sys.stderr)
        return 1 if args.cmd != "stop" else 0
    if args.cmd == "status":
        if _alive(state["pid"]):
            print(state["uri"])
            return 0
        print(f"not running (last: {state['uri']})", file=sys.stderr)
        return 1
    if _alive(state["pid"]):
        _kill_group(state["pid"], 30)
    if state.get("own") and not args.keep:
        shutil.rmtree(state["data_dir"], ignore_errors=True)
    f.unlink(missing_ok=True)
    print("stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
