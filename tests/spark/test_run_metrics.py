"""A plain `run`'s metrics, as cron runs it: written once at its end for node exporter's
textfile collector (`--metrics-file`) and pushed to a Pushgateway (`--metrics-push`, here a
small HTTP server on 127.0.0.1 that keeps what it is sent), saying what run_results.json
says. A run refused the lease, or whose metrics port is taken, writes and pushes nothing.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.prometheus_scrape import recording_gateway, samples
from tests.spark.engine_harness import load, make_project, write_captures
from tests.spark.test_lag_budget import history, now_ts
from ticdc_sync.core.errors import UserError
from ticdc_sync.run.metrics_export import metrics_options
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.lease import LeaseHeld, RunLease
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = pytest.mark.spark


@pytest.fixture
def gateway():
    with recording_gateway() as server:
        yield server


def test_a_plain_run_writes_and_pushes_its_metrics_once_at_its_end(spark, tmp_path, gateway):
    root = make_project(tmp_path / "p", protocol="canal-json")
    write_captures(root, "t", [(0, i, None, m) for i, m in enumerate(history(now_ts()))])
    project = load(root)
    prom = tmp_path / "ticdc_sync.prom"
    url = f"http://127.0.0.1:{gateway.server_address[1]}"
    opts = metrics_options(port=None, address=None, file=str(prom), push=url)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append, metrics=opts) == 0, lines
    results = json.loads((root / "target" / "run_results.json").read_text())

    [(_, path, pushed)] = gateway.got
    assert path == "/metrics/job/ticdc_sync/profile_target/dev/project/test"
    got = samples(prom.read_text())
    assert samples(pushed) == got

    def v(name: str, **labels: str):
        return got.get((name, tuple(sorted(labels.items()))))

    assert v("ticdc_sync_run_info", mode="once", project="test", version="0.1.0") == 1
    assert v("ticdc_sync_polls_total") == 1 and v("ticdc_sync_errors_total") == 0
    assert v("ticdc_sync_run_lease_held") == 0  # released before the file was written
    src = results["sources"]["src"]
    assert v("ticdc_sync_source_resolved_tso", source="src") == float(src["resolved_ts"])
    assert v("ticdc_sync_source_events_staged_total", source="src") == src["staged_events"] > 0
    # Capture files: records are not counted, so there is no sample rather than a 0.
    assert "records" not in src and v("ticdc_sync_source_records_total", source="src") is None
    assert v("ticdc_sync_source_poll_duration_seconds_count", source="src") == 1
    assert set(results["targets"]) == {"fast", "slow"}
    for name, t in results["targets"].items():
        lb = {"target": name, "source": "src"}
        assert v("ticdc_sync_target_applied_tso", **lb) == float(t["applied_ts"])
        assert v("ticdc_sync_target_rows_inserted_total", **lb) == t["inserted"] > 0
        assert v("ticdc_sync_target_rows_updated_total", **lb) == t["updated"]
        assert v("ticdc_sync_target_ddl_applied_total", **lb) == len(t["ddl"])
        assert v("ticdc_sync_target_apply_duration_seconds_count", **lb) == t["applies"]
        assert v("ticdc_sync_target_pending", **lb) == 0
        assert v("ticdc_sync_target_blocked", **lb) == 0
    # `slow` dropped a column upstream: its DROP COLUMN counted with its CREATE.
    assert v("ticdc_sync_target_ddl_applied_total", target="slow", source="src") >= 1

    # A run refused the lease (another run holds it) leaves the file and the group alone.
    before = prom.read_bytes()
    with RunLease(warehouse_path(project)), pytest.raises(LeaseHeld):
        runner.run(project, spark=spark, out=lines.append, metrics=opts)
    assert prom.read_bytes() == before and len(gateway.got) == 1

    # So does a run whose metrics port is taken: it stops before it does anything.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = metrics_options(port=port, address=None, file=str(prom), push=url)
        with pytest.raises(UserError, match=f"--metrics-port {port}: cannot serve metrics"):
            runner.run(project, spark=spark, out=lines.append, metrics=busy)
    assert prom.read_bytes() == before and len(gateway.got) == 1
