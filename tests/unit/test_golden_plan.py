"""The example project's plan, text and JSON, byte for byte against committed golden files.

Rendered in a fresh interpreter with its own hash seed, so an ordering that varies between
processes (set or dict iteration over strings) shows up as a difference. When the plan is
meant to change, regenerate the files with the commands in `GOLDEN_HOWTO` and review the
diff like any other change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "projects_example" / "shop"
GOLDEN = REPO / "tests" / "golden"
GOLDEN_HOWTO = (
    "copy projects_example/shop without warehouse/ and target/ to DIR, then "
    "`ticdc-sync plan --project DIR/shop > tests/golden/example_plan.txt` and the same with "
    "`--format json` > tests/golden/example_plan.json"
)


@pytest.mark.parametrize(
    ("args", "golden", "seed"),
    [
        ([], "example_plan.txt", "1"),
        ([], "example_plan.txt", "4242"),
        (["--format", "json"], "example_plan.json", "7"),
        (["--format", "json"], "example_plan.json", "31337"),
    ],
)
def test_example_plan_matches_golden(tmp_path: Path, args: list[str], golden: str, seed: str):
    shop = tmp_path / "shop"
    shutil.copytree(SHOP, shop, ignore=shutil.ignore_patterns("warehouse", "target"))
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    got = subprocess.run(
        [sys.executable, "-m", "ticdc_sync.commands.cli", "plan", "--project", str(shop), *args],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout
    want = (GOLDEN / golden).read_bytes()
    assert got == want, f"plan differs from tests/golden/{golden} (to regenerate: {GOLDEN_HOWTO})"
