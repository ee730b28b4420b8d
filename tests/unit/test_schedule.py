"""The scheduling decisions: deadlines, workers, renames, blocked and failing targets,
pending ranges, staleness, and the default number of apply workers. No clock: "now" is
passed in."""

from __future__ import annotations

import random

import pytest

from ticdc_sync.plan.workers import apply_workers
from ticdc_sync.run.schedule import (
    MAX_BACKOFF_MS,
    MAX_SPANS,
    Candidate,
    Need,
    Scheduler,
    Spans,
    over_lag,
    staging_lag_ms,
    staleness_ms,
    wall_ms,
)

T0 = 1_700_000_000_000  # a wall time, ms


def ts(ms: int) -> int:
    """The TSO of wall time `ms` (logical part 0; codec facts 1.1)."""
    return ms << 18


def names(dispatches) -> list[str]:
    return [d.name for d in dispatches]


def test_wall_time_is_the_physical_part() -> None:
    assert wall_ms(ts(T0) + 5) == T0
    assert wall_ms(-1) == 0


# --------------------------------------------------------------------------- workers


@pytest.mark.parametrize(
    ("setting", "master", "cpus", "want"),
    [
        (None, "local[2]", 8, 2),
        (None, "local[8]", 2, 4),
        (None, "local[*]", 2, 2),
        (None, "local[*]", 16, 4),
        (None, "local[*]", None, 1),
        (None, "local", 8, 1),
        (None, "local[3,2]", 8, 3),
        (None, "local[*, 4]", 3, 3),
        (None, "local-cluster[2,1,1024]", 8, 2),
        (None, "spark://h:7077", 2, 4),
        (None, "yarn", 2, 4),
        (None, "k8s://https://k:443", 2, 4),
        (7, "local[2]", 2, 7),
        (1, "spark://h:7077", 2, 1),
    ],
)
def test_apply_workers_default_from_the_master(setting, master, cpus, want) -> None:
    n, why = apply_workers(setting, master, cpus)
    assert n == want
    assert why


def test_apply_workers_say_why() -> None:
    assert apply_workers(None, "local[*]", 2) == (2, "local[*]: 2 core(s) here, at most 4")
    assert apply_workers(3, "local[*]", 2) == (3, "run.apply_workers in the profile")
    assert apply_workers(None, "yarn", 2) == (4, "a cluster master: 4 by default")


# --------------------------------------------------------------------------- spans


def test_spans_merge_overlaps_and_find_the_oldest_pending() -> None:
    s = Spans()
    s.add(10, 20)
    s.add(15, 30)
    s.add(50, 60)
    assert len(s) == 2
    assert s.oldest(after=-1, upto=100) == 10
    assert s.oldest(after=12, upto=100) == 13  # inside a range: just after the marker
    assert s.oldest(after=30, upto=100) == 50
    assert s.oldest(after=30, upto=49) is None  # not resolved yet
    assert s.oldest(after=60, upto=100) is None
    assert s.oldest(after=0, upto=None) is None  # nothing resolved
    s.prune(30)
    assert len(s) == 1 and s.oldest(after=-1, upto=100) == 50


def test_spans_stay_bounded_and_never_make_a_change_look_newer() -> None:
    rng = random.Random(7)
    s = Spans()
    events: list[int] = []
    for _ in range(500):
        lo = rng.randrange(0, 100_000)
        hi = lo + rng.randrange(0, 50)
        events += [lo, hi]
        s.add(lo, hi)
        assert len(s) <= MAX_SPANS
    for _ in range(200):
        after = rng.randrange(-1, 100_000)
        upto = after + rng.randrange(0, 5_000)
        true = min((e for e in events if after < e <= upto), default=None)
        got = s.oldest(after, upto)
        if true is not None:
            assert got is not None and after < got <= true  # never later than the truth
        if got is not None:
            assert after < got <= upto


# --------------------------------------------------------------------------- deadlines


def cand(name: str, oldest_ms: int | None, lag_ms: int = 60_000, **kw) -> Candidate:
    return Candidate(
        name=name,
        lag_ms=lag_ms,
        at=kw.pop("at", 0),
        oldest=ts(oldest_ms) if oldest_ms is not None else None,
        **kw,
    )


