"""`ticdc-sync run` as an operator sees it: what goes to stdout, stderr and the log file,
the exit code, the artifacts (checked against their JSON Schemas), and Ctrl-C.

Each test runs the CLI in a child process with its own JVM, so there are few of them,
each with several assertions. Progress is forced to plain lines (`--progress lines`) with
an interval longer than any run, so its lines are the deterministic ones printed when a
phase begins.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.runtime.helpers import (
    CHILD_TIMEOUT_S,
    child_env,
    cli,
    open_project,
    profiles,
    run_child,
)
from tests.spark.engine_harness import canal_row, canal_watermark, make_project, write_captures
from tests.unit.test_cli import assert_valid
from ticdc_sync.commands.cli import main

pytestmark = pytest.mark.spark

SCHEMA = "".join(
    f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v INT);\n" for t in ("bad_q", "bad_f", "quiet")
)
TABLES = (
    "  - upstream: shop.bad_q\n    on_bad_message: quarantine\n"
    "  - upstream: shop.bad_f\n"
    "  - upstream: shop.quiet\n"
)
MT = {"id": "int", "v": "int"}
# Only ticdc-sync's own lines: no Spark, Ivy, log4j or JVM lines on the terminal.
SPARK_NOISE = re.compile(r"WARN|INFO|log4j|Ivy|:: |SLF4J|WARNING: |Exception|at org\.")
ENV = {"TICDC_SYNC_PROGRESS_INTERVAL": "100000"}


def bad_value_project(root: Path) -> Path:
    """Three targets: `bad_q` (a value that does not fit, quarantined), `bad_f` (the same,
    failing the target) and `quiet` (no rows at all), then a watermark."""
    make_project(root, protocol="canal-json", schema_sql=SCHEMA, tables=TABLES)
    (root / "profiles.yml").write_text(profiles())

    def row(table: str, ts: int, id_: str, v: str) -> bytes:
        return canal_row("shop", table, "INSERT", ts, {"id": id_, "v": v}, MT, ["id"])

    write_captures(
        root,
        "t",
        [
            (0, 0, None, row("bad_q", 100, "1", "7")),
            (0, 1, None, row("bad_q", 101, "2", "not a number")),
            (0, 2, None, row("bad_f", 102, "1", "xyz")),
            (0, 3, None, canal_watermark(200)),
        ],
    )
    return root


def test_failing_run_streams_log_artifacts_and_status(tmp_path, capsys):
    root = bad_value_project(tmp_path / "p")
    proc = run_child(
        cli("run", "--project", str(root), "--progress", "lines"),
        env=child_env(**ENV),
        cwd=root,
    )
    assert proc.returncode == 1
    out, err = proc.stdout.splitlines(), proc.stderr.splitlines()

    # stdout: results only.
    assert not [line for line in out if SPARK_NOISE.search(line)], out
    assert not [line for line in out if line.startswith(("error:", "warning:", "progress:"))]
    assert any(line.startswith("apply bad_q: +1 ") for line in out)
    assert out[-1].startswith("done: 3 target(s), 1 error(s)")

    # stderr: progress at each phase, the error, the log's name, and the error last.
    assert not [line for line in err if SPARK_NOISE.search(line)], err
    for phase in ("starting Spark", "stage src (", "plan", "apply (3 target(s))"):
        assert f"progress: {phase}" in "\n".join(err), phase
    error = [line for line in err if line.startswith("error: target bad_f: ")]
    assert error and "value does not fit its column: v = xyz" in error[0]
    assert err[-2:] == ["log: target/logs/ticdc-sync.log (Spark's output)", error[0]]

    # The log file has Spark's output and ticdc-sync's lines.
    log = (root / "target" / "logs" / "ticdc-sync.log").read_text()
    assert "log4j" in log and "apply bad_q: +1" in log and error[0] in log

    # Artifacts: run results (outcome, every target's applied ts), plan and status.
    results = json.loads((root / "target" / "run_results.json").read_text())
    assert_valid(results, "run_results")
    assert results["outcome"] == "blocked or failed"
    assert results["targets"]["quiet"]["applied_ts"] == 200
    assert results["targets"]["bad_q"]["quarantined"] == 1

    capsys.readouterr()
    assert main(["plan", "--project", str(root), "--format", "json"]) == 0
    assert_valid(json.loads(capsys.readouterr().out), "plan")
    assert main(["status", "--project", str(root), "--format", "json", "--quarantine"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert_valid(status, "status")
    by_name = {t["name"]: t for t in status["targets"]}
    # A target that got no rows stands at the resolved ts, as the run said.
    assert by_name["quiet"]["applied_ts"] == 200 and by_name["quiet"]["lag_tso"] == 0
    assert by_name["bad_q"]["quarantined"] == 1 and status["quarantined_total"] == 1
    [q] = status["quarantine"]
    assert (q["topic"], q["partition"], q["offset"], q["table"]) == ("t", 0, 1, "shop.bad_q")
    assert q["reason"].startswith("value does not fit its column: v = not a number")
    assert '"not a number"' in q["value_preview"]

    assert main(["status", "--project", str(root), "--quarantine", "5"]) == 0
    text = capsys.readouterr().out
    assert "quarantined records (1 of 1):" in text
    assert re.search(r"^t/0/1 +\| shop\.bad_q +\| 101 +\| value does not fit", text, re.M)


class Child:
    """A CLI child whose stderr is read line by line while it runs."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            env=child_env(**ENV),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # Its own process group, as a terminal's foreground job: Ctrl-C is sent to
            # the whole group.
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str) -> None:
        while True:
            line = self.lines.get(timeout=CHILD_TIMEOUT_S)
            assert line is not None, f"child ended before {prefix!r}: {self.err}"
            self.err.append(line)
            if line.startswith(prefix):
                return

    def ctrl_c(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self) -> tuple[int, str, list[str]]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        code = self.proc.wait(timeout=CHILD_TIMEOUT_S)
        while (line := self.lines.get(timeout=CHILD_TIMEOUT_S)) is not None:
            self.err.append(line)
        print(f"-- exit {code}\n-- stdout\n{out}\n-- stderr\n" + "\n".join(self.err))
        return code, out, self.err


