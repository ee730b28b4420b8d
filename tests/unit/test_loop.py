"""The run loop's decisions, against an in-memory engine (`loop_fakes`): deadline order,
lag 0 and a lag longer than the run, the worker bound, one target never twice at once,
renames, blocked and failing targets, staging that never waits for an apply, stops,
fatal errors, trims, results, and a plain run that brings every target to the resolved
TSO (also through the real planner). Time is a fake clock; no wall-clock timing."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.loop_fakes import T0, Clock, Fake, Inline, Spec, Threads, source, ts
from ticdc_sync.core.errors import Fatal
from ticdc_sync.run.engine import ApplyOutcome, StageOutcome
from ticdc_sync.run.loop import LoopResult, Settings, StopRequest, run_loop


def run(
    fake: Fake,
    *,
    follow: bool = False,
    workers: int = 1,
    poll: float = 1.0,
    max_polls: int | None = None,
    pool=None,
    stager=None,
    stop: StopRequest | None = None,
    lines: list[str] | None = None,
    polls: list | None = None,
    stages: list | None = None,
    applies: list | None = None,
    **kw,
) -> LoopResult:
    sources = sorted({s.source for s in fake.specs} | set(fake.batches))
    settings = Settings(
        sources=[source(n) for n in sources],
        workers=workers,
        follow=follow,
        poll_seconds=poll,
        max_polls=max_polls,
        **kw,
    )
    res = run_loop(
        fake,
        fake.replan,
        settings,
        stop=stop,
        out=(lines.append if lines is not None else lambda _line: None),
        on_poll=(lambda p, _r: polls.append(p)) if polls is not None else None,
        on_stage=(lambda o, _r: stages.append(o)) if stages is not None else None,
        on_apply=(lambda o, _r: applies.append(o)) if applies is not None else None,
        clock=fake.clock,
        waiter=fake.clock,
        pool=pool if pool is not None else Inline(),
        # A thread of its own, as in a run: stages overlap applies.
        stager=stager if stager is not None else Threads(1, fake),
    )
    assert fake.write_overlaps == [], "the stager's steps ran at once"
    return res


def batch(resolved_ms: int, **rows: list[int]) -> tuple[int, dict[str, list[int]]]:
    return resolved_ms, rows


# --------------------------------------------------------------------------- deadlines


def test_targets_are_applied_at_their_deadlines_most_urgent_first() -> None:
    clock = Clock(T0 + 2_000)
    fake = Fake(
        [Spec("a", lag_ms=30_000), Spec("b", lag_ms=10_000), Spec("c", lag_ms=20_000)],
        {"s": [batch(T0 + 1_000, a=[T0], b=[T0], c=[T0])]},
        clock,
    )
    res = run(fake, follow=True, poll=5.0, max_polls=8)
    # Each at its deadline (its oldest change + its lag), not at the first poll after it.
    assert [(c.name, c.at_ms) for c in fake.calls] == [
        ("b", T0 + 10_000),
        ("c", T0 + 20_000),
        ("a", T0 + 30_000),
    ]
    assert all(fake.at(n) == ts(T0) for n in "abc")
    assert res.code == 0 and res.errors == []


def test_lag_zero_applies_every_poll_a_lag_longer_than_the_run_waits_for_the_drain() -> None:
    clock = Clock(T0 + 2_000)
    polls = [batch(T0 + 1_000 * k + 500, z=[T0 + 1_000 * k], h=[T0 + 1_000 * k]) for k in (1, 2, 3)]
    fake = Fake([Spec("z", lag_ms=0), Spec("h", lag_ms=3_600_000)], {"s": polls}, clock)
    res = run(fake, follow=True, max_polls=3)
    # z after each poll; h only once the run ends (max_polls): the drain, most behind first.
    assert [(c.name, c.stages) for c in fake.calls] == [("z", 1), ("z", 2), ("h", 3), ("z", 3)]
    assert fake.at("z") == fake.at("h") == ts(T0 + 3_000)
    assert res.targets["h"].applies == 1 and res.targets["z"].applies == 3


def test_a_plain_run_brings_every_target_to_the_resolved_ts_whatever_its_lag() -> None:
    clock = Clock(T0 + 100_000)
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=60_000), Spec("c", lag_ms=86_400_000)],
        {"s": [batch(T0 + 90_000, a=[T0, T0 + 50_000], b=[T0 + 10], c=[T0 + 89_000])]},
        clock,
        markers={"a": T0 - 1_000, "b": T0 - 1_000, "c": T0 - 1_000},
    )
    res = run(fake)
    assert sorted(fake.names()) == ["a", "b", "c"]
    assert [fake.at(n) for n in "abc"] == [ts(T0 + 50_000), ts(T0 + 10), ts(T0 + 89_000)]
    # Nothing is pending: each is as fresh as the staging (resolved at T0 + 90 s).
    for name in "abc":
        t = res.targets[name]
        assert (t.staleness_seconds, t.over_lag) == (10.0, False), name
    assert res.sources["s"].staging_lag_seconds == 10.0
    assert res.polls == 1 and res.code == 0 and not res.interrupted


@pytest.mark.parametrize("spans", [True, False])
def test_what_an_earlier_run_staged_is_applied_with_or_without_spans_at_start(
    spans: bool,
) -> None:
    clock = Clock(T0 + 100_000)
    fake = Fake(
        [Spec("a", lag_ms=3_600_000), Spec("b", lag_ms=3_600_000), Spec("c", lag_ms=0)],
        {"s": [batch(T0 + 90_000, c=[T0 + 80_000])]},
        clock,
        markers={"a": T0 - 1_000, "b": T0 + 50_000, "c": T0 - 1_000},
        before=batch(T0 + 60_000, a=[T0, T0 + 40_000], b=[T0 + 20_000]),
        spans_at_start=spans,
    )
    res = run(fake)
    # a had rows above its marker; b had applied them already, so with spans it is not
    # applied at all. Without them the loop cannot tell, and applies it once (to nothing).
    assert sorted(fake.names()) == (["a", "c"] if spans else ["a", "b", "c"])
    assert fake.at("a") == ts(T0 + 40_000)
    assert fake.at("b") == ts(T0 + 50_000)
    assert res.code == 0


# --------------------------------------------------------------------------- workers


def test_at_most_the_workers_at_once_and_each_target_once() -> None:
    clock = Clock(T0 + 10_000)
    names = [f"t{i}" for i in range(6)]
    fake = Fake(
        [Spec(n, lag_ms=0) for n in names],
        {"s": [batch(T0 + 5_000, **{n: [T0] for n in names})]},
        clock,
    )
    pair = threading.Barrier(2, timeout=10)
    # Each apply waits for a second one to run beside it: with one worker this would
    # never happen (the barrier breaks), with three it would show in max_active.
    fake.hooks = {n: (lambda job, stop: (pair.wait(), None)[1]) for n in names}
    with Threads(2, fake) as pool:
        res = run(fake, workers=2, pool=pool)
    assert fake.max_active == 2
    assert sorted(fake.names()) == names and fake.overlaps == []
    assert res.code == 0


def test_each_apply_is_told_the_targets_of_its_source_due_with_it() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [
            Spec("a", lag_ms=0),
            Spec("b", lag_ms=0),
            Spec("c", lag_ms=0),
            Spec("y", lag_ms=3_600_000),
            Spec("x", lag_ms=0, source="r"),
        ],
        {
            "s": [batch(T0 + 5_000, a=[T0], b=[T0 + 1], c=[T0 + 2], y=[T0])],
            "r": [batch(T0 + 5_000, x=[T0])],
        },
        clock,
    )
    peers: dict[str, list[str]] = {}

    def hook(job, _stop):
        peers[job.target.name] = sorted(t.name for t, _ in job.peers)

    fake.hooks = {n: hook for n in "abcxy"}
    res = run(fake)
    # One at a time, most urgent first: each is told the due targets of its own source not
    # applied yet (itself among them), never those of another source.
    assert fake.names() == ["a", "x", "y", "b", "c"]
    assert peers == {
        "a": ["a", "b", "c", "y"],
        "x": ["x"],
        "y": ["b", "c", "y"],
        "b": ["b", "c"],
        "c": ["c"],
    }
    assert res.code == 0


def test_targets_due_with_a_round_segment_left_go_in_one_round_on_one_worker() -> None:
    clock = Clock(T0 + 10_000)
    names = [f"r{i}" for i in range(4)]
    fake = Fake(
        # r3 is created first (a first catch-up): still in the round.
        [*(Spec(n, lag_ms=0, round=True, create=n == "r3") for n in names), Spec("m", lag_ms=0)],
        {"s": [batch(T0 + 5_000, m=[T0], **{n: [T0] for n in names})]},
        clock,
        rounds=True,
    )
    pair = threading.Barrier(2, timeout=10)
    # The round and the target that goes alone run beside each other: two workers, and
    # the round takes one of them, not four.
    fake.hooks = {n: (lambda job, stop: (pair.wait(), None)[1]) for n in ("r0", "m")}
    with Threads(2, fake) as pool:
        res = run(fake, workers=2, pool=pool)
    assert [sorted(c) for c in fake.round_calls] == [names]
    assert sorted(fake.names()) == sorted([*names, "m"]) and fake.overlaps == []
    assert all(fake.at(n) == ts(T0) for n in [*names, "m"])
    assert res.code == 0
    # An engine that takes no rounds applies each target alone.
    fake = Fake(
        [Spec(n, lag_ms=0, round=True) for n in names],
        {"s": [batch(T0 + 5_000, **{n: [T0] for n in names})]},
        Clock(T0 + 10_000),
    )
    assert run(fake).code == 0 and fake.round_calls == []
    assert sorted(fake.names()) == names


def test_staging_never_waits_for_a_slow_apply_which_delays_no_other_target() -> None:
    clock = Clock(T0 + 2_000)
    polls = [
        batch(T0 + 1_000 * k, slow=[T0 + 1_000 * k - 1], fast=[T0 + 1_000 * k - 1])
        for k in range(1, 9)
    ]
    fake = Fake([Spec("slow", lag_ms=0), Spec("fast", lag_ms=0)], {"s": polls}, clock)
    released: list[int] = []

    def slow(job, should_stop):
        if not released:
            # Held until four more polls were staged and the other target was applied three
            # times: a loop that waited for this apply would never get there.
            ok = fake.park(lambda: fake.stage_calls >= 5 and fake.names().count("fast") >= 3)
            assert ok, "staging or the other target waited for the slow apply"
            released.append(fake.stage_calls)
        return None

    fake.hooks["slow"] = slow
    with Threads(2, fake) as pool:
        res = run(fake, follow=True, workers=2, max_polls=8, pool=pool)
    assert released and released[0] >= 5
    assert fake.overlaps == []  # never two applies of one target at once
    slow_calls = [c for c in fake.calls if c.name == "slow"]
    assert slow_calls[0].stages == 1 and all(c.stages >= 5 for c in slow_calls[1:])
    assert fake.at("slow") == fake.at("fast") == ts(T0 + 7_999)
    assert res.code == 0


def test_applies_never_wait_for_a_slow_stage_the_next_target_goes_at_once() -> None:
    clock = Clock(T0 + 2_000)
    polls = [
        batch(
            T0 + 1_000 * k, a=[T0 + 1_000 * k - 1], b=[T0 + 1_000 * k - 1], c=[T0 + 1_000 * k - 1]
        )
        for k in range(1, 4)
    ]
    fake = Fake([Spec(n, lag_ms=0) for n in "abc"], {"s": polls}, clock)
    held: list[bool] = []

    def a(job, should_stop):
        if not held:
            # The one worker is busy with `a` until the second poll's staging has begun.
            held.append(fake.park(lambda: fake.stage_calls >= 2))
        return None

    def slow_stage(n, _source):
        if n == 2:
            # The second poll stages until b and c were applied: a loop that dispatched only
            # between two polls would never get there.
            held.append(fake.park(lambda: {"b", "c"} <= set(fake.names())))
        return None

    fake.hooks["a"] = a
    fake.stage_hook = slow_stage
    with Threads(1, fake) as pool:
        res = run(fake, follow=True, workers=1, max_polls=3, pool=pool)
    assert held == [True, True], "an apply waited for the stage in flight"
    first_b = next(c for c in fake.calls if c.name == "b")
    assert first_b.stages == 2  # dispatched while the second poll was staging
    assert fake.overlaps == [] and fake.max_active == 1
    assert fake.at("a") == fake.at("b") == fake.at("c") == ts(T0 + 2_999)
    assert res.code == 0


def test_the_stager_rests_a_poll_interval_after_each_poll_however_long_it_took() -> None:
    """A poll slower than the interval is not followed by the next at once: staging would
    take a core for itself, away from the applies."""
    clock = Clock(T0 + 2_000)
    fake = Fake([Spec("a", lag_ms=0)], {"s": [batch(T0 + 1_000 * k) for k in range(1, 5)]}, clock)
    starts: list[float] = []

    def slow_stage(n, _source):
        starts.append(clock.t)
        if n % 2:
            clock.t += 3.0  # odd polls take longer than the interval, even ones no time
        return None

    fake.stage_hook = slow_stage
    run(fake, follow=True, poll=2.0, max_polls=4)
    gaps = [round(b - a, 3) for a, b in zip(starts, starts[1:], strict=False)]
    assert gaps == [5.0, 2.0, 5.0]


# --------------------------------------------------------------------------- renames


def test_a_rename_waits_for_the_target_its_rows_come_from_which_goes_first() -> None:
    clock = Clock(T0 + 70_000)
    rename = T0 + 50_000
    fake = Fake(
        [
            Spec("a", lag_ms=3_600_000, renamed_at=rename),
            Spec("b", lag_ms=0, rename_from=("a", rename)),
        ],
        {"s": [batch(T0 + 60_000, a=[T0 + 10_000, T0 + 40_000], b=[T0 + 10_000])]},
        clock,
        markers={"a": T0 - 60_000, "b": T0 - 60_000},
    )
    lines: list[str] = []
    res = run(fake, follow=True, workers=2, max_polls=2, lines=lines)
    # a (lag 1 h) is applied at once because b waits for it; b applies what comes before
    # the rename meanwhile, then the rename once a is there.
    assert [(c.name, c.limit, c.stages) for c in fake.calls] == [
        ("a", None, 1),
        ("b", ts(rename) - 1, 1),
        ("b", None, 1),
    ]
    assert fake.bad_copies == []
    assert fake.targets["b"].marker.ddl_ts == ts(rename)
    assert any("its RENAME TABLE or EXCHANGE PARTITION at commit_ts" in line for line in lines)
    assert res.code == 0


def test_a_rename_from_a_failing_target_waits_and_never_copies_early() -> None:
    clock = Clock(T0 + 70_000)
    rename = T0 + 50_000
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=0, rename_from=("a", rename))],
        {"s": [batch(T0 + 60_000, a=[T0 + 10_000], b=[T0 + 10_000, T0 + 55_000])]},
        clock,
        markers={"a": T0 - 60_000, "b": T0 - 60_000},
    )

    def broken(job, should_stop):
        raise RuntimeError("a cannot be written")

    fake.hooks["a"] = broken
    res = run(fake, workers=2)
    assert fake.bad_copies == []
    assert fake.at("b") == ts(T0 + 10_000)  # up to the rename, not past it
    assert res.targets["b"].waits_for == "a"
    assert res.code == 1 and res.errors == ["target a: a cannot be written"]


# --------------------------------------------------------------------------- blocked


def test_a_blocked_target_is_applied_up_to_its_block_once_and_not_again() -> None:
    clock = Clock(T0 + 31_000)
    fake = Fake(
        [Spec("x", lag_ms=0, block_at=T0 + 20_000), Spec("y", lag_ms=0)],
        {
            "s": [
                batch(T0 + 30_000, x=[T0 + 10_000, T0 + 25_000], y=[T0 + 10_000]),
                batch(T0 + 31_000, x=[T0 + 30_500], y=[T0 + 30_500]),
                batch(T0 + 32_000, x=[T0 + 31_500], y=[T0 + 31_500]),
            ]
        },
        clock,
    )
    lines: list[str] = []
    res = run(fake, follow=True, max_polls=3, lines=lines)
    assert fake.names().count("x") == 1
    assert fake.names().count("y") == 3
    assert fake.at("x") == ts(T0 + 10_000)
    assert fake.at("y") == ts(T0 + 31_500)
    blocked = f"target x: blocked at commit_ts {ts(T0 + 20_000)} by DDL `DROP COLUMN x`"
    assert res.targets["x"].blocked == blocked
    assert res.errors == [blocked] and lines.count(f"error: {blocked}") == 1
    # It is stale from just before its block on, and past its lag.
    assert res.targets["x"].over_lag is True
    assert res.code == 1


# --------------------------------------------------------------------------- failures


def test_a_failing_target_is_retried_with_backoff_and_delays_no_other() -> None:
    clock = Clock(T0 + 2_000)
    polls = [
        batch(T0 + 1_000 * k, bad=[T0 + 1_000 * k - 1], good=[T0 + 1_000 * k - 1])
        for k in range(1, 13)
    ]
    fake = Fake([Spec("bad", lag_ms=0), Spec("good", lag_ms=0)], {"s": polls}, clock)
    failures = [2]

    def flaky(job, should_stop):
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError("disk on fire")
        return None

    fake.hooks["bad"] = flaky
    lines: list[str] = []
    res = run(fake, follow=True, max_polls=12, lines=lines)
    bad = [c.at_ms for c in fake.calls if c.name == "bad"]
    t1 = T0 + 2_000
    assert bad[:3] == [t1, t1 + 2_000, t1 + 6_000]  # poll * 2^1, then poll * 2^2
    good = [c.at_ms for c in fake.calls if c.name == "good"]
    assert good == [t1 + 1_000 * k for k in range(12)]  # every poll, failures or not
    assert "error: target bad: disk on fire (tried again in 2s)" in lines
    assert "error: target bad: disk on fire (tried again in 4s)" in lines
    assert fake.read_states == 1 + 2  # its state is read again after each failure
    assert res.errors == ["target bad: disk on fire"]
    assert res.targets["bad"].error is None  # it succeeded since
    assert fake.at("bad") == fake.at("good") == ts(T0 + 11_999)


def test_a_plain_run_does_not_retry_a_failed_target_and_ends_with_exit_1() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("bad", lag_ms=0), Spec("good", lag_ms=0)],
        {"s": [batch(T0 + 5_000, bad=[T0], good=[T0])]},
        clock,
    )

    def broken(job, should_stop):
        raise ValueError("no such column")

    fake.hooks["bad"] = broken
    res = run(fake)
    assert fake.names() == ["bad", "good"]
    assert res.code == 1 and res.errors == ["target bad: no such column"]
    assert res.targets["bad"].error == "target bad: no such column"
    assert fake.at("good") == ts(T0)


def test_an_apply_that_changes_nothing_is_not_repeated() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake([Spec("lazy", lag_ms=0)], {"s": [batch(T0 + 5_000, lazy=[T0])]}, clock)

    def lazy(job, should_stop):
        st = fake.targets["lazy"]
        return ApplyOutcome("lazy", st, reached=st.marker.applied_ts)

    fake.hooks["lazy"] = lazy
    res = run(fake)
    assert fake.names() == ["lazy"]
    assert res.code == 1 and "its apply changed nothing" in res.errors[0]


# --------------------------------------------------------------------------- stopping


def test_first_stop_ends_staging_and_lets_the_apply_in_flight_finish_its_step() -> None:
    clock = Clock(T0 + 2_000)
    polls = [
        batch(T0 + 1_000 * k, t=[T0 + 1_000 * k - 1], u=[T0 + 1_000 * k - 1]) for k in range(1, 9)
    ]
    fake = Fake([Spec("t", lag_ms=0), Spec("u", lag_ms=0)], {"s": polls}, clock)
    stop = StopRequest()
    saw_stop: list[bool] = []

    def long(job, should_stop):
        saw_stop.append(fake.park(should_stop))  # its current step, until asked to stop
        st = fake.targets["t"]
        return ApplyOutcome("t", st, reached=st.marker.applied_ts, interrupted=True)

    def signal_on_third_poll(n, _source):
        if n == 3:
            stop.request()  # as Ctrl-C would, while staging
        return None

    fake.hooks["t"] = long
    fake.stage_hook = signal_on_third_poll
    with Threads(2, fake) as pool:
        res = run(fake, follow=True, workers=2, pool=pool, stop=stop)
    assert saw_stop == [True]
    assert fake.stage_calls == 3  # nothing staged after the stop
    assert fake.names().count("t") == 1  # nothing applied anew after it
    assert res.targets["t"].interrupted is True
    assert not res.interrupted and res.code == 0  # stopping --follow is how it ends


def test_second_stop_ends_the_loop_at_once() -> None:
    clock = Clock(T0 + 2_000)
    fake = Fake([Spec("t", lag_ms=0)], {"s": [batch(T0 + 1_000, t=[T0])]}, clock)
    stop = StopRequest()
    release = threading.Event()
    fake.hooks["t"] = lambda job, should_stop: fake.park(release.is_set) and None

    def signal_twice(n, _source):
        if n == 2:
            stop.request()
            stop.request()
        return None

    fake.stage_hook = signal_twice
    pool = Threads(1, fake)
    try:
        res = run(fake, follow=True, pool=pool, stop=stop)
        assert fake.active["t"] == 1  # still in flight: the loop did not wait
        assert res.interrupted is True
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_a_plain_run_stopped_applies_nothing_new() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=0)],
        {"s": [batch(T0 + 5_000, a=[T0], b=[T0 + 1])]},
        clock,
    )
    stop = StopRequest()

    def ctrl_c(job, should_stop):
        stop.request()
        return None  # ends the step it is in

    fake.hooks["a"] = ctrl_c
    res = run(fake, stop=stop)
    assert fake.names() == ["a"]
    assert res.interrupted is True
    assert fake.trims == []  # trimming waits for the next run


def test_a_fatal_error_stops_everything_and_is_raised() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=0)],
        {"s": [batch(T0 + 5_000, a=[T0], b=[T0 + 1])]},
        clock,
    )

    def lease_lost(job, should_stop):
        raise Fatal("the run lease was lost")

    fake.hooks["a"] = lease_lost
    with pytest.raises(Fatal, match="lease was lost"):
        run(fake, follow=True)
    assert fake.names() == ["a"] and fake.stage_calls == 1


def test_a_fatal_error_stops_the_other_applies_at_their_next_step() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=0)],
        {"s": [batch(T0 + 5_000, a=[T0], b=[T0 + 1])]},
        clock,
    )
    saw_stop: list[bool] = []

    def waits(job, should_stop):
        saw_stop.append(fake.park(should_stop))
        st = fake.targets["a"]
        return ApplyOutcome("a", st, reached=st.marker.applied_ts, interrupted=True)

    def lease_lost(job, should_stop):
        fake.park(lambda: fake.active["a"] == 1)  # a is in flight
        raise Fatal("the run lease was lost")

    fake.hooks = {"a": waits, "b": lease_lost}
    result = LoopResult()
    with Threads(2, fake) as pool, pytest.raises(Fatal):
        run_loop(
            fake,
            fake.replan,
            Settings([source()], workers=2, follow=True),
            out=lambda _l: None,
            clock=clock,
            waiter=clock,
            pool=pool,
            stager=Inline(),
            result=result,
        )
    assert saw_stop == [True]
    assert fake.active["a"] == 0  # it ended its step before the loop raised
    assert result.targets["a"].interrupted is True


# --------------------------------------------------------------------------- staging


def test_an_unavailable_source_is_read_again_after_a_backoff() -> None:
    clock = Clock(T0 + 2_000)
    fake = Fake([Spec("t", lag_ms=0)], {"s": [batch(T0 + 1_000, t=[T0])]}, clock)
    down = [2]

    def kafka(n, name):
        if down[0]:
            down[0] -= 1
            return StageOutcome(
                name, 0, fake.tallies.get(name) or _empty(), unavailable="no broker"
            )
        return None

    fake.stage_hook = kafka
    lines: list[str] = []
    run(fake, follow=True, max_polls=8, lines=lines)
    assert any("source s: Kafka unavailable (no broker)" in x and "in 2s" in x for x in lines)
    assert any("in 4s (attempt 2)" in x for x in lines)
    assert fake.at("t") == ts(T0)


def _empty():
    from ticdc_sync.core.staged import SourceTally

    return SourceTally()


# --------------------------------------------------------------------------- trim


def test_trim_bounds_are_where_every_target_of_each_source_has_everything() -> None:
    """Every target has applied all it has pending: each source trims up to its resolved
    TSO, not only up to its lowest marker (a target with nothing more to apply holds
    nothing back, and commits nothing to say so)."""
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=0), Spec("c", source="r", lag_ms=0)],
        {
            "s": [batch(T0 + 5_000, a=[T0 + 100, T0 + 4_000], b=[T0 + 200])],
            "r": [batch(T0 + 5_000, c=[T0 + 300])],
        },
        clock,
    )
    run(fake, retention_ms=0)
    assert fake.trims == [{"r": ts(T0 + 5_000), "s": ts(T0 + 5_000)}]


def test_a_target_behind_holds_the_trim_bound() -> None:
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("a", lag_ms=0), Spec("b", lag_ms=0)],
        {"s": [batch(T0 + 5_000, a=[T0 + 100], b=[T0 + 200])]},
        clock,
        markers={"a": T0 - 5_000, "b": T0 - 5_000},
    )
    fake.hooks["a"] = lambda job, stop: (_ for _ in ()).throw(RuntimeError("boom"))
    run(fake, retention_ms=0)
    # `a` failed: its oldest pending change stays, and everything from it on.
    assert fake.trims == [{"s": ts(T0 + 100) - 1}]


# --------------------------------------------------------------------------- results


def test_each_poll_has_a_summary_line_and_results_show_staleness() -> None:
    clock = Clock(T0 + 30_000)
    fake = Fake(
        [Spec("p", lag_ms=10_000), Spec("q", lag_ms=20_000)],
        {"s": [batch(T0 + 29_000, p=[T0], q=[T0])]},
        clock,
    )
    fake.hooks["q"] = lambda job, stop: (_ for _ in ()).throw(RuntimeError("boom"))
    polls: list = []
    res = run(fake, follow=True, max_polls=2, polls=polls)
    assert polls[0].line() == (
        "poll 1: 2 event(s) staged, 1 applied, 1 behind (over lag), staging lag 2.0s, 1 error(s)"
    )
    body = res.as_results()
    q = body["targets"]["q"]
    assert (q["over_lag"], q["target_lag_seconds"], q["error"]) == (
        True,
        20.0,
        "target q: boom",
    )
    assert body["targets"]["p"]["over_lag"] is False
    assert body["sources"]["s"]["resolved_ts"] == ts(T0 + 29_000)
    assert body["polls"] == 2 and body["poll"]["n"] == 2


def test_each_stage_and_apply_is_heard_once_folded_with_its_counts_in_the_results() -> None:
    """What `run.metrics` is fed: every stage (one that could not read its source too) and
    every apply (a failed one too), each heard after the results count it; the records
    read, the failures, the outages and what is pending are in the results."""
    clock = Clock(T0 + 2_000)
    fake = Fake(
        [Spec("ok", lag_ms=0), Spec("bad", lag_ms=0, block_at=T0 + 2_500)],
        {"s": [batch(T0 + 1_000 * k, ok=[T0 + 1_000 * k - 1]) for k in range(1, 5)]},
        clock,
    )
    down = [1]

    def stage(n: int, name: str) -> StageOutcome | None:
        if n == 2 and down[0]:
            down[0] -= 1
            return StageOutcome(name, 0, fake.tallies[name].copy(), unavailable="no broker")
        return None

    real_stage = fake._stage

    def counted(src):  # the Spark engine's count of Kafka records read: 3 per poll here
        o = real_stage(src)
        return o if o.unavailable else replace(o, records=3)

    fake.stage_hook = stage
    fake._stage = counted  # type: ignore[method-assign]
    failing = [1]

    def flaky(job, should_stop):
        if failing[0]:
            failing[0] -= 1
            raise RuntimeError("disk on fire")
        return None

    fake.hooks["ok"] = flaky
    heard: list[tuple[str, int, int]] = []
    stages: list = []
    applies: list = []

    def on_apply(o, res: LoopResult) -> None:
        applies.append(o)
        r = res.targets[o.target]
        heard.append((o.target, r.applies, r.failures))

    res = run_loop(
        fake,
        fake.replan,
        Settings(sources=[source("s")], workers=1, follow=True, poll_seconds=1.0, max_polls=5),
        out=lambda _line: None,
        on_stage=lambda o, r: stages.append((o, r.sources["s"].staged_events)),
        on_apply=on_apply,
        clock=fake.clock,
        waiter=fake.clock,
        pool=Inline(),
        stager=Threads(1, fake),
    )
    # The poll after the outage waits out its backoff (2 s) without the source.
    assert [o.unavailable for o, _ in stages] == [None, "no broker", None, None]
    # Heard once folded: the events staged so far include the outcome's own.
    assert [n for _, n in stages] == [1, 1, 2, 3]
    src = res.sources["s"]
    assert (src.records, src.unavailable, src.staged_events) == (9, 1, 3)
    assert len(applies) == res.targets["ok"].applies + res.targets["bad"].applies
    ok = [h for h in heard if h[0] == "ok"]
    assert ok[0] == ("ok", 1, 1) and ok[-1] == ("ok", res.targets["ok"].applies, 1)
    assert res.targets["ok"].error is None and res.targets["ok"].failures == 1
    bad = res.targets["bad"]
    assert bad.blocked and bad.pending_ddl == 1 and bad.oldest_pending_ts == ts(T0 + 2_500)
    assert res.targets["ok"].oldest_pending_ts is None and res.targets["ok"].pending_ddl == 0
    body = res.as_results()
    assert body["sources"]["s"]["records"] == 9 and body["sources"]["s"]["unavailable"] == 1
    assert body["targets"]["ok"]["failures"] == 1
    _check_results_schema(body)


def _check_results_schema(body: dict) -> None:
    """The loop's part of run_results.json is what its schema allows."""
    import json
    from importlib import resources

    import jsonschema

    schema = json.loads(
        resources.files("ticdc_sync").joinpath("schemas/run_results.schema.json").read_text()
    )
    full = {"format_version": 1, "project": "p", "outcome": "ok", **body}
    jsonschema.validate(full, schema)


