"""The local servers' scripts (scripts/kafka.py, scripts/s3.py) on a machine without what
their first `fetch` needs (Maven): one line saying so and how to fix it (exit 1), not a
traceback. Nothing is downloaded or started: the jar cache is an empty folder of the test's,
and PATH holds no `mvn`.
"""

from __future__ import annotations

import sys

import pytest

from tests.runtime.helpers import REPO, child_env, run_child


@pytest.mark.parametrize(("script", "what"), [("kafka", "Kafka's jars"), ("s3", "S3Proxy's jars")])
def test_fetch_without_maven_is_one_line(tmp_path, script, what):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = child_env(TICDC_SYNC_CACHE=str(tmp_path / "cache"), PATH=str(empty))
    proc = run_child([sys.executable, str(REPO / "scripts" / f"{script}.py"), "fetch"], env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        f"{script}.py: Maven (`mvn`) is needed once to download {what} from Maven Central "
        "(hint: install maven, or fill "
    ), line
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.jar"))
