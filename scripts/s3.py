#!/usr/bin/env python3
"""A local S3-compatible server (S3Proxy, from Maven Central's jars) for tests and dev: no Docker.

    export AWS_ACCESS_KEY_ID=dev AWS_SECRET_ACCESS_KEY=...   # the server takes its keys from here
    python scripts/s3.py fetch             # download S3Proxy's jars once (needs `mvn` and Java 17)
    eval "$(python scripts/s3.py start)"   # start it; prints `export AWS_ENDPOINT_URL=...` lines
    python scripts/s3.py bucket lake       # create a bucket (signed with the keys above)
    python scripts/s3.py status            # print the endpoint if the server is running
    python scripts/s3.py stop              # stop it and delete its data (unless --keep)

From Python (pytest fixtures): `with S3Server() as s: s.endpoint; s.create_bucket("lake");
s.env()` (the AWS_* variables a client of this server needs). Without keys it makes random ones.

Why S3Proxy: it checks every request's AWS signature (a client with the wrong secret is
refused, so tests show that credentials really come from the environment), and it honours
conditional writes (`If-None-Match: *` on PutObject and CompleteMultipartUpload answers 412
when the key exists), which safe concurrent Delta commits on S3 need. It keeps objects in
files under its data dir ("filesystem" backend). moto's server mode honours conditional
writes too but accepts any signature.

The jars (`org.gaul:s3proxy` and its runtime dependencies) are resolved by Maven into
~/.cache/ticdc-sync/s3proxy-<version>/libs once. Only the Python standard library is used
(plus scripts/kafka.py's process helpers), so the script runs before anything is installed.
It binds 127.0.0.1 only, waits for readiness with a deadline, never leaves a server behind
when used as a context manager, and never prints a secret. It must not contain ticdc-sync
logic.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import hmac
import http.client
import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

DEFAULT_VERSION = "4.1.0"
# Maven's nearest-wins picks jackson-annotations 2.18 (through the Azure SDK) while S3Proxy's
# jackson-databind 3.x needs the newest 2.x annotations (its BOM says 2.22): without this pin
# the server dies at start with NoClassDefFoundError (JsonSerializeAs).
PINNED = [("com.fasterxml.jackson.core", "jackson-annotations", "2.22")]
HEAP = os.environ.get("TICDC_SYNC_S3_HEAP", "-Xms64m -Xmx384m")
DEFAULT_REGION = "us-east-1"

LOGBACK_CONF = """<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d %-5level %logger{{36}} - %msg%n</pattern></encoder>
  </appender>
  <root level="{level}"><appender-ref ref="out"/></root>