def test_pending_ranges_stay_bounded_however_far_behind() -> None:
    clock = Clock(T0 + 2_000)
    polls = [batch(T0 + 1_000 * k, h=[T0 + 1_000 * k - 1]) for k in range(1, 201)]
    fake = Fake([Spec("h", lag_ms=86_400_000)], {"s": polls}, clock)
    res = run(fake, follow=True, max_polls=200)
    assert fake.names() == ["h"]  # only the final drain
    assert fake.at("h") == ts(T0 + 199_999)
    assert res.polls == 200


# --------------------------------------------------------------------------- real planner


def _project(root: Path, lag: str) -> None:
    files = {
        "ticdc_sync.yml": f"name: p\nprofile: p\ndefaults:\n  target_lag: {lag}\n",
        "profiles.yml": (
            "p:\n  target: dev\n  outputs:\n    dev:\n      spark: {master: 'local[2]'}\n"
            "      transport: {type: files, captures: captures}\n"
        ),
        "sources/s.yml": "sources:\n  - name: s\n    protocol: canal-json\n    topics: [t]\n",
        "tables/app.yml": "tables:\n  - upstream: app.*\n    name: '{table}'\n",
        "schema/app.sql": (
            "CREATE TABLE app.a (id INT PRIMARY KEY, v INT);\n"
            "CREATE TABLE app.b (id INT PRIMARY KEY, v INT);\n"
        ),
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "captures" / "t").mkdir(parents=True)


