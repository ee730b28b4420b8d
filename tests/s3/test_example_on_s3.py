"""The example project (projects_example/shop) on its `s3` target: an `s3a://` warehouse on the
local S3 server, with keys, endpoint and region from the environment only.

One sequence, each step a real `ticdc-sync` process. First a run is killed with SIGKILL
(its process group, JVM included) while it applies, as tests/spark/test_engine_crash.py
does on a local disk. Then two runs start at once: one takes the dead run's lease over and
finishes the work, the other is refused, naming it. The tables then equal the example's
expected rows, exactly as a local run's do (tests/spark/test_example_project.py); `plan`
reads the complete staged tallies from the bucket; no output shows the secret key; and
nothing is written outside the bucket but the project's own `target/` (no folder named
after the URI scheme).
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.processes import kill_tree
from tests.s3.helpers import ROOT, job_env, run_job
from tests.spark.engine_harness import run_and_kill, start_cli

pytestmark = pytest.mark.s3

EXAMPLE = ROOT / "projects_example" / "shop"
TIMEOUT = 1200


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(
            f"ticdc-sync did not finish within {TIMEOUT}s:\n{out[-3000:]}"
        ) from None
    return proc.returncode, out


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """The folder the runs start in, holding a copy of the example project (`shop`)."""
    folder = tmp_path_factory.mktemp("work")
    shutil.copytree(EXAMPLE, folder / "shop", ignore=shutil.ignore_patterns("warehouse", "target"))
    return folder


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    """Where each run's whole output is kept: a failure's message shows only its end."""
    return tmp_path_factory.mktemp("outputs")


def _keep(outputs: Path, name: str, text: str) -> str:
    path = outputs / f"{name}.txt"
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def env(s3_server, bucket) -> dict[str, str]:
    return job_env(s3_server, SHOP_S3_BUCKET=bucket)


@pytest.fixture(scope="module")
def killed(env, work, outputs) -> dict:
    """A run killed with SIGKILL a random moment after its first target was applied, while
    the other targets are being applied (`engine_harness.run_and_kill`)."""
    run = run_and_kill(
        ["run", "--project", "shop", "--target", "s3"],
        random.Random(32).uniform(0, 2),
        started=("apply ",),
        env=env,
        cwd=work,
        timeout=TIMEOUT,
    )
    kept = _keep(outputs, "killed", run.output)
    return {"outcome": run.outcome, "pid": run.pid, "output": run.output, "kept": kept}


@pytest.fixture(scope="module")
def reruns(env, work, killed, outputs) -> list[dict]:
    """Two runs started at once after the kill."""
    run = ["run", "--project", "shop", "--target", "s3"]
    procs = [start_cli(run, env=env, cwd=work) for _ in range(2)]
    done = []
    for i, p in enumerate(procs):
        code, out = _finish(p)
        kept = _keep(outputs, f"rerun-{i}-pid-{p.pid}-exit-{code}", out)
        done.append({"pid": p.pid, "code": code, "output": out, "kept": kept})
    return done


@pytest.fixture(scope="module")
def planned(env, work, reruns) -> dict:
    p = start_cli(["plan", "--project", "shop", "--target", "s3"], env=env, cwd=work)
    code, out = _finish(p)
    return {"code": code, "output": out}


def test_a_killed_run_then_two_at_once_one_finishes_and_the_other_is_refused(killed, reruns):
    assert killed["outcome"] == "killed", killed["output"][-3000:]
    codes = sorted(r["code"] for r in reruns)
    assert codes == [0, 1], "\n\n".join(f"{r['kept']}:\n{r['output'][-3000:]}" for r in reruns)
    winner = next(r for r in reruns if r["code"] == 0)
    loser = next(r for r in reruns if r["code"] == 1)
    # The dead run's lease was taken over at once (same machine, its process gone).
    assert (
        f"took over the run lease of {_host()} pid {killed['pid']}: its process is gone"
        in (winner["output"])
    ), winner["output"][-3000:]
    assert (
        f"is in use by another `ticdc-sync run`: {_host()} pid {winner['pid']}, holding it since"
        in loser["output"]
    ), loser["output"][-3000:]
    # Refused before Spark started: no JVM output at all.
    assert "SparkContext" not in loser["output"] and "read+decode" not in loser["output"]
    assert "done: 9 target(s), 0 error(s)" in winner["output"], winner["output"][-3000:]


def test_the_tables_equal_the_expected_rows_as_on_a_local_disk(env, work, reruns, bucket):
    assert any(r["code"] == 0 for r in reruns)
    warehouse = f"s3a://{bucket}/warehouse"
    checked = run_job(env, "example", warehouse, str(work / "shop"), timeout=TIMEOUT)
    assert checked["example"]["differences"] == []


def test_plan_on_another_machine_sees_the_complete_tallies_in_the_bucket(
    planned, s3_server, bucket
):
    assert planned["code"] == 0, planned["output"][-3000:]
    assert "not counted yet" not in planned["output"], planned["output"]
    assert f"s3a://{bucket}/warehouse" in planned["output"]
    keys = s3_server.list_keys(bucket, "warehouse/_ticdc_sync/")
    assert any(k.startswith("warehouse/_ticdc_sync/events/_delta_log/") for k in keys)
    assert any(k.startswith("warehouse/_ticdc_sync/run_lease/_delta_log/") for k in keys)


def test_no_secret_in_any_output_and_nothing_outside_the_bucket(
    killed, reruns, planned, s3_server, work
):
    for text in [killed["output"], planned["output"], *(r["output"] for r in reruns)]:
        assert s3_server.secret_key not in text
    # The runs started in `work`: only the project is there, and in it only its own files
    # and `target/` (run_results.json, and Spark's log in logs/): no local warehouse, no
    # folder named like `s3a:`.
    assert sorted(p.name for p in work.iterdir()) == ["shop"]
    assert not [p for p in work.rglob("*") if ":" in p.name]
    copied = {p.name for p in EXAMPLE.iterdir()} - {"warehouse", "target"}
    assert {p.name for p in (work / "shop").iterdir()} - copied == {"target"}
    assert sorted(p.name for p in (work / "shop" / "target").iterdir()) == [
        "logs",
        "run_results.json",
    ]
    assert not (ROOT / "s3a:").exists() and not (Path.cwd() / "s3a:").exists()


def _host() -> str:
    import socket

    return socket.gethostname()
