"""The run lease (ticdc_sync/warehouse/lease.py) on a local warehouse, with real processes.

Racers are separate Python processes (`tests/lease_child.py`) that start at one signal;
exactly one of them may hold the lease. A holder killed with SIGKILL is taken over at once
on the same machine; a paused one (SIGSTOP) only once its lease expired, and when it
resumes it finds the lease lost before its next commit. No JVM.
"""

from __future__ import annotations

import datetime as dt
import signal
import threading

import pytest

from tests import lease_child
from ticdc_sync.warehouse import lease as lease_mod
from ticdc_sync.warehouse.lease import LeaseHeld, LeaseLost, RunLease, read_lease


def _race(tmp_path, n: int, **kw):
    wh = str(tmp_path / "wh")
    procs = [lease_child.start(wh, tmp_path, **kw) for _ in range(n)]
    (tmp_path / "go").touch()
    return wh, procs, [lease_child.result(p)[0] for p in procs]


def _finish(procs, tmp_path) -> list[int]:
    (tmp_path / "release").touch()
    return [p.wait(timeout=60) for p in procs]


def test_racing_processes_exactly_one_wins_and_the_others_name_it(tmp_path):
    wh, procs, results = _race(tmp_path, 4)
    try:
        won = [r for r in results if r.startswith("WON ")]
        assert len(won) == 1, results
        holder = won[0].removeprefix("WON ")
        for r in results:
            if r is not won[0]:
                assert r.startswith("REFUSED "), results
                assert f"is in use by another `ticdc-sync run`: {holder}, holding it since" in r
                assert "hint: wait for that run to finish, or use `run --wait SECONDS`" in r
    finally:
        codes = _finish(procs, tmp_path)
    assert sorted(codes) == [0, 1, 1, 1]
    # Released: the next run takes it at once, and nothing was written outside the warehouse.
    with RunLease(wh, out=lambda s: None):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go", "release", "wh"]


def test_a_released_lease_is_taken_at_once_and_the_table_records_each_holder(tmp_path):
    wh = str(tmp_path / "wh")
    first = RunLease(wh, out=lambda s: None)
    with first:
        table, row = first.read()
        assert row is not None and row.state == "held" and row.token == first.token
        with pytest.raises(LeaseHeld, match=f"in use by another `ticdc-sync run`: {first.holder}"):
            RunLease(wh, out=lambda s: None).acquire()
        first.check()
    _, row = first.read()
    assert row is not None and row.state == "released" and row.token == first.token
    with pytest.raises(LeaseLost, match="does not hold the run lease"):
        first.check()
    second = RunLease(wh, out=lambda s: None)
    with second:
        _, row = second.read()
        assert row is not None and row.token == second.token and row.state == "held"
    history = [h.get("userMetadata") for h in table.history()]
    assert history.count("acquire") == 2 and history.count("release") == 2, history


def test_a_killed_holder_on_this_machine_is_taken_over_at_once(tmp_path):
    wh, procs, results = _race(tmp_path, 1)
    assert results[0].startswith("WON "), results
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(timeout=60)
    lines: list[str] = []
    # ttl and wait are left at their defaults: the dead holder's lease has not expired.
    with RunLease(wh, out=lines.append) as lease:
        lease.check()
    dead = results[0].removeprefix("WON ")
    assert lines == [f"took over the run lease of {dead}: its process is gone"]


def test_a_paused_holder_loses_its_lease_once_expired_and_stops_before_committing(tmp_path):
    wh, procs, results = _race(tmp_path, 1, ttl=4.0)
    holder = procs[0]
    assert results[0].startswith("WON "), results
    holder.send_signal(signal.SIGSTOP)
    try:
        lines: list[str] = []
        # Alive but silent: not taken while its lease runs, taken once it has expired. On
        # a host busy enough that the lease expired before this attempt, the attempt may
        # take it: only a lease still running must refuse.
        running = read_lease(wh)
        assert running is not None
        try:
            RunLease(wh, out=lines.append).acquire()
        except LeaseHeld:
            pass
        else:
            assert dt.datetime.now(dt.timezone.utc) >= running.expires_at, lines
            pytest.skip("the host was too slow to try the lease while it ran (it expired)")
        taker = RunLease(wh, wait=120, out=lines.append)
        with taker:
            assert lines[0].startswith("waiting for the run lease: held by "), lines
            assert lines[-1].startswith("took over the run lease of "), lines
            assert "its lease expired at" in lines[-1]
            holder.send_signal(signal.SIGCONT)
            outcome, _ = lease_child.result(holder)
            assert holder.wait(timeout=60) == 3, outcome
            taker.check()
    finally:
        holder.send_signal(signal.SIGCONT)
        _finish([holder], tmp_path)
    assert outcome.startswith("LOST this run lost the run lease of warehouse"), outcome
    assert "it stopped before its next commit" in outcome


def test_waiting_takes_the_lease_when_its_holder_releases_it(tmp_path):
    wh, procs, results = _race(tmp_path, 1)
    assert results[0].startswith("WON "), results
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if line.startswith("waiting for the run lease"):
            threading.Thread(target=(tmp_path / "release").touch).start()

    with RunLease(wh, wait=120, out=out) as lease:
        lease.check()
    assert procs[0].wait(timeout=60) == 0
    assert len(lines) == 1, lines


def test_check_active_guards_only_while_a_run_holds_a_lease(tmp_path):
    lease_mod.check_active()  # no run: nothing to check
    lease = RunLease(str(tmp_path / "wh"), out=lambda s: None)
    assert not lease.held()  # what a run's metrics report: not taken yet
    with lease:
        lease_mod.check_active()
        assert lease.held()
        # Another run committed to the lease (as a taker would after expiry).
        table, row = lease.read()
        other = RunLease(str(tmp_path / "wh"), out=lambda s: None)
        assert other._commit(table, other._row(row.renewed_at, acquired=row.renewed_at), "x")
        with pytest.raises(LeaseLost, match=f"now held by {other.holder}"):
            lease.renew()
        assert not lease.held()
        with pytest.raises(LeaseLost, match="it stopped before its next commit"):
            lease_mod.check_active()
    lease_mod.check_active()
    _, row = lease.read()
    assert row is not None and row.token == other.token  # the lost lease was not released


def test_status_says_who_holds_the_lease(tmp_path, capsys):
    from tests.unit.test_project import copy_shop
    from ticdc_sync.commands import cli
    from ticdc_sync.project import load_project
    from ticdc_sync.warehouse.locations import warehouse_path

    root = copy_shop(tmp_path)
    wh = warehouse_path(load_project(root))
    assert cli.main(["status", "--project", str(root)]) == 0
    assert capsys.readouterr().out.endswith("run lease: no run has taken it yet\n")
    with RunLease(wh, out=lambda s: None) as lease:
        assert cli.main(["status", "--project", str(root)]) == 0
        assert f"run lease: held by {lease.holder}, holding it since" in capsys.readouterr().out
    assert cli.main(["status", "--project", str(root), "--format", "json"]) == 0
    assert '"state": "released"' in capsys.readouterr().out