@pytest.mark.parametrize("follow", [False, True])
def test_through_the_real_planner_every_target_reaches_the_resolved_ts(
    tmp_path: Path, follow: bool
) -> None:
    from ticdc_sync.plan import build_plan
    from ticdc_sync.project import load_project

    _project(tmp_path, "1h")
    project = load_project(tmp_path)
    clock = Clock(T0 + 10_000)
    fake = Fake(
        [Spec("a", create=True), Spec("b", create=True)],
        {
            "s": [
                batch(T0 + 5_000, a=[T0, T0 + 4_000], b=[T0 + 1_000]),
                batch(T0 + 6_000, a=[T0 + 5_500]),
            ]
        },
        clock,
    )
    settings = Settings([source()], workers=2, follow=follow, max_polls=2 if follow else None)
    res = run_loop(
        fake,
        lambda st: build_plan(project, st),
        settings,
        out=lambda _l: None,
        clock=clock,
        waiter=clock,
        pool=Inline(),
        stager=Inline(),
    )
    resolved = ts(T0 + 6_000) if follow else ts(T0 + 5_000)
    assert fake.at("a") == (ts(T0 + 5_500) if follow else ts(T0 + 4_000))
    assert fake.at("b") == ts(T0 + 1_000)
    # Created (the plan's Create step) and applied at once; lag 1h from ticdc_sync.yml, so
    # what the second poll staged waits for the drain at the end.
    assert fake.names().count("a") == (2 if follow else 1) and fake.names().count("b") == 1
    assert res.targets["a"].target_lag_seconds == 3600.0
    assert all(not t.over_lag for t in res.targets.values())
    assert res.sources["s"].resolved_ts == resolved
    # A plan made now has nothing left for them but the resolved TSO.
    plan = build_plan(project, fake.read_state().state)
    assert all(not t.to_create and t.stop_ts == resolved for t in plan.targets)


