"""A run's Prometheus metrics (`run.metrics`, `run.metrics_export`): mapped from what the run
loop reports (a real loop over the in-memory engine), read back with the client's own parser;
served over HTTP by the client's server and stopped; written for node exporter's textfile
collector (atomically); pushed to a Pushgateway (a small HTTP server on 127.0.0.1 that keeps
what it was sent); the options' errors."""

from __future__ import annotations

import os
import socket
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.prometheus_scrape import recording_gateway, samples, value
from tests.unit.loop_fakes import T0, Clock, Fake, Inline, Spec, Threads, source, ts
from ticdc_sync.core.errors import UserError
from ticdc_sync.run.loop import LoopResult, Settings, run_loop
from ticdc_sync.run.metrics import APPLY_BUCKETS, RunMetrics
from ticdc_sync.run.metrics_export import (
    MetricsOptions,
    MetricsServer,
    export,
    metrics_options,
    push,
    write_file,
)


def _loop_run(metrics: RunMetrics, clock: Clock) -> LoopResult:
    """A --follow loop of 4 polls: `ok` applied on each (one apply fails first), `stuck`
    blocked at a DDL, `late` past its lag and never applied (its applies fail)."""
    fake = Fake(
        [
            Spec("ok", lag_ms=0),
            Spec("stuck", lag_ms=0, block_at=T0 + 1_500),
            Spec("late", lag_ms=500),
        ],
        {
            "s": [
                (T0 + 1_000 * k, {"ok": [T0 + 1_000 * k - 1], "late": [T0 + 10]})
                for k in range(1, 5)
            ]
        },
        clock,
    )
    first = [True]

    def flaky(job, should_stop):
        if first[0]:
            first[0] = False
            raise RuntimeError("disk on fire")
        return None

    fake.hooks["ok"] = flaky
    fake.hooks["late"] = lambda job, stop: (_ for _ in ()).throw(RuntimeError("no space"))
    return run_loop(
        fake,
        fake.replan,
        Settings(sources=[source("s")], workers=1, follow=True, poll_seconds=1.0, max_polls=4),
        out=lambda _line: None,
        on_poll=metrics.polled,
        on_stage=metrics.staged,
        on_apply=metrics.applied,
        clock=clock,
        waiter=clock,
        pool=Inline(),
        stager=Threads(1, fake),
    )


def test_every_metric_is_what_the_loop_reports() -> None:
    clock = Clock(T0 + 2_000)
    held = [True]
    m = RunMetrics("proj", follow=True, lease_held=lambda: held[0], clock=clock)
    res = _loop_run(m, clock)
    got = samples(generate_latest(m.registry).decode())
    body = res.as_results()

    src = body["sources"]["s"]
    assert value(got, "ticdc_sync_source_resolved_tso", source="s") == float(src["resolved_ts"])
    assert value(got, "ticdc_sync_source_resolved_timestamp_seconds", source="s") == (
        (src["resolved_ts"] >> 18) / 1000
    )
    assert (
        value(got, "ticdc_sync_source_staging_lag_seconds", source="s")
        == (src["staging_lag_seconds"])
    )
    assert value(got, "ticdc_sync_source_events_staged_total", source="s") == src["staged_events"]
    assert value(got, "ticdc_sync_source_records_quarantined_total", source="s") == 0
    # The in-memory engine does not count Kafka records: no sample, not a 0.
    assert value(got, "ticdc_sync_source_records_total", source="s") is None
    # One stage per poll, each observed.
    assert value(got, "ticdc_sync_source_poll_duration_seconds_count", source="s") == 4

    assert set(body["targets"]) == {"ok", "stuck", "late"}
    for name, t in body["targets"].items():
        lb = {"target": name, "source": "s"}
        applied = value(got, "ticdc_sync_target_applied_tso", **lb)
        assert applied == (float(t["applied_ts"]) if t["applied_ts"] >= 0 else None), name
        assert value(got, "ticdc_sync_target_staleness_seconds", **lb) == t["staleness_seconds"]
        assert value(got, "ticdc_sync_target_lag_budget_seconds", **lb) == t["target_lag_seconds"]
        assert value(got, "ticdc_sync_target_over_lag", **lb) == int(t["over_lag"])
        assert value(got, "ticdc_sync_target_pending", **lb) == int(
            t["oldest_pending_ts"] is not None
        )
        assert value(got, "ticdc_sync_target_pending_ddl", **lb) == t["pending_ddl"]
        assert value(got, "ticdc_sync_target_rows_inserted_total", **lb) == t["inserted"]
        assert value(got, "ticdc_sync_target_rows_updated_total", **lb) == t["updated"]
        assert value(got, "ticdc_sync_target_rows_deleted_total", **lb) == t["deleted"]
        assert value(got, "ticdc_sync_target_ddl_applied_total", **lb) == len(t["ddl"])
        assert value(got, "ticdc_sync_target_apply_errors_total", **lb) == t["failures"]
        assert value(got, "ticdc_sync_target_failing", **lb) == int(t["error"] is not None)
        assert value(got, "ticdc_sync_target_blocked", **lb) == int(t["blocked"] is not None)
        # The histogram's count is the target's applies; +Inf holds them all.
        assert value(got, "ticdc_sync_target_apply_duration_seconds_count", **lb) == t["applies"]
        assert (
            value(got, "ticdc_sync_target_apply_duration_seconds_bucket", le="+Inf", **lb)
            == (t["applies"])
        )

    ok = {"target": "ok", "source": "s"}
    assert value(got, "ticdc_sync_target_applied_tso", **ok) == float(ts(T0 + 3_999))
    assert value(got, "ticdc_sync_target_apply_errors_total", **ok) == 1
    assert value(got, "ticdc_sync_target_failing", **ok) == 0  # it succeeded since
    assert value(got, "ticdc_sync_target_rows_inserted_total", **ok) == 4
    stuck = {"target": "stuck", "source": "s"}
    assert value(got, "ticdc_sync_target_blocked", **stuck) == 1
    assert value(got, "ticdc_sync_target_pending_ddl", **stuck) == 1
    late = {"target": "late", "source": "s"}
    assert value(got, "ticdc_sync_target_failing", **late) == 1
    assert value(got, "ticdc_sync_target_over_lag", **late) == 1
    assert value(got, "ticdc_sync_target_oldest_pending_timestamp_seconds", **late) == (
        (T0 + 10) / 1000
    )

    assert value(got, "ticdc_sync_polls_total") == 4 == res.polls
    assert value(got, "ticdc_sync_errors_total") == len(res.errors) == 3
    assert value(got, "ticdc_sync_last_poll_timestamp_seconds") == clock.t
    assert value(got, "ticdc_sync_run_lease_held") == 1
    assert value(got, "ticdc_sync_run_info", mode="follow", project="proj", version="0.1.0") == 1
    held[0] = False  # read at each scrape
    assert value(samples(generate_latest(m.registry).decode()), "ticdc_sync_run_lease_held") == 0


