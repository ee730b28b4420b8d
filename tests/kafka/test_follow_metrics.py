"""`run --follow --metrics-port` against the real broker, as Prometheus sees it: the metrics
are scraped over HTTP while the run goes on, parsed with the client's own parser, and must
agree with `status --format json` (applied TSO per target, resolved TSO per source) and with
the run's results (`run_results.json`), before and after more messages arrive. On SIGTERM
the server stops with the run, and the same metrics are in the textfile (`--metrics-file`)
and pushed (`--metrics-push`, to a small HTTP server here that keeps what it is sent).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from testkit.history import HistoryConfig, encode, generate
from tests.kafka.helpers import kafka_project, produce_records
from tests.kafka.test_follow import results, tail, wait_for
from tests.processes import kill_tree
from tests.prometheus_scrape import Samples, recording_gateway, samples, value
from tests.spark.truth import schema_sql

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def scrape(url: str) -> tuple[str, Samples]:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    return text, samples(text)


def status_json(root: Path) -> dict:
    env = {**os.environ, "TZ": "UTC"}
    out = subprocess.run(
        [sys.executable, "-m", "ticdc_sync.commands.cli", "status", "--format", "json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def agree(got: Samples, body: dict, status: dict, records: int) -> None:
    """The scrape says what the run's results and `status` say."""
    for name, src in body["sources"].items():
        lb = {"source": name}
        assert value(got, "ticdc_sync_source_resolved_tso", **lb) == float(src["resolved_ts"])
        assert value(got, "ticdc_sync_source_resolved_tso", **lb) == float(
            status["sources"][name]["resolved_ts"]
        )
        assert value(got, "ticdc_sync_source_events_staged_total", **lb) == src["staged_events"]
        # A fresh topic: every record produced was read once, and counted.
        assert value(got, "ticdc_sync_source_records_total", **lb) == src["records"] == records
        assert value(got, "ticdc_sync_source_records_quarantined_total", **lb) == 0
        assert value(got, "ticdc_sync_source_unavailable_total", **lb) == 0
        assert value(got, "ticdc_sync_source_staging_lag_seconds", **lb) is not None
        assert value(got, "ticdc_sync_source_poll_duration_seconds_count", **lb) >= 1
    by_name = {t["name"]: t for t in status["targets"]}
    assert set(body["targets"]) == set(by_name) and body["targets"]
    for name, t in body["targets"].items():
        lb = {"target": name, "source": t["source"]}
        applied = value(got, "ticdc_sync_target_applied_tso", **lb)
        assert applied == float(t["applied_ts"]) == float(by_name[name]["applied_ts"]), name
        assert value(got, "ticdc_sync_target_rows_inserted_total", **lb) == t["inserted"]
        assert value(got, "ticdc_sync_target_rows_updated_total", **lb) == t["updated"]
        assert value(got, "ticdc_sync_target_rows_deleted_total", **lb) == t["deleted"]
        assert value(got, "ticdc_sync_target_apply_duration_seconds_count", **lb) == t["applies"]
        assert value(got, "ticdc_sync_target_lag_budget_seconds", **lb) == t["target_lag_seconds"]
        assert value(got, "ticdc_sync_target_pending", **lb) == 0
        assert value(got, "ticdc_sync_target_blocked", **lb) == 0
        assert value(got, "ticdc_sync_target_failing", **lb) == 0
        assert value(got, "ticdc_sync_target_apply_errors_total", **lb) == 0
        assert value(got, "ticdc_sync_target_over_lag", **lb) == 0
    assert value(got, "ticdc_sync_errors_total") == 0