# --------------------------------------------------------------------------- sync points


def test_sync_points_bring_every_target_of_a_source_to_one_tso_and_record_it() -> None:
    clock = Clock(T0 + 2_000)
    polls = [
        batch(T0 + 1_000, a=[T0 + 500], b=[T0 + 600], c=[T0 + 700]),
        batch(T0 + 7_000, a=[T0 + 6_000], b=[T0 + 6_500], c=[T0 + 2_000, T0 + 6_600]),
        batch(T0 + 8_000, a=[T0 + 7_500], b=[T0 + 7_600]),
    ]
    fake = Fake(
        [
            Spec("a", lag_ms=10_000),
            Spec("b", lag_ms=3_600_000),
            Spec("c", lag_ms=3_600_000, block_at=T0 + 3_000),
        ],
        {"s": polls},
        clock,
    )
    lines: list[str] = []
    res = run(fake, follow=True, poll=5.0, max_polls=3, sync_every_ms=5_000, lines=lines)
    points = [p for p, _ in fake.sync_points]
    # At the first resolved TSO, then once the resolved TSO is 5 s (TiDB time) further:
    # every target is applied up to it at once, whatever its lag; the blocked one is
    # recorded behind, where it stands.
    assert [(p.tso, p.targets, p.behind) for p in points] == [
        (ts(T0 + 1_000), ("a", "b", "c"), ()),
        (ts(T0 + 7_000), ("a", "b"), (("c", ts(T0 + 2_000)),)),
    ]
    stages = [(c.stages, c.name) for c in fake.calls]
    assert sorted(stages[:6]) == [(1, "a"), (1, "b"), (1, "c"), (2, "a"), (2, "b"), (2, "c")]
    assert res.sync_points == points
    assert any("s: sync point at TSO" in ln and "1 behind (c)" in ln for ln in lines)
    # Between sync points, the lag budget again: b waits for the drain at the end.
    assert fake.at("b") == ts(T0 + 7_600)