def test_each_apply_is_observed_with_its_own_duration() -> None:
    from ticdc_sync.core.window import Marker
    from ticdc_sync.run.engine import ApplyOutcome
    from ticdc_sync.run.results import TargetRun
    from ticdc_sync.warehouse.state import TargetState

    m = RunMetrics("p", follow=False)
    res = LoopResult(targets={"t": TargetRun("t", "s", ["app.t"], 60.0, applied_ts=ts(T0))})
    st = TargetState("t", exists=True, marker=Marker(ts(T0)))
    for seconds in (0.3, 4.0, 4.5, 2000.0):
        res.targets["t"].applies += 1
        m.applied(ApplyOutcome("t", st, reached=ts(T0), seconds=seconds), res)
    got = samples(generate_latest(m.registry).decode())
    lb = {"target": "t", "source": "s"}
    assert value(got, "ticdc_sync_target_apply_duration_seconds_sum", **lb) == 2008.8
    buckets = {
        le: value(got, "ticdc_sync_target_apply_duration_seconds_bucket", le=le, **lb)
        for le in ("0.5", "5.0", "1800.0", "+Inf")
    }
    assert buckets == {"0.5": 1, "5.0": 3, "1800.0": 3, "+Inf": 4}
    assert APPLY_BUCKETS[-1] == 1800
    # Mapped from the results at the apply: no poll needed.
    assert value(got, "ticdc_sync_target_applied_tso", **lb) == float(ts(T0))
    # No poll yet: no timestamp of one; no lease to tell of.
    assert value(got, "ticdc_sync_last_poll_timestamp_seconds") is None
    assert value(got, "ticdc_sync_run_lease_held") is None


def test_names_are_every_family_with_its_sample_suffixes() -> None:
    m = RunMetrics("p", follow=True)
    names = m.names()
    assert all(n.startswith("ticdc_sync_") for n in names)
    assert "ticdc_sync_target_apply_duration_seconds_bucket" in names
    assert "ticdc_sync_source_events_staged_total" in names
    assert "ticdc_sync_run_info" in names and "ticdc_sync_run_lease_held" in names
    # Every name a scrape shows (once samples exist) is among them.
    clock = Clock(T0 + 2_000)
    _loop_run(m, clock)
    shown = {name for name, _ in samples(generate_latest(m.registry).decode())}
    assert shown - set(names) == {
        "ticdc_sync_source_poll_duration_seconds_created",
        "ticdc_sync_target_apply_duration_seconds_created",
    }


# --------------------------------------------------------------------------- the HTTP server