def test_follow_serves_metrics_that_agree_with_status_and_results(
    spark, kafka_broker, tmp_path
) -> None:
    topic = f"metrics_{uuid.uuid4().hex[:8]}"
    history = generate(
        HistoryConfig(seed=8, transactions=24, partitions=2, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, "canal-json", topic)
    first, second = enc.chunks(2)
    bootstrap = kafka_broker.bootstrap
    kafka_broker.create_topic(topic, partitions=2)
    root = kafka_project(
        tmp_path / "p",
        bootstrap,
        protocol="canal-json",
        topic=topic,
        schema_sql="".join(schema_sql(s) for s in history.initial.values()),
        master="local[1]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    produce_records(spark, bootstrap, topic, first)

    stack = ExitStack()
    gateway = stack.enter_context(recording_gateway())
    prom = tmp_path / "textfile" / "ticdc_sync.prom"
    prom.parent.mkdir()
    log = tmp_path / "follow.log"
    env = {**os.environ, "TZ": "UTC", "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"}
    proc: subprocess.Popen | None = None
    try:
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ticdc_sync.commands.cli",
                    "run",
                    "--follow",
                    "--metrics-port",
                    "0",
                    "--metrics-file",
                    str(prom),
                    "--metrics-push",
                    f"http://127.0.0.1:{gateway.server_address[1]}",
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=root,
                start_new_session=True,
            )
        found: list[str] = []

        def announced() -> bool:
            found[:] = re.findall(r"metrics: (http://127\.0\.0\.1:\d+/metrics)", log.read_text())
            return bool(found)

        wait_for("the metrics URL", announced, 120, proc, log)
        url = found[0]
        # Served from the start (Spark may still be starting): the run and its lease.
        text, got = scrape(url)
        assert value(got, "ticdc_sync_run_lease_held") == 1
        assert (
            value(got, "ticdc_sync_run_info", mode="follow", project="test", version="0.1.0") == 1
        )
        # A registry of its own: none of the client's default process or GC metrics.
        names = {name for name, _ in got}
        assert all(n.startswith("ticdc_sync_") for n in names), names

        def settled(records) -> bool:
            r = results(root)
            src = r.get("sources", {}).get("src", {})
            want: dict[str, int] = {}
            for rec in records:
                want[f"{rec.topic}/{rec.partition}"] = rec.offset
            return (
                src.get("partitions") == want
                and bool(r.get("targets"))
                and all(
                    t.get("current_ts") == src.get("resolved_ts")
                    and t.get("oldest_pending_ts") is None
                    for t in r["targets"].values()
                )
            )

        def check(records) -> Samples:
            """Scrape between two reads of the results that agree (a poll may land between)."""
            for _ in range(20):
                before = results(root)
                status = status_json(root)
                _, got = scrape(url)
                after = results(root)
                stable = ("sources", "targets")
                if all(before.get(k) and _strip(before[k]) == _strip(after[k]) for k in stable):
                    agree(got, after, status, len(records))
                    return got
                time.sleep(1)
            pytest.fail(f"the run's results never held still:\n{tail(log)}")

        wait_for("the first piece applied", lambda: settled(first), 400, proc, log)
        early = check(first)
        assert value(early, "ticdc_sync_polls_total") >= 1
        last_poll = value(early, "ticdc_sync_last_poll_timestamp_seconds")
        assert last_poll is not None and abs(last_poll - time.time()) < 60

        produce_records(spark, bootstrap, topic, second)
        wait_for("the second piece applied", lambda: settled(first + second), 300, proc, log)
        late = check(first + second)
        lb = {"source": "src"}
        assert value(late, "ticdc_sync_source_events_staged_total", **lb) > value(
            early, "ticdc_sync_source_events_staged_total", **lb
        )
        assert value(late, "ticdc_sync_source_resolved_tso", **lb) == float(enc.resolved_ts)
        assert value(late, "ticdc_sync_polls_total") > value(early, "ticdc_sync_polls_total")

        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"follower did not stop within 180s of SIGTERM:\n{tail(log)}")
        assert rc == 0, tail(log)
        assert "Traceback" not in log.read_text(errors="replace"), tail(log)
        with pytest.raises(urllib.error.URLError):  # the server stopped with the run
            urllib.request.urlopen(url, timeout=5)

        final = results(root)
        status = status_json(root)
        [(_, path, pushed)] = gateway.got  # pushed once, at the end
        assert path == "/metrics/job/ticdc_sync/profile_target/dev/project/test"
        for text in (pushed, prom.read_text()):
            got = samples(text)
            agree(got, final, status, len(enc.records))
            assert value(got, "ticdc_sync_run_lease_held") == 0  # released before the end
            assert value(got, "ticdc_sync_polls_total") == final["polls"]
        assert sorted(os.listdir(prom.parent)) == ["ticdc_sync.prom"]  # no temp file left
    finally:
        if proc is not None and proc.poll() is None:
            kill_tree(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        stack.close()


def _strip(part: dict) -> dict:
    """The results without what changes every poll (staleness, lags, seconds)."""
    drop = {"staleness_seconds", "staging_lag_seconds", "seconds"}
    return {name: {k: v for k, v in entry.items() if k not in drop} for name, entry in part.items()}