def test_ctrl_c_stops_after_the_current_step(tmp_path):
    # Open Protocol: decoding runs in Python workers, which Ctrl-C must not reach.
    root = open_project(tmp_path / "p")
    child = Child(cli("run", "--project", str(root), "--progress", "lines"), root)
    child.wait_for("progress: stage src")
    child.ctrl_c()
    code, out, err = child.finish()
    assert code == 130
    assert (
        "warning: interrupted: stopping after the current step (press Ctrl-C again to stop "
        "at once)" in err
    )
    assert err[-1] == (
        "interrupted: stopped after the current step; what was committed stays (run again to go on)"
    )
    assert "Traceback" not in "\n".join(err)
    # The staging step finished and committed (two rows and a resolved event); nothing
    # was applied.
    assert "read+decode src: 3 new event(s) staged" in out
    assert "apply " not in out
    results = json.loads((root / "target" / "run_results.json").read_text())
    assert_valid(results, "run_results")
    assert results["outcome"] == "interrupted"
    assert results["sources"]["src"]["staged_events"] == 3
    assert not (root / "warehouse" / "_ticdc_sync" / "run.lock").exists()


def test_second_ctrl_c_stops_at_once_quietly(tmp_path):
    root = open_project(tmp_path / "p")
    child = Child(cli("run", "--project", str(root), "--progress", "lines"), root)
    child.wait_for("progress: stage src")
    child.ctrl_c()
    child.wait_for("warning: interrupted: stopping after the current step")
    child.ctrl_c()
    code, out, err = child.finish()
    assert code == 130
    assert err[-1] == "interrupted: stopped at once; what was committed stays (run again to go on)"
    text = "\n".join(err)
    assert "Traceback" not in text and "py4j" not in text
    assert "read+decode" not in out  # the staging step did not get to finish
    results = json.loads((root / "target" / "run_results.json").read_text())
    assert_valid(results, "run_results")
    assert results["outcome"] == "interrupted"
    assert not (root / "warehouse" / "_ticdc_sync" / "run.lock").exists()