def test_the_server_serves_the_registry_and_stops_with_its_thread() -> None:
    m = RunMetrics("p", follow=True, lease_held=lambda: True)
    before = {t.ident for t in threading.enumerate()}
    server = MetricsServer(m.registry, MetricsOptions(port=0))
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        threads = [t for t in threading.enumerate() if t.ident not in before]
        assert threads and all(t.daemon for t in threads)
        with urllib.request.urlopen(server.url, timeout=10) as r:
            text = r.read().decode()
        assert value(samples(text), "ticdc_sync_run_lease_held") == 1
    finally:
        server.stop()
    assert not any(t.is_alive() for t in threads)
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        opts = metrics_options(port=None, address=None, file=None, push=None, profile_port=port)
        with pytest.raises(UserError, match=rf"run.metrics_port \(profiles.yml\) {port}: cannot"):
            MetricsServer(RunMetrics("p", follow=True).registry, opts)


# --------------------------------------------------------------------------- the textfile


def test_the_textfile_is_replaced_at_once_and_nothing_is_left_beside_it(tmp_path: Path) -> None:
    m = RunMetrics("p", follow=False, clock=lambda: 1234.5)
    path = tmp_path / "ticdc_sync.prom"
    path.write_text("old\n")
    old_inode = path.stat().st_ino
    m.polled(None, LoopResult(polls=1))  # type: ignore[arg-type]
    write_file(m.registry, path)
    # A rename over it, not a write into it: a reader sees the old file or the new one.
    assert path.stat().st_ino != old_inode
    assert os.listdir(tmp_path) == ["ticdc_sync.prom"]
    got = samples(path.read_text())
    assert value(got, "ticdc_sync_polls_total") == 1
    assert value(got, "ticdc_sync_last_poll_timestamp_seconds") == 1234.5
    assert value(got, "ticdc_sync_run_info", mode="once", project="p", version="0.1.0") == 1


def test_a_file_that_cannot_be_written_is_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    opts = metrics_options(port=None, address=None, file=str(folder / "x.prom"), push=None)
    folder.rmdir()
    warned: list[str] = []
    export(RunMetrics("p", follow=False).registry, opts, {}, warned.append)
    assert len(warned) == 1 and warned[0].startswith(f"warning: --metrics-file {folder}/x.prom")


# --------------------------------------------------------------------------- the push


@pytest.fixture
def gateway():
    with recording_gateway() as server:
        yield server


def test_the_push_puts_the_metrics_under_the_job_and_group(gateway) -> None:
    m = RunMetrics("p", follow=False)
    m.polled(None, LoopResult(polls=1))  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{gateway.server_address[1]}"
    push(m.registry, url, {"project": "p", "profile_target": "dev"})
    [(method, path, body)] = gateway.got
    assert (method, path) == ("PUT", "/metrics/job/ticdc_sync/profile_target/dev/project/p")
    assert body == generate_latest(m.registry).decode()
    assert value(samples(body), "ticdc_sync_polls_total") == 1


def test_a_push_that_fails_is_a_warning() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = metrics_options(port=None, address=None, file=None, push=f"http://127.0.0.1:{port}")
    warned: list[str] = []
    export(RunMetrics("p", follow=False).registry, opts, {"project": "p"}, warned.append)
    assert len(warned) == 1
    assert warned[0].startswith(f"warning: --metrics-push http://127.0.0.1:{port}: not pushed (")


# --------------------------------------------------------------------------- options


def test_flags_win_over_the_profile_and_bad_options_are_clear_errors(tmp_path: Path) -> None:
    def opts(**kw):
        base = dict(port=None, address=None, file=None, push=None)
        return metrics_options(**{**base, **kw})

    assert not opts().wanted
    o = opts(profile_port=9400, profile_address="0.0.0.0")
    assert (o.port, o.address, o.wanted) == (9400, "0.0.0.0", True)
    o = opts(port=9500, address="::1", profile_port=9400, profile_address="0.0.0.0")
    assert (o.port, o.address, o.port_from) == (9500, "::1", "--metrics-port")
    assert opts().address == "127.0.0.1"
    with pytest.raises(UserError, match="--metrics-port 70000: not a TCP port"):
        opts(port=70000)
    with pytest.raises(UserError, match="--metrics-address 'a b': not an address"):
        opts(port=1, address="a b")
    with pytest.raises(UserError, match="only files ending in .prom"):
        opts(file=str(tmp_path / "m.txt"))
    with pytest.raises(UserError, match=r"folder .*nope does not exist"):
        opts(file=str(tmp_path / "nope" / "m.prom"))
    with pytest.raises(UserError, match="not a Pushgateway URL"):
        opts(push="ftp://gw:21")
    assert opts(push="gw:9091").push == "gw:9091"