def test_due_targets_go_earliest_deadline_first_ties_by_name() -> None:
    s = Scheduler(poll_ms=1000)
    now = T0 + 120_000
    cs = [
        cand("c", T0 + 10_000, lag_ms=30_000),  # deadline T0+40s
        cand("b", T0, lag_ms=60_000),  # T0+60s
        cand("a", T0 + 30_000, lag_ms=30_000),  # T0+60s: tie with b, by name
        cand("d", T0 + 100_000, lag_ms=60_000),  # T0+160s: not due
        cand("e", None),  # nothing pending
    ]
    got = s.choose(cs, now, free=10)
    assert names(got) == ["c", "a", "b"]
    assert [d.deadline_ms for d in got] == [T0 + 40_000, T0 + 60_000, T0 + 60_000]
    assert all(d.limit is None for d in got)
    # The same inputs give the same answer, whatever their order.
    assert names(s.choose(list(reversed(cs)), now, free=10)) == ["c", "a", "b"]


def test_lag_zero_is_due_at_once_a_long_lag_waits_and_drain_ignores_it() -> None:
    s = Scheduler(poll_ms=1000)
    now = T0 + 1
    cs = [cand("zero", T0, lag_ms=0), cand("hour", T0, lag_ms=3_600_000)]
    assert names(s.choose(cs, now, free=4)) == ["zero"]
    assert s.next_wake(cs, now) == T0 + 3_600_000
    # Drain (a plain run): everything pending is due now, most behind first.
    cs2 = [cand("hour", T0, lag_ms=3_600_000), cand("zero", T0 + 5, lag_ms=0)]
    assert names(s.choose(cs2, now, free=4, drain=True)) == ["hour", "zero"]


def test_at_most_the_free_workers_and_never_one_running() -> None:
    s = Scheduler(poll_ms=1000)
    now = T0 + 600_000
    cs = [cand(f"t{i}", T0 + i) for i in range(6)]
    assert names(s.choose(cs, now, free=2)) == ["t0", "t1"]
    assert s.choose(cs, now, free=0) == []
    running = [cand("t0", T0, running=True), *cs[1:]]
    assert names(s.choose(running, now, free=2)) == ["t1", "t2"]
    with pytest.raises(ValueError, match="twice"):
        s.choose([cs[0], cs[0]], now, free=2)


def test_work_without_a_commit_ts_is_due_at_once() -> None:
    s = Scheduler(poll_ms=1000)
    cs = [cand("old", T0 - 600_000), cand("new", None, work="create")]
    got = s.choose(cs, T0, free=4)
    assert names(got) == ["new", "old"]
    assert (got[0].deadline_ms, got[0].reason) == (None, "create")


def test_blocked_target_is_not_dispatched() -> None:
    s = Scheduler(poll_ms=1000)
    cs = [cand("blocked", T0 - 600_000, blocked=True), cand("ok", T0 - 600_000)]
    assert names(s.choose(cs, T0, free=4)) == ["ok"]
    assert names(s.choose(cs, T0, free=4, drain=True)) == ["ok"]
    assert s.next_wake(cs[:1], T0) is None


def test_expected_apply_time_makes_a_target_due_earlier() -> None:
    s = Scheduler(poll_ms=1000)
    c = cand("slow", T0, lag_ms=60_000)
    assert s.choose([c], T0 + 50_000, free=1) == []
    s.report("slow", 20.0, failed=False, now_ms=T0)
    assert s.expected_ms("slow") == 20_000
    assert names(s.choose([c], T0 + 50_000, free=1)) == ["slow"]  # 60 - 20 <= 50
    s.report("slow", 10.0, failed=False, now_ms=T0)
    assert s.expected_ms("slow") == 17_000  # 0.3 * 10 + 0.7 * 20
    # A target never applied is expected to take what the others take on average.
    assert s.expected_ms("other") == 17_000