</configuration>
"""


def _kafka_script() -> ModuleType:
    """scripts/kafka.py, for its Java and process helpers (one copy of die_with_parent)."""
    name = "ticdc_sync_scripts_kafka"  # the name tests/kafka/helpers.py loads it under
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("kafka.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_k = _kafka_script()
cache_root, java, free_port, die_with_parent = (
    _k.cache_root,
    _k.java,
    _k.free_port,
    _k.die_with_parent,
)


def version() -> str:
    return os.environ.get("TICDC_SYNC_S3PROXY_VERSION", DEFAULT_VERSION)


def _pom(ver: str) -> str:
    deps = [("org.gaul", "s3proxy", ver), *PINNED]
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.ticdc-sync</groupId><artifactId>s3proxy-fetch</artifactId><version>1</version>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def fetch(ver: str | None = None, *, timeout: float = 900) -> Path:
    """Resolve S3Proxy's jars into the cache once; return the libs folder."""
    ver = ver or version()
    home = cache_root() / f"s3proxy-{ver}"
    libs = home / "libs"
    if (home / "COMPLETE").exists() and any(libs.glob("s3proxy-*.jar")):
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise RuntimeError(
            "Maven (`mvn`) is needed once to download S3Proxy's jars from Maven Central "
            f"(hint: install maven, or fill {libs} with the jars of S3Proxy {ver} and their "
            f"dependencies and create {home}/COMPLETE)"
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
            raise RuntimeError(f"downloading S3Proxy {ver} jars timed out after {timeout}s") from e
        if p.returncode != 0:
            tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-15:])
            raise RuntimeError(
                f"cannot download S3Proxy {ver} from Maven Central "
                f"(try TICDC_SYNC_S3PROXY_VERSION={DEFAULT_VERSION}):\n{tail}"
            )
        if libs.exists():
            shutil.rmtree(libs)
        (work / "libs").rename(libs)
        (home / "COMPLETE").write_text(ver + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return libs


# ---------------------------------------------------------------------- signed requests
def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _quote(text: str, safe: str = "-_.~") -> str:
    return urllib.parse.quote(text, safe=safe)


def sign_v4(
    method: str,
    host: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    payload: bytes,
    *,
    access_key: str,
    secret_key: str,
    region: str,
    now: dt.datetime | None = None,
) -> dict[str, str]:
    """The headers of an AWS Signature Version 4 request to S3 (path-style addressing)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    body_hash = hashlib.sha256(payload).hexdigest()
    hdrs = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    hdrs.update({"host": host, "x-amz-date": stamp, "x-amz-content-sha256": body_hash})
    names = sorted(hdrs)
    canonical = "\n".join(
        [
            method,
            _quote(path, safe="/-_.~"),
            "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items())),
            "".join(f"{k}:{hdrs[k]}\n" for k in names),
            ";".join(names),
            body_hash,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(("AWS4" + secret_key).encode(), day)
    for part in (region, "s3", "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    hdrs["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return hdrs


class S3Error(RuntimeError):
    """A request to the server was answered with an error status."""

    def __init__(self, status: int, body: bytes, what: str) -> None:
        self.status = status
        self.body = body
        try:  # S3's error document: <Error><Code>..</Code><Message>..</Message></Error>
            root = ET.fromstring(body)
            detail = f"{root.findtext('Code')}: {root.findtext('Message')}"
        except ET.ParseError:
            detail = body[:300].decode(errors="replace")
        super().__init__(f"{what}: HTTP {status} {detail}")


# ---------------------------------------------------------------------- the server
class _PortTaken(RuntimeError):
    """S3Proxy could not bind its port."""


class S3Server:
    """One S3Proxy on 127.0.0.1 in its own process group, objects kept under `data_dir`.

    `start()` waits until a signed ListBuckets succeeds, `stop()` keeps the data, `close()`
    stops it and deletes a data dir this object created. All waits are bounded. The keys it
    checks signatures against are `access_key`/`secret_key` (random unless given).
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str = DEFAULT_REGION,
        s3proxy_version: str | None = None,
        log_level: str = "WARN",
        die_with_parent: bool = False,
    ) -> None:
        self.version = s3proxy_version or version()
        # Tests: the server goes when the process that started it goes, even by SIGKILL;
        # `s3.py start` leaves it running for later commands.
        self.die_with_parent = die_with_parent
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="ticdc-sync-s3-"))
        self.port = port or free_port()
        # A port we picked may be taken before S3Proxy binds it (the machine is shared):
        # that one, and only before the first successful start, is re-picked.
        self._repick_port = port is None
        self._started_once = False
        self.access_key = access_key or "test-" + secrets.token_hex(6)
        self.secret_key = secret_key or secrets.token_hex(20)
        self.region = region
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.libs: Path | None = None
        self._log_from = 0

    # ------------------------------------------------------------------ addresses
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def env(self) -> dict[str, str]:
        """The environment a client of this server needs (AWS SDKs, ticdc-sync, delta-rs)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            # Plain http is refused by clients unless allowed: this server is local only.
            "AWS_ALLOW_HTTP": "true",
        }

    def __repr__(self) -> str:  # never shows the secret
        return f"S3Server({self.endpoint}, access_key={self.access_key!r})"

    # ------------------------------------------------------------------ lifecycle
    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "blobs").mkdir(exist_ok=True)
        conf = {
            "s3proxy.endpoint": self.endpoint,
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": self.access_key,
            "s3proxy.credential": self.secret_key,
            "jclouds.provider": "filesystem",
            # The filesystem backend has no credentials of its own; S3Proxy insists on both.
            "jclouds.identity": "local",
            "jclouds.credential": "local",
            "jclouds.filesystem.basedir": str(self.data_dir / "blobs"),
        }
        path = self.data_dir / "s3proxy.conf"
        # The secret is in this file (S3Proxy reads its keys from it): owner-only.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in sorted(conf.items())))
        (self.data_dir / "logback.xml").write_text(LOGBACK_CONF.format(level=self.log_level))
        return path

    def _command(self, conf: Path) -> list[str]:
        if self.libs is None:
            self.libs = fetch(self.version)
        return [
            java(),
            *HEAP.split(),
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start; throughput is irrelevant here
            "-Djava.awt.headless=true",
            f"-Dlogback.configurationFile={self.data_dir / 'logback.xml'}",
            "-cp",
            str(self.libs / "*"),
            "org.gaul.s3proxy.Main",
            "--properties",
            str(conf),
        ]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60) -> str:
        """Start the server; return its endpoint once it answers a signed request."""
        if self.running:
            return self.endpoint
        for attempt in range(3):
            try:
                self._start_once(timeout)
                self._started_once = True
                return self.endpoint
            except _PortTaken:
                if not self._repick_port or self._started_once or attempt == 2:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> None:
        conf = self._write_config()
        cmd = self._command(conf)
        self._log_from = self.log_file.stat().st_size if self.log_file.exists() else 0
        log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child process
        try:
            self.proc = subprocess.Popen(
                cmd,
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
                    f"S3Proxy exited with code {code} while starting ({self.log_file}):\n{tail}"
                )
            if self._answers():
                return
            time.sleep(0.2)
        tail = self._log_tail()
        self.stop()
        raise RuntimeError(
            f"S3Proxy did not become ready within {timeout}s ({self.log_file}):\n{tail}"
        )

    def _answers(self) -> bool:
        try:
            status, _, _ = self.request("GET", "/", timeout=2)
        except OSError:
            return False
        return status == 200

    def _log_tail(self, n: int = 30) -> str:
        """The last `n` lines this start wrote."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_from)
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-n:])

    def stop(self, timeout: float = 30) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after `timeout`)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            _k._kill_group(proc.pid, timeout, wait=proc.wait)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> S3Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ S3 requests
    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        secret_key: str | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        """One signed request (path-style: `/bucket/key`); (status, headers, body).

        `secret_key` signs with another secret (to check that the server refuses it)."""
        host = f"127.0.0.1:{self.port}"
        query = dict(query or {})
        signed = sign_v4(
            method,
            host,
            path,
            query,
            dict(headers or {}),
            body,
            access_key=self.access_key,
            secret_key=secret_key or self.secret_key,
            region=self.region,
        )
        target = _quote(path, safe="/-_.~")
        if query:
            target += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, target, body=body, headers=signed)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def create_bucket(self, name: str) -> None:
        """Create bucket `name`; one that this server already has is fine."""
        status, _, body = self.request("PUT", f"/{name}")
        if status != 200 and b"BucketAlreadyOwnedByYou" not in body:
            raise S3Error(status, body, f"create bucket {name}")

    def put_object(self, bucket: str, key: str, data: bytes, *, if_none_match: bool = False) -> int:
        """PutObject; with `if_none_match`, only if the key does not exist. The status
        (200, or 412 when the key exists and `if_none_match` was asked)."""
        headers = {"If-None-Match": "*"} if if_none_match else {}
        status, _, body = self.request("PUT", f"/{bucket}/{key}", body=data, headers=headers)
        if status not in (200, 412):
            raise S3Error(status, body, f"put s3://{bucket}/{key}")
        return status

    def get_object(self, bucket: str, key: str) -> bytes:
        status, _, body = self.request("GET", f"/{bucket}/{key}")
        if status != 200:
            raise S3Error(status, body, f"get s3://{bucket}/{key}")
        return body

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under `prefix`, in key order (ListObjectsV2, all pages)."""
        keys: list[str] = []
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            status, _, body = self.request("GET", f"/{bucket}", query=query)
            if status != 200:
                raise S3Error(status, body, f"list s3://{bucket}/{prefix}")
            root = ET.fromstring(body)
            ns = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
            keys += [e.text or "" for e in root.iter(f"{ns}Key")]
            if (root.findtext(f"{ns}IsTruncated") or "false") != "true":
                return keys
            token = root.findtext(f"{ns}NextContinuationToken")


# ---------------------------------------------------------------------- command line
def _run_dir() -> Path:
    return Path(os.environ.get("TICDC_SYNC_S3_RUN_DIR") or cache_root() / "s3-run")


def _state_file() -> Path:
    return _run_dir() / "server.json"


def _load_state() -> dict | None:
    f = _state_file()
    return json.loads(f.read_text()) if f.exists() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie or a recycled pid is not our server: check its command line.
    try:
        return b"org.gaul.s3proxy.Main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def _keys_from_env() -> tuple[str, str]:
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        raise SystemExit(
            "s3.py: the server's keys come from the environment: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (hint: export AWS_ACCESS_KEY_ID=dev "
            "AWS_SECRET_ACCESS_KEY=\"$(python -c 'import secrets; print(secrets.token_hex(20))')\")"
        )
    return key, secret


def main(argv: list[str] | None = None) -> int:
    try:
        return _command(argv)
    except RuntimeError as e:
        # A tool it needs is missing (Maven for the first fetch, Java), or the server did not
        # start: the message says which, and how to fix it; a traceback would bury it.
        print(f"s3.py: {e}", file=sys.stderr)
        return 1


def _command(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download S3Proxy's jars from Maven Central into the cache")
    p = sub.add_parser("start", help="start a server in the background; print export lines")
    p.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--data-dir", help="keep objects here (default: a new temp dir)")
    p.add_argument("--timeout", type=float, default=60)
    p = sub.add_parser("stop", help="stop the server started by `start`")
    p.add_argument("--keep", action="store_true", help="keep its data dir")
    sub.add_parser("status", help="print the endpoint if the server is running")
    p = sub.add_parser("bucket", help="create a bucket on the running server")
    p.add_argument("name")
    args = ap.parse_args(argv)

    if args.cmd == "fetch":
        print(fetch())
        return 0
    state = _load_state()
    if args.cmd == "start":
        key, secret = _keys_from_env()
        if state and _alive(state["pid"]):
            print(f"already running: {state['endpoint']}", file=sys.stderr)
        else:
            s = S3Server(args.data_dir, port=args.port, access_key=key, secret_key=secret)
            s.start(args.timeout)
            assert s.proc is not None
            _state_file().parent.mkdir(parents=True, exist_ok=True)
            state = {
                "pid": s.proc.pid,
                "endpoint": s.endpoint,
                "port": s.port,
                "region": s.region,
                "data_dir": str(s.data_dir),
                "own_dir": s._own_dir,
                "version": s.version,
            }
            _state_file().write_text(json.dumps(state, sort_keys=True))
            print(f"S3Proxy {s.version} running, data in {s.data_dir}", file=sys.stderr)
        # The keys stay where they came from (the environment): only the rest is printed.
        print(f"export AWS_ENDPOINT_URL={state['endpoint']}")
        print(f"export AWS_REGION={state['region']}")
        print("export AWS_ALLOW_HTTP=true")
        return 0
    if not state:
        print("no server started by this script", file=sys.stderr)
        return 1 if args.cmd != "stop" else 0
    if args.cmd == "status":
        if _alive(state["pid"]):
            print(state["endpoint"])
            return 0
        print(f"not running (last: {state['endpoint']})", file=sys.stderr)
        return 1
    if args.cmd == "stop":
        if _alive(state["pid"]):
            _k._kill_group(state["pid"], 30)
        if state.get("own_dir") and not args.keep:
            shutil.rmtree(state["data_dir"], ignore_errors=True)
        _state_file().unlink(missing_ok=True)
        print("stopped", file=sys.stderr)
        return 0
    if args.cmd == "bucket":
        key, secret = _keys_from_env()
        s = S3Server(
            state["data_dir"],
            port=state["port"],
            access_key=key,
            secret_key=secret,
            region=state["region"],
        )
        try:
            s.create_bucket(args.name)
        except S3Error as e:
            print(
                f"s3.py: {e} (hint: are AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY the keys "
                "the server was started with?)",
                file=sys.stderr,
            )
            return 1
        print(args.name)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
