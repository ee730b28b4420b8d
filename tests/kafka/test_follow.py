"""`ticdc-sync run --follow` as users run it: a subprocess, messages arriving, a broker restart.

The follower gets its own JVM (about half a minute to start). Messages are produced in
three pieces: before it starts, while it runs, and after the broker was stopped and
restarted on the same port and data. It must wait the outage out (a warning, a retry),
apply everything, stop on SIGTERM with exit code 0, and the targets must equal the truth
with every Kafka record staged exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.kafka.helpers import broker_module, kafka_project, produce_records
from tests.kafka.test_e2e_protocols import assert_each_record_staged_once, check_targets
from tests.processes import kill_tree
from tests.spark.engine_harness import load
from tests.spark.truth import schema_sql

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def wait_for(what: str, cond, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    """Poll `cond` until true; fail naming `what` on timeout or if the follower died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            pytest.fail(f"follower exited ({proc.returncode}) before {what}:\n{tail(log)}")
        time.sleep(1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}:\n{tail(log)}")


def tail(log: Path, n: int = 40) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(lines[-n:])


def results(root: Path) -> dict:
    try:
        return json.loads((root / "target" / "run_results.json").read_text())
    except (OSError, ValueError):
        return {}


def test_follow_applies_arriving_messages_across_a_broker_restart(spark, tmp_path):
    protocol, topic = "canal-json", "follow"
    history = generate(
        HistoryConfig(seed=5, transactions=36, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, protocol, topic)
    pieces = enc.chunks(3)
    broker = broker_module().KafkaBroker(tmp_path / "kafka", die_with_parent=True)
    proc: subprocess.Popen | None = None
    log = tmp_path / "follow.log"
    try:
        bootstrap = broker.start()
        broker.create_topic(topic, partitions=3)
        sql = "".join(schema_sql(s) for s in history.initial.values())
        root = kafka_project(
            tmp_path / "p",
            bootstrap,
            protocol=protocol,
            topic=topic,
            schema_sql=sql,
            master="local[1]",
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
            # Short client timeouts so the outage surfaces as errors within seconds.
            options={"default.api.timeout.ms": "8000", "request.timeout.ms": "4000"},
        )
        produce_records(spark, bootstrap, topic, pieces[0])
        env = {**os.environ, "TZ": "UTC", "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"}
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ticdc_sync.commands.cli",
                    "run",
                    "--follow",
                    "--project",
                    str(root),
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=root,
                start_new_session=True,
            )

        def staged_up_to(records) -> bool:
            want = {}
            for r in records:
                want[f"{r.topic}/{r.partition}"] = r.offset
            got = results(root).get("sources", {}).get("src", {}).get("partitions", {})
            return got == want

        wait_for("the first piece", lambda: staged_up_to(pieces[0]), 400, proc, log)
        produce_records(spark, bootstrap, topic, pieces[1])
        wait_for("the second piece", lambda: staged_up_to(pieces[0] + pieces[1]), 300, proc, log)

        broker.stop()
        wait_for(
            "the follower to notice the outage",
            lambda: "Kafka unavailable" in log.read_text(errors="replace"),
            300,
            proc,
            log,
        )
        assert broker.restart() == bootstrap
        produce_records(spark, bootstrap, topic, pieces[2])

        def all_applied() -> bool:
            r = results(root)
            src = r.get("sources", {}).get("src", {})
            return (
                staged_up_to(enc.records)
                and src.get("resolved_ts") == enc.resolved_ts
                and bool(r.get("targets"))
                # A target whose last change is older holds its tables as of the resolved
                # TSO without a commit at it (nothing of it is pending).
                and all(t.get("current_ts") == enc.resolved_ts for t in r["targets"].values())
            )

        wait_for("everything applied", all_applied, 400, proc, log)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"follower did not stop within 180s of SIGTERM:\n{tail(log)}")
        text = log.read_text(errors="replace")
        assert rc == 0, tail(log)
        assert "received signal 15" in text
        assert "Traceback" not in text, tail(log)
    finally:
        if proc is not None and proc.poll() is None:
            kill_tree(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        broker.close()

    project = load(root)
    check_targets(spark, project, enc.truth, enc.schemas, "follow")
    assert_each_record_staged_once(spark, project, enc.records)
