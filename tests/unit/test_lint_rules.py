"""The import rules ruff enforces (`TID251`, banned-api): the pure core never imports Spark,
and the Spark package never imports the modules that decide (`routing`, `table_features`,
`plan.policy`): it carries out the plan (`ticdc_sync/spark/ruff.toml`).

Each rule is checked on a probe module given to ruff on stdin under a path in the package
(ruff picks the settings of the folder the path is in), and the package itself must pass.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def _probe(path: str, source: str) -> subprocess.CompletedProcess[str]:
    return _ruff("--select", "TID251", "--stdin-filename", path, "-", stdin=source)


@pytest.mark.parametrize(
    "source",
    [
        "from ticdc_sync.project import routing\n\nprint(routing)\n",
        "from ticdc_sync.project.routing import merge_keys\n\nprint(merge_keys)\n",
        "import ticdc_sync.plan.table_features\n\nprint(ticdc_sync.plan.table_features)\n",
        "from ticdc_sync.plan.table_features import create_properties\n\nprint(create_properties)\n",
        "from ticdc_sync.plan import policy\n\nprint(policy)\n",
        "from ticdc_sync.plan.policy import decide\n\nprint(decide)\n",
    ],
)
@pytest.mark.parametrize("folder", ["spark", "spark/apply", "spark/staging"])
def test_spark_may_not_import_what_decides(source: str, folder: str) -> None:
    r = _probe(f"ticdc_sync/{folder}/probe.py", source)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "TID251" in r.stdout and "the engine carries out the plan" in r.stdout


def test_spark_may_import_pyspark_and_the_plan() -> None:
    source = "import pyspark\n\nfrom ticdc_sync.plan import steps\n\nprint(pyspark, steps)\n"
    r = _probe("ticdc_sync/spark/probe.py", source)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_core_may_not_import_pyspark_but_may_decide() -> None:
    r = _probe("ticdc_sync/plan/probe.py", "import pyspark\n\nprint(pyspark)\n")
    assert r.returncode == 1 and "only ticdc_sync/spark/ may import pyspark" in r.stdout
    r = _probe(
        "ticdc_sync/plan/probe.py", "from ticdc_sync.project import routing\n\nprint(routing)\n"
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_package_keeps_the_rules() -> None:
    r = _ruff("--select", "TID251", "ticdc_sync")
    assert r.returncode == 0, r.stdout + r.stderr
