"""Start Spark's JVM with its output captured: every line it prints (Ivy's resolution,
log4j, the JVM's own warnings, Python workers' stderr) goes to a callback, line by line.

PySpark starts the JVM through `spark-submit` (`java_gateway.launch_gateway`), whose
output is otherwise the terminal's. Here it is a pipe, read by a daemon thread; the
caller (`session.build_session`) then hands the gateway to the SparkContext. The JVM
runs in a process group of its own, out of reach of the terminal's Ctrl-C. Python's
own loggers of py4j and PySpark (which print tracebacks of calls cut short by Ctrl-C)
go to the same callback. This module must not configure Spark or decide where lines end
up; the callback does.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable

Sink = Callable[[str], None]


def gateway_running() -> bool:
    """A JVM is already there: this process's, or the one `spark-submit` started for it."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def launch(conf: dict[str, str], sink: Sink) -> None:
    """Start the JVM with `conf` (what `spark-submit --conf` gets, master and app name
    included) and its output piped to `sink`; the next SparkContext uses it. Raises what
    `launch_gateway` raises (JAVA_GATEWAY_EXITED when the JVM exits before it is up)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False)
    for k, v in sorted(conf.items()):
        spark_conf.set(k, v)
    capture_python_logs(sink)
    # A pipe of our own, read from before the JVM starts: when the JVM exits during
    # start-up (a failed download), its last lines are read before the error is raised.
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    pump = threading.Thread(
        target=_pump, args=(reader, sink), name="ticdc-sync-jvm-output", daemon=True
    )
    pump.start()
    try:
        gateway = launch_gateway(
            spark_conf,
            popen_kwargs={
                "stdout": write_fd,
                "stderr": subprocess.STDOUT,
                # Its own process group: Ctrl-C on the terminal reaches ticdc-sync only,
                # which decides when to stop. PySpark keeps the JVM from dying of it, but
                # the Python workers the JVM forks (Open Protocol decoding) would, failing
                # their tasks. The JVM still ends with this process: it exits when its
                # stdin closes.
                "start_new_session": True,
            },
        )
    except BaseException:
        os.close(write_fd)
        pump.join(timeout=30)
        raise
    os.close(write_fd)  # the JVM holds its own copy
    SparkContext._ensure_initialized(gateway=gateway)


def _pump(stream, sink: Sink) -> None:
    for raw in iter(stream.readline, b""):
        try:
            sink(raw.decode("utf-8", "replace").rstrip("\r\n"))
        except Exception:  # noqa: BLE001, S112 - a closed sink must not kill the reader
            continue


class _SinkHandler(logging.Handler):
    def __init__(self, sink: Sink) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            for line in self.format(record).splitlines():
                self.sink(line)
        except Exception:  # noqa: BLE001 - logging must never raise
            pass


def capture_python_logs(sink: Sink) -> None:
    """py4j's and PySpark's Python loggers to `sink` instead of stderr."""
    for name in ("py4j", "pyspark"):
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if not isinstance(h, _SinkHandler)]
        logger.addHandler(_SinkHandler(sink))
        logger.propagate = False