def test_a_target_applied_in_a_round_is_due_a_round_s_length_before_its_deadline() -> None:
    # A round of 100 targets took 30 s: each target kept the worker 0.3 s (its share), but
    # none of its changes was visible before the 30 s were over.
    s = Scheduler(poll_ms=1000, workers=2)
    for i in range(100):
        s.report(f"t{i:03}", 0.3, failed=False, now_ms=T0, latency=30.0)
    assert (s.expected_ms("t000"), s.latency_ms("t000")) == (300, 30_000)
    c = cand("t000", T0, lag_ms=60_000)
    # Due by its latency: at the deadline less 30 s, not less 0.3 s.
    assert s.choose([c], T0 + 29_000, free=1) == []
    assert names(s.choose([c], T0 + 30_000, free=1)) == ["t000"]
    assert s.next_wake([c], T0) == T0 + 30_000
    # What the targets ahead of one keep the workers busy with is their share.
    cs = [cand(f"t{i:03}", T0, lag_ms=60_000) for i in range(100)]
    assert s.next_wake(cs, T0) == T0 + 30_000  # 100 x 0.3 s on 2 workers: 15 s < 30 s
    # An apply alone: its latency is its seconds.
    s.report("alone", 5.0, failed=False, now_ms=T0)
    assert (s.expected_ms("alone"), s.latency_ms("alone")) == (5_000, 5_000)


def test_targets_queued_behind_others_start_before_their_own_deadline() -> None:
    # Two workers, four targets whose deadlines fall within 8 s, each apply taking 6 s:
    # waiting for each deadline would end the last one 10 s past its own.
    s = Scheduler(poll_ms=1000, workers=2)
    for n in "abcd":
        s.report(n, 6.0, failed=False, now_ms=T0)
    now = T0 + 50_000
    cs = [cand(n, T0 + 1_000 * i * 2 + 2_000, lag_ms=60_000) for i, n in enumerate("abcd")]
    # Deadlines T0+62, 64, 66, 68 s. On the due rule alone (deadline - 6 s) nothing is
    # due before T0+56 s; behind the others, d must end by T0+68 s after 24 s of applies
    # on 2 workers: everything starts by T0+56 s at the latest, a and b by then too.
    assert s.next_wake(cs, now) == T0 + 56_000
    assert s.choose(cs, now, free=2) == []
    got = s.choose(cs, T0 + 56_000, free=4)
    assert [(d.name, d.reason) for d in got] == [
        ("a", "deadline"),
        ("b", "deadline, behind others"),
        ("c", "deadline, behind others"),
        ("d", "deadline, behind others"),
    ]
    # Those running hold their workers: c and d alone are due at c's own T0+60 s, behind
    # a and b running, at T0+56 s.
    assert s.next_wake(cs[2:], now) == T0 + 60_000
    busy = [cand(n, T0, running=True) for n in "ab"] + cs[2:]
    assert s.next_wake(busy, now) == T0 + 56_000
    # Ample time (one target on its own, or a long way to the deadlines): no earlier than
    # the due rule, so that each apply takes as much as it can.
    assert s.next_wake(cs[:1], now) == T0 + 56_000
    spread = [cand(n, T0 + 20_000 * i, lag_ms=60_000) for i, n in enumerate("abcd")]
    assert s.next_wake(spread, T0 + 1) == T0 + 54_000
    # A plain run's drain does not look at deadlines at all.
    assert names(s.choose(cs, now, free=4, drain=True)) == ["a", "b", "c", "d"]


# --------------------------------------------------------------------------- renames


