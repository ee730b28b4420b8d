"""Without ../shared (a clone of the repository alone) the suite skips exactly the tests
that need it, with one reason, and runs the rest.

Runs pytest in a child process with TICDC_SYNC_SHARED pointing at a missing folder, over
every unit test and the Spark tests marked `needs_shared` (they skip before the Spark
session is built, so no JVM starts).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROMTOOL_TEST = "test_promtool_checks_the_rules_and_their_unit_tests_pass"


def test_tests_needing_shared_skip_with_one_reason_when_it_is_absent(tmp_path):
    absent = tmp_path / "no-shared"
    env = {**os.environ, "TICDC_SYNC_SHARED": str(absent)}
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
            "tests/unit", "tests/spark", "-m", "not spark or needs_shared",
            "--deselect", f"tests/unit/{Path(__file__).name}",
            # Skipped where Prometheus's promtool is not installed, for its own reason.
            "--deselect", f"tests/unit/test_monitoring.py::{PROMTOOL_TEST}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:]
    reasons = re.findall(r"^SKIPPED \[(\d+)\] ([^:]+)(?::\d+)?: (.*)$", out, re.M)
    want = (
        f"needs ../shared (third-party TiCDC corpus), absent at {absent}: "
        "set TICDC_SYNC_SHARED or place shared/ beside the repo"
    )
    assert {r for _, _, r in reasons} == {want}, out[-5000:]
    # The unit and Spark tests that read the corpus or the protocol docs.
    assert sorted({f for _, f, _ in reasons}) == [
        "tests/spark/test_codec_values.py",
        "tests/spark/test_ddl_engine_corpus.py",
        "tests/spark/test_decode_conformance.py",
        "tests/unit/test_ddl_corpus.py",
        "tests/unit/test_ddl_debezium.py",
        "tests/unit/test_ddl_schema_sql.py",
        "tests/unit/test_ddl_statements.py",
        "tests/unit/test_workload_encode.py",
    ], out[-5000:]
    assert re.search(r"\d+ passed", out)