def test_a_sync_point_holds_the_targets_at_its_tso_until_it_is_recorded() -> None:
    clock = Clock(T0 + 2_000)
    polls = [
        batch(T0 + 1_000, a=[T0 + 500], b=[T0 + 600]),
        batch(T0 + 3_000, a=[T0 + 2_000], b=[T0 + 2_500]),
    ]
    fake = Fake([Spec("a", lag_ms=0), Spec("b", lag_ms=0)], {"s": polls}, clock)
    started = threading.Event()

    def slow_b(job, _stop):
        # b's apply to the sync point lasts over the next poll, which stages newer rows.
        if not started.is_set():
            started.set()
            assert fake.park(lambda: fake.stage_calls >= 2)
        return None

    fake.hooks["b"] = slow_b
    run(
        fake,
        follow=True,
        poll=1.0,
        max_polls=2,
        sync_every_ms=60_000,
        workers=2,
        pool=Threads(2, fake),
    )
    (point,) = [p for p, _ in fake.sync_points]
    assert point.tso == ts(T0 + 1_000) and point.targets == ("a", "b")
    # The sync point was recorded with a at it (the fake engine checks): a was not taken
    # past it while b was still on its way; afterwards both go on.
    assert fake.at("a") == ts(T0 + 2_000) and fake.at("b") == ts(T0 + 2_500)
