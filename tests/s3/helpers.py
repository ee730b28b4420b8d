"""Test helpers for the local S3-compatible server: load scripts/s3.py, run Spark elsewhere.

The Spark work of these tests runs in fresh Python processes (`spark_job.py`): the S3A
connector jars must be on the JVM's class path when it starts, and the environment that
carries the server's endpoint and keys is read when the session is built, so the one shared
test session (built without them, before the server exists) cannot be reused.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "s3.py"
RESULT = "RESULT "  # the prefix of spark_job.py's one result line
# What decides where and how a session reaches S3 (ticdc_sync/spark/runtime/storage.py, the AWS SDK):
# a child gets the test server's, never the developer's.
STORAGE_ENV = {
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ALLOW_HTTP",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
}


def server_module() -> ModuleType:
    """scripts/s3.py as a module (it is a script, not part of the package)."""
    name = "ticdc_sync_scripts_s3"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def job_env(server, **overrides: str) -> dict[str, str]:
    """This process's environment plus the server's AWS_* variables, for a child process."""
    env = {k: v for k, v in os.environ.items() if k not in STORAGE_ENV}
    # The jar folder of Spark tests has no S3A connector: resolve it from Maven coordinates.
    env.pop("TICDC_SYNC_JARS_DIR", None)
    env.update(server.env())
    env.update(overrides)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TZ"] = "UTC"
    return env


def run_job(env: dict[str, str], *args: str, timeout: float = 900) -> dict:
    """Run tests/s3/spark_job.py with `args`; its result, or an AssertionError with its log."""
    p = subprocess.run(
        [sys.executable, "-m", "tests.s3.spark_job", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(RESULT)]
    if p.returncode != 0 or not lines:
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-40:])
        raise AssertionError(f"spark_job {' '.join(args)} exited {p.returncode}:\n{tail}")
    return json.loads(lines[-1][len(RESULT) :])