def test_a_rename_waits_for_its_source_which_becomes_due_at_once() -> None:
    s = Scheduler(poll_ms=1000)
    rename_ts = ts(T0 + 50_000)
    now = T0 + 70_000
    # b's next DDL is a RENAME that copies a's rows as of rename_ts - 1; a is behind it.
    b = cand(
        "b",
        T0 + 10_000,
        lag_ms=0,
        needs=Need("a", rename_ts - 1, oldest=ts(T0 + 10_000)),
    )
    a = cand("a", T0 + 40_000, lag_ms=3_600_000, at=ts(T0 + 20_000))
    got = s.choose([a, b], now, free=4)
    assert [(d.name, d.limit, d.reason) for d in got] == [
        ("a", None, "b waits for it"),
        ("b", rename_ts - 1, "deadline"),
    ]
    # b has applied what comes before the rename: it waits, a is still due at once.
    b_waiting = cand("b", T0 + 50_000, lag_ms=0, needs=Need("a", rename_ts - 1, oldest=None))
    assert names(s.choose([a, b_waiting], now, free=4)) == ["a"]
    # a with no change known to be pending still goes first when an apply can bring it
    # further (to where its rows stop now), and not when it cannot.
    a_quiet = cand("a", None, at=ts(T0 + 20_000), upto=ts(T0 + 60_000))
    assert names(s.choose([a_quiet, b_waiting], now, free=4)) == ["a"]
    a_stuck = cand("a", None, at=ts(T0 + 20_000), upto=ts(T0 + 20_000))
    assert s.choose([a_stuck, b_waiting], now, free=4) == []
    # Once a stands just before the rename, b goes on without a limit.
    a_there = cand("a", None, at=rename_ts - 1)
    got = s.choose([a_there, b_waiting], now, free=4)
    assert [(d.name, d.limit) for d in got] == [("b", None)]


def test_a_rename_from_a_target_not_in_the_run_does_not_wait() -> None:
    s = Scheduler(poll_ms=1000)
    b = cand("b", T0, lag_ms=0, needs=Need("gone", ts(T0 + 5), oldest=None))
    assert [(d.name, d.limit) for d in s.choose([b], T0 + 1, free=1)] == [("b", None)]


# --------------------------------------------------------------------------- failures


def test_a_failing_target_backs_off_and_never_delays_the_others() -> None:
    s = Scheduler(poll_ms=2000)
    now = T0 + 600_000
    cs = [cand("bad", T0), cand("good", T0 + 1)]
    assert names(s.choose(cs, now, free=1)) == ["bad"]
    assert s.report("bad", 1.0, failed=True, now_ms=now) == now + 4000  # poll * 2^1
    # One worker: the failed target no longer takes it.
    assert names(s.choose(cs, now, free=1)) == ["good"]
    assert names(s.choose(cs, now + 3999, free=2)) == ["good"]
    assert s.next_wake(cs[:1], now) == now + 4000
    assert names(s.choose(cs, now + 4000, free=1)) == ["bad"]
    assert s.report("bad", 1.0, failed=True, now_ms=now) == now + 8000  # poll * 2^2
    for _ in range(20):
        retry = s.report("bad", 1.0, failed=True, now_ms=now)
    assert retry == now + MAX_BACKOFF_MS
    assert s.failures("bad") == 22
    # A plain run does not try it again.
    assert names(s.choose(cs, now + MAX_BACKOFF_MS, free=2, drain=True)) == ["good"]
    # A success forgets the failures.
    s.report("bad", 1.0, failed=False, now_ms=now)
    assert s.failures("bad") == 0 and s.retry_at("bad") is None
    assert names(s.choose(cs, now, free=2)) == ["bad", "good"]


# --------------------------------------------------------------------------- staleness


def test_staleness_is_measured_from_the_resolved_ts_or_before_the_oldest_pending() -> None:
    now = T0 + 90_000
    resolved = ts(T0 + 80_000)
    assert staleness_ms(now, resolved, None) == 10_000
    # Exact just before its oldest pending change (logical part 1 here, so the same ms).
    assert staleness_ms(now, resolved, ts(T0 + 20_000) + 1) == 70_000
    assert staleness_ms(now, resolved, ts(T0 + 20_000)) == 70_001
    assert staleness_ms(now, None, None) is None
    assert staleness_ms(now, -1, ts(T0)) is None
    assert staging_lag_ms(now, resolved) == 10_000
    assert staging_lag_ms(now, None) is None
    assert over_lag(now, ts(T0 + 20_000), 60_000) is True
    assert over_lag(now, ts(T0 + 40_000), 60_000) is False
    assert over_lag(now, None, 0) is False  # nothing pending: never behind
