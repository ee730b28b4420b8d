"""`ticdc-sync` as a Spark Connect client, as users run it: the example end to end, a Kafka
`run --follow`, and clients killed with SIGKILL at random moments.

The CLI runs are processes of their own whose profile names the server (`spark.remote`);
they start no JVM. Results are read through a client session of the same server
(`remote`). A killed client's operations live on in the server and may still commit: the
next run takes the lease over, stops them (`remote.stop_orphans`) and must still be exact.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from testkit.history import HistoryConfig, encode, generate
from tests.example_tables import differences
from tests.kafka.helpers import broker_module, kafka_project, produce_records
from tests.kafka.test_e2e_protocols import assert_each_record_staged_once, check_targets
from tests.processes import kill_tree
from tests.spark.engine_harness import (
    KillPoints,
    kill_at,
    load,
    make_project,
    read_target,
    start_cli,
    write_captures,
)
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.commands import cli
from ticdc_sync.spark.capture import capture
from ticdc_sync.warehouse.locations import target_location, warehouse_path

pytestmark = [pytest.mark.connect, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "projects_example" / "shop"


def _remote_profile(root: Path, remote: str) -> None:
    """The project's profile (tests/spark/engine_harness.py's) with the server as its Spark."""
    path = root / "profiles.yml"
    data = yaml.safe_load(path.read_text())
    for out in data["test"]["outputs"].values():
        out["spark"] = {"remote": remote}
    path.write_text(yaml.safe_dump(data, sort_keys=True))


def test_example_end_to_end_over_connect(remote, connect_server, tmp_path, capsys, monkeypatch):
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("warehouse", "target"))
    monkeypatch.setenv("SPARK_REMOTE", connect_server.remote)
    target = ["--project", str(root), "--target", "connect"]
    assert cli.main(["validate", *target]) == 0
    assert cli.main(["run", *target]) == 0
    run_out = capsys.readouterr().out
    for source in ("canal", "debezium", "open"):
        assert f"  {source}: sync point at TSO " in run_out, run_out
    project = load(root)
    assert differences(remote, project) == []
    history = remote.read.format("delta").load(
        target_location(warehouse_path(project), "open_orders")
    )
    assert history.where("_valid_to IS NOT NULL").count() > 0
    # The server's Delta wrote the commits (its engineInfo), not a local one.
    info = json.loads(
        (Path(target_location(warehouse_path(project), "canal_orders")) / "_delta_log")
        .joinpath("00000000000000000000.json")
        .read_text()
        .splitlines()[0]
    )["commitInfo"]
    assert "Delta-Lake/4.4" in info["engineInfo"], info
    # A second run finds nothing new; `plan` says what the server needs, and --explain
    # shows the plans the server makes.
    assert cli.main(["run", *target]) == 0
    capsys.readouterr()
    assert cli.main(["plan", *target, "--explain"]) == 0
    explained = capsys.readouterr().out
    assert f"spark remote: {connect_server.remote}" in explained
    assert "Spark 4.2 with Delta Lake 4.4" in explained
    assert "== collapse (MERGE source): target debezium_orders ==" in explained
    assert "MERGE INTO" in explained


def test_follow_over_connect(remote, connect_server, tmp_path):
    """`run --follow` reading Kafka (offsets and topics through the Python Kafka client,
    records through the server's Kafka source): messages before it starts and while it
    runs, SIGTERM, exact targets, every record staged once; then `capture` of the topic."""
    protocol, topic = "canal-json", "follow"
    history = generate(
        HistoryConfig(seed=7, transactions=30, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, protocol, topic)
    broker = broker_module().KafkaBroker(tmp_path / "kafka", die_with_parent=True)
    try:
        bootstrap = broker.start()
        broker.create_topic(topic, partitions=3)
        root = kafka_project(
            tmp_path / "p",
            bootstrap,
            protocol=protocol,
            topic=topic,
            schema_sql="".join(schema_sql(s) for s in history.initial.values()),
            # Java client properties the Python client does not know: left out for it.
            options={"default.api.timeout.ms": "20000", "request.timeout.ms": "10000"},
        )
        _remote_profile(root, connect_server.remote)
        _follow(remote, root, bootstrap, topic, enc, tmp_path / "follow.log")
        project = load(root)
        check_targets(remote, project, enc.truth, enc.schemas, "follow over connect")
        assert_each_record_staged_once(remote, project, enc.records)
        # `capture` of the same topic through the server: every record.
        assert capture(project, out=lambda _s: None, spark=remote) == 0
        captured = {
            (int(line["partition"]), int(line["offset"]))
            for f in sorted((root / "captures" / topic).glob("part-*.jsonl"))
            for line in map(json.loads, f.read_text().splitlines())
        }
        assert captured == {(r.partition, r.offset) for r in enc.records}
    finally:
        broker.close()


def _follow(remote, root: Path, bootstrap: str, topic: str, enc, log: Path) -> None:
    """`run --follow` over the first half of the records, the rest produced while it runs,
    until everything is applied; then SIGTERM, which it must end with 0."""
    pieces = enc.chunks(2)
    produce_records(remote, bootstrap, topic, pieces[0])
    proc: subprocess.Popen | None = None
    try:
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ticdc_sync.commands.cli", "run", "--follow"]
                + ["--project", str(root)],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "TZ": "UTC", "PYTHONUNBUFFERED": "1"},
                cwd=root,
                start_new_session=True,
            )

        def staged_up_to(records) -> bool:
            want = {f"{r.topic}/{r.partition}": r.offset for r in records}
            got = _results(root).get("sources", {}).get("src", {}).get("partitions", {})
            return got == want

        _wait("the first piece", lambda: staged_up_to(pieces[0]), 400, proc, log)
        produce_records(remote, bootstrap, topic, pieces[1])

        def all_applied() -> bool:
            r = _results(root)
            src = r.get("sources", {}).get("src", {})
            return (
                staged_up_to(enc.records)
                and src.get("resolved_ts") == enc.resolved_ts
                and bool(r.get("targets"))
                and all(t.get("current_ts") == enc.resolved_ts for t in r["targets"].values())
            )

        _wait("everything applied", all_applied, 400, proc, log)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=180)
        text = log.read_text(errors="replace")
        assert rc == 0, text[-3000:]
        assert "Traceback" not in text, text[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            kill_tree(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_sigkill_of_the_client_at_random_moments_then_resume_equals_truth(
    remote, connect_server, tmp_path
):
    """The client killed mid-run (its operations go on in the server, and may commit), run
    again and killed again, then a clean run: the tables equal the truth."""
    history = generate(
        HistoryConfig(seed=13, transactions=40, partitions=3, dispatch="index-value", ddl_count=1)
    )
    enc = encode(history, "canal-json", "cdc")
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        topic="cdc",
        schema_sql="".join(schema_sql(s) for s in history.initial.values()),
        tables='  - upstream: "app.*"\n    name: "{table}"\n',
    )
    _remote_profile(root, connect_server.remote)
    points = KillPoints(random.Random(2026), spread=6.0)
    outcomes = []
    for chunk in enc.chunks(2):
        write_captures(root, "cdc", [(r.partition, r.offset, r.key, r.value) for r in chunk])
        killed = kill_at(["run", "--project", str(root)], points.next())
        outcomes.append(killed)
    assert any(o.outcome == "killed" for o in outcomes), [str(o) for o in outcomes]
    proc = start_cli(["run", "--project", str(root)])
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    last = outcomes[-1]
    if last.outcome == "killed" and "done:" not in last.output:
        # The clean run took the lease over from the killed client and stopped what it
        # left running on the server (if anything still ran). (A client killed after its
        # `done:` line may have released its lease already, on its way out: nothing to
        # take over then.)
        assert "took over the run lease" in out, (out, last.output)
    project = load(root)
    for qualified, truth in enc.truth.items():
        schema = enc.schemas[qualified]
        rows = read_target(remote, project, schema.table, ",".join(schema.handle_key()))
        what = f"after kills {[str(o) for o in outcomes]}: {qualified}"
        assert_table_equals(rows, truth, schema, what)


def _results(root: Path) -> dict:
    try:
        return json.loads((root / "target" / "run_results.json").read_text())
    except (OSError, ValueError):
        return {}


def _wait(what: str, cond, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            pytest.fail(f"follower exited ({proc.returncode}) before {what}:\n{_tail(log)}")
        time.sleep(1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}:\n{_tail(log)}")


def _tail(log: Path, n: int = 40) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(lines[-n:])
