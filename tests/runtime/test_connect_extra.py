"""A Spark Connect profile in a Python without ticdc-sync's `connect` extra (the README's own
`pip install -e .`): `validate` and `run` say in one line that Spark Connect needs
`pip install 'ticdc-sync[connect]'` (exit 1), never a traceback.

The child Python is this one with the extra's modules made unimportable, as when their
packages are not installed (`helpers.without_modules`). What answers at the profile's
address is a plain TCP listener: the client must stop before it speaks to a server (on the
code before this check, pyspark's own dependency check raised inside the session's
creation: a crash).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.helpers import canal_project, child_env, cli, run_child, without_modules

# The connect extra's modules a client imports (ticdc_sync.core.spark_stack names them).
NOT_INSTALLED = ("grpc", "grpc_status", "google.rpc", "zstandard", "confluent_kafka")


@pytest.fixture
def listener() -> Iterator[str]:
    """An `sc://` address on 127.0.0.1 that accepts connections (and never answers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"sc://127.0.0.1:{s.getsockname()[1]}"


def _remote_profile(root: Path, remote: str, transport: str) -> None:
    (root / "profiles.yml").write_text(
        "test:\n  target: dev\n  outputs:\n    dev:\n"
        f'      spark: {{remote: "{remote}"}}\n'
        f"      warehouse: warehouse\n      transport: {transport}\n"
    )


def _one_error_line(proc) -> str:
    """The one line a child that exits 1 prints besides its progress lines."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "crashed" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln and not ln.startswith("progress:")]
    return line


def test_validate_and_run_name_the_connect_extra(tmp_path, listener):
    env = without_modules(tmp_path / "without-connect-extra", NOT_INSTALLED)
    probe = run_child([sys.executable, "-c", "import grpc"], env=env)
    assert probe.returncode == 1 and "No module named 'grpc'" in probe.stderr
    root = canal_project(tmp_path / "p")
    _remote_profile(root, listener, "{type: files, captures: captures}")
    hint = "(hint: pip install 'ticdc-sync[connect]'; from a checkout, pip install -e '.[connect]')"
    needs = (
        f"Spark Connect ({listener}) needs ticdc-sync's `connect` extra, which is not installed "
        "in this Python (grpcio, grpcio-status, googleapis-common-protos, zstandard missing) "
    )
    line = _one_error_line(run_child(cli("validate", "--project", str(root)), env=env))
    assert line == f"error: validate: {needs}{hint}"
    run = run_child(cli("run", "--project", str(root)), env=env)
    assert _one_error_line(run) == f"error: {needs}{hint}"
    assert not (root / "warehouse" / "tables").exists()  # nothing was run

    # A Kafka transport needs the extra's Kafka client too.
    _remote_profile(root, listener, '{type: kafka, bootstrap_servers: "127.0.0.1:9"}')
    line = _one_error_line(run_child(cli("validate", "--project", str(root)), env=env))
    assert "zstandard, confluent-kafka missing)" in line and line.endswith(hint)

    # With the extra (this Python as it is), validate passes and says what the server needs.
    ok = run_child(cli("validate", "--project", str(root)), env=child_env())
    assert ok.returncode == 0, ok.stderr
    assert f"spark: a Spark Connect client of {listener}: the server must run" in ok.stdout
