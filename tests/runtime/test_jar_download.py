"""A Maven repository that answers badly: the run retries once, then exits 1 (not a crash)
naming the artifact and how to run without downloads.

The repository is a local HTTP server that promises a body and sends none (Ivy: "Downloaded
file size (0) doesn't match expected Content Length"); an Ivy settings file points Spark's
resolution at it and an empty Ivy home makes it download. Nothing touches the network.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.runtime.helpers import canal_project, child_env, cli, run_child
from ticdc_sync.spark.runtime.session import DELTA_PACKAGE

pytestmark = pytest.mark.spark


class BrokenRepository(BaseHTTPRequestHandler):
    """Every file exists (HEAD) and every download is cut off before its first byte."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str]]

    def _answer(self) -> None:
        self.seen.append((self.command, self.path))
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    do_GET = do_HEAD = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@contextmanager
def serve_repository(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a loopback port while the block runs; its Maven root URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/maven2/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def broken_repository() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    seen: list[tuple[str, str]] = []
    with serve_repository(type("Handler", (BrokenRepository,), {"seen": seen})) as root:
        yield root, seen


def ivy_settings(path: Path, root: str) -> Path:
    path.write_text(
        "<ivysettings>\n"
        '  <settings defaultResolver="broken"/>\n'
        "  <resolvers>\n"
        f'    <ibiblio name="broken" m2compatible="true" root="{root}"/>\n'
        "  </resolvers>\n"
        "</ivysettings>\n"
    )
    return path


def test_failed_jar_download_is_retried_then_a_user_error(tmp_path, broken_repository):
    root_url, seen = broken_repository
    conf = {
        "spark.jars.ivySettings": ivy_settings(tmp_path / "ivysettings.xml", root_url),
        "spark.jars.ivy": tmp_path / "ivy",  # empty: everything must be downloaded
    }
    project = canal_project(tmp_path / "p", conf)
    proc = run_child(cli("run", "--project", str(project)), env=child_env(TICDC_SYNC_JARS_DIR=None))
    # Ivy's messages are in the log file, not on the terminal; the log is named.
    log = project / "target" / "logs" / "ticdc-sync.log"
    assert "doesn't match expected Content Length" in log.read_text()  # Ivy met the server
    assert "Content Length" not in proc.stderr and "log: " in proc.stderr
    assert proc.returncode == 1
    assert "this is a bug" not in proc.stderr
    assert "Traceback (most recent call last)" not in proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert DELTA_PACKAGE in error
    assert "spark.jars_dir" in error and "TICDC_SYNC_JARS_DIR" in error
    assert "python -m ticdc_sync.spark --fetch DIR" in error
    group, artifact, version = DELTA_PACKAGE.split(":")
    pom = f"/maven2/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    # One download per JVM: the second is the retry.
    assert seen.count(("GET", pom)) == 2
