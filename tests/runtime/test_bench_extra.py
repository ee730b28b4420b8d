"""The benchmarks' live Kafka producer (confluent-kafka, the `bench` extra) in a Python
without that extra: `benchmarks/run.py` with a figure that needs it says so in one line
(exit 1) before it measures or starts anything, instead of a traceback from inside the
producer once a Kafka broker is up.

The child Python is this one with confluent-kafka made unimportable, as when it is not
installed (`helpers.without_modules`). A benchmark is never run here: the refusal comes first.
"""

from __future__ import annotations

import sys

import pytest

from tests.runtime.helpers import REPO, run_child, without_modules


@pytest.mark.parametrize("only", ["freshness", "decode,lagbudget,visible"])
def test_a_live_producer_figure_without_the_bench_extra_is_one_line(tmp_path, only):
    env = without_modules(tmp_path / "without-bench-extra", ("confluent_kafka",))
    probe = run_child([sys.executable, "-c", "import confluent_kafka"], env=env)
    assert probe.returncode == 1 and "No module named 'confluent_kafka'" in probe.stderr
    proc = run_child(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--quick", "--only", only], env=env
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    live = ", ".join(x for x in only.split(",") if x != "decode")
    assert proc.stderr.splitlines() == [
        f"benchmarks/run.py: {live}: the live producer needs confluent-kafka, of ticdc-sync's "
        "`bench` extra, which is not installed in this Python (hint: pip install -e "
        "'.[bench]', or leave them out of --only)"
    ]
