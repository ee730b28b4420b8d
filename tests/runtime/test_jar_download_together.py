"""Sessions started at once on a machine whose Ivy home lacks their jars: one downloads, the
others wait for it, and all start (`session.one_resolver`).

Spark's Ivy resolution is not safe across processes: JVMs downloading into one Ivy home at
once read each other's half-written files and fail. The repository here is a local HTTP
server with one small artifact whose download is held until a second download of it begins
(or a few seconds pass), so without the lock the downloads surely overlap. Nothing touches
the network.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.runtime.helpers import CHILD_TIMEOUT_S, child_env
from tests.runtime.test_jar_download import ivy_settings, serve_repository

pytestmark = pytest.mark.spark

GROUP, ARTIFACT, VERSION = "org.example", "tiny", "1.0"
BASE = f"/maven2/org/example/{ARTIFACT}/{VERSION}/{ARTIFACT}-{VERSION}"
POM = (
    '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
    f"<groupId>{GROUP}</groupId><artifactId>{ARTIFACT}</artifactId><version>{VERSION}</version>"
    "</project>"
).encode()
HOLD_S = 3.0  # how long a download waits for a second one to begin


def _jar() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("tiny/data.bin", bytes(range(256)) * 4096)  # 1 MiB
    return out.getvalue()


class Repository(BaseHTTPRequestHandler):
    """The pom and the jar of org.example:tiny:1.0; each GET of the jar is recorded (its
    start) and held until another begins or HOLD_S pass."""

    protocol_version = "HTTP/1.1"
    jar: bytes
    downloads: list[float]
    started: threading.Condition

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        body = {f"{BASE}.pom": POM, f"{BASE}.jar": self.jar}.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        if self.path.endswith(".jar"):
            with self.started:
                self.downloads.append(time.monotonic())
                self.started.notify_all()
                self.started.wait_for(lambda: len(self.downloads) > 1, timeout=HOLD_S)
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def repository() -> Iterator[tuple[str, list[float]]]:
    downloads: list[float] = []
    attrs = {"jar": _jar(), "downloads": downloads, "started": threading.Condition()}
    with serve_repository(type("Handler", (Repository,), attrs)) as root:
        yield root, downloads


CHILD = """
import sys
from ticdc_sync.spark.runtime.session import build_session
settings, ivy, package = sys.argv[1:]
spark = build_session(None, app_name="together", kafka=False,
    jars={"spark.jars.packages": package},
    extra_conf={"spark.master": "local[1]", "spark.ui.enabled": "false",
                "spark.jars.ivySettings": settings, "spark.jars.ivy": ivy})
print("started", flush=True)
spark.stop()
"""


def test_sessions_started_at_once_download_once_and_all_start(tmp_path, repository):
    root_url, downloads = repository
    settings = ivy_settings(tmp_path / "ivysettings.xml", root_url)
    ivy = tmp_path / "ivy"  # empty: the jar must be downloaded
    env = child_env(TICDC_SYNC_JARS_DIR=None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(settings), str(ivy), f"{GROUP}:{ARTIFACT}:{VERSION}"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=CHILD_TIMEOUT_S) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and "started" in out, f"exit {p.returncode}:\n{err[-3000:]}"
    # One process downloaded the jar; the others waited and found it in the Ivy home.
    assert len(downloads) == 1, downloads
    assert (ivy / "jars" / f"{GROUP}_{ARTIFACT}-{VERSION}.jar").exists()
    waited = [err for _, err in outs if "waiting for another process to download" in err]
    assert waited, [err[-2000:] for _, err in outs]
    assert all(str(ivy) in err for err in waited)
