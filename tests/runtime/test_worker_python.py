"""Open Protocol from a virtualenv that is not activated (pipx, `venv/bin/ticdc-sync`).

Decoding Open Protocol runs Python workers. PySpark starts them with `python3` from PATH
unless told otherwise; here that is a bare venv without ticdc_sync or pyspark's
dependencies, as on a machine where ticdc-sync lives in its own venv. With a local
master the workers must run the driver's interpreter.
"""

from __future__ import annotations

import site as site_module
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.helpers import REPO, ROWS, child_env, cli, open_project, run_child
from tests.spark.engine_harness import load, read_target

pytestmark = pytest.mark.spark

ENTRY_POINT = Path(sys.executable).parent / "ticdc-sync"


def app_venv(where: Path) -> Path:
    """A venv like pipx's: its own interpreter, ticdc-sync's entry point in its bin/, and
    this checkout importable from its site-packages (a .pth file) but not through the
    environment, so only that interpreter sees it. Its dependencies come from the
    site-packages of the interpreter running the tests, added by the same .pth file: that
    interpreter may itself be a venv's, whose packages a venv made from it with
    `--system-site-packages` would not see (those are its base interpreter's)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    # `site.addsitedir` also reads the .pth files there (an editable install's, say).
    dirs = [d for d in site_module.getsitepackages() if Path(d).is_dir()]
    lines = [str(REPO), *(f"import site; site.addsitedir({d!r})" for d in dirs)]
    (site / "ticdc_sync_checkout.pth").write_text("\n".join(lines) + "\n")
    assert ENTRY_POINT.exists(), f"{ENTRY_POINT} missing (hint: pip install -e .)"
    body = ENTRY_POINT.read_text().split("\n", 1)[1]  # the installed script without its #!
    script = where / "bin" / "ticdc-sync"
    script.write_text(f"#!{where / 'bin' / 'python'}\n{body}")
    script.chmod(0o755)
    return script


def test_open_protocol_runs_from_an_unactivated_venv(spark, tmp_path):
    bare = tmp_path / "bare"  # what `python3` on PATH is: no ticdc_sync, no pyspark
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    probe = subprocess.run(
        [str(bare / "bin" / "python3"), "-c", "import pyarrow"], capture_output=True
    )
    assert probe.returncode != 0, "the bare venv must lack the dependencies"
    entry = app_venv(tmp_path / "app")
    root = open_project(tmp_path / "p")
    env = child_env(
        PYTHONPATH=None,  # the app venv finds this checkout by itself
        PYSPARK_PYTHON=None,
        PYSPARK_DRIVER_PYTHON=None,
        PATH=f"{bare / 'bin'}:{child_env()['PATH']}",
    )
    proc = run_child([str(entry), "run", "--project", str(root)], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ModuleNotFoundError" not in proc.stderr
    assert read_target(spark, load(root), "t", "id") == [
        {**r, "_commit_ts": 100 + i} for i, r in enumerate(ROWS)
    ]


@pytest.mark.parametrize("how", ["PYSPARK_PYTHON", "spark.pyspark.python"])
def test_the_users_worker_python_is_kept(spark, tmp_path, how):
    """A worker interpreter the user chose wins, from the environment or the profile's
    `spark.conf`: pointing it at the bare venv makes the workers fail."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python3")
    if how == "PYSPARK_PYTHON":
        root, env = open_project(tmp_path / "p"), child_env(PYSPARK_PYTHON=python)
    else:
        root, env = open_project(tmp_path / "p", {how: python}), child_env(PYSPARK_PYTHON=None)
    proc = run_child(cli("run", "--project", str(root)), env=env)
    assert proc.returncode == 3
    assert "ModuleNotFoundError" in proc.stderr
