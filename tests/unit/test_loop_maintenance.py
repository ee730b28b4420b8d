"""Targets' maintenance in the run loop (`loop_maintenance`), over the in-memory engine: a look
at a target never overlaps its apply, a plain run looks at every target once at its end,
`--follow` looks at each at most every check interval; and the pure decisions of
`plan.maintenance` (when to compact and VACUUM, the retention a VACUUM keeps, how far back
a read may go)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.unit.loop_fakes import T0, Clock, Fake, Inline, Spec, ts
from tests.unit.test_loop import batch, run
from ticdc_sync.core.model import Maintenance
from ticdc_sync.plan import maintenance as mt
from ticdc_sync.run.engine import MaintainJob, TargetMaintained


@dataclass
class Upkeeping(Fake):
    """The fake engine, maintaining too: each look is recorded with the targets applying
    at that moment."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.looks: list[tuple[str, int, bool]] = []  # (target, wall ms, its apply running)

    def maintain(self, job: MaintainJob) -> TargetMaintained:
        with self.lock:
            self.looks.append((job.target, self.clock.ms, self.active[job.target] > 0))
        return TargetMaintained(job.target, files=3, bytes=300, removed_bytes=0, vacuumed=True)


def test_a_plain_run_looks_at_every_target_once_after_its_applies() -> None:
    clock = Clock(T0 + 2_000)
    fake = Upkeeping(
        [Spec("a"), Spec("b")], {"s": [batch(T0 + 1_500, a=[T0 + 1_000], b=[T0 + 1_200])]}, clock
    )
    lines: list[str] = []
    res = run(fake, lines=lines)
    assert sorted(t for t, _, _ in fake.looks) == ["a", "b"]
    assert not any(applying for _, _, applying in fake.looks)
    assert sorted(c.name for c in fake.calls) == ["a", "b"]
    for n in "ab":
        r = res.targets[n]
        assert (r.maintained, r.vacuums, r.files, r.bytes) == (1, 1, 3, 300)
    assert any("a: vacuumed" in line for line in lines), lines


def test_a_follower_looks_at_each_target_every_check_interval_never_while_it_applies() -> None:
    clock = Clock(T0 + 2_000)
    polls = [batch(T0 + 60_000 * k + 500, a=[T0 + 60_000 * k]) for k in range(1, 16)]
    fake = Upkeeping([Spec("a", lag_ms=0), Spec("b", lag_ms=0)], {"s": polls}, clock)
    res = run(fake, follow=True, poll=60.0, max_polls=15)
    looks = [(t, ms) for t, ms, _ in fake.looks]
    assert not any(applying for _, _, applying in fake.looks)
    a = [ms for t, ms in looks if t == "a"]
    # 15 polls a minute apart: a look every 5 minutes at most, and the final one.
    assert 2 <= len(a) <= 4, looks
    timed = a[:-1]
    assert all(y - x >= mt.CHECK_EVERY_MS for x, y in zip(timed, timed[1:], strict=False))
    assert res.targets["a"].maintained == len(a) and res.code == 0


def test_applies_that_keep_every_worker_busy_do_not_hold_maintenance_off() -> None:
    # Three targets with changes at every poll, each apply 25 s long, one worker: a due
    # apply always wants the worker. A look overdue by a check interval goes first.
    clock = Clock(T0 + 2_000)
    polls = [
        batch(T0 + 10_000 * k + 500, a=[T0 + 10_000 * k], b=[T0 + 10_000 * k], c=[T0 + 10_000 * k])
        for k in range(1, 200)
    ]

    def slow(_job, _stop) -> None:
        clock.t += 25.0

    fake = Upkeeping(
        [Spec(n, lag_ms=0) for n in "abc"], {"s": polls}, clock, hooks=dict.fromkeys("abc", slow)
    )
    # The stager inline too: each poll folds at once, so a due apply is always waiting.
    res = run(fake, follow=True, poll=10.0, max_polls=60, stager=Inline())
    busy_until = max(c.at_ms for c in fake.calls)
    during = [(t, ms) for t, ms, _ in fake.looks if ms < busy_until]
    assert not any(applying for _, _, applying in fake.looks)
    # 60 polls of 75 s of applies each: over an hour under load. Every target was looked
    # at while the applies went on, at most about two check intervals apart.
    per = {n: [ms for t, ms in during if t == n] for n in "abc"}
    assert all(len(v) >= 3 for v in per.values()), per
    for v in per.values():
        assert all(y - x <= 2 * mt.CHECK_EVERY_MS + 120_000 for x, y in zip(v, v[1:], strict=False))
    assert res.code == 0


def test_compaction_and_vacuum_are_due_as_the_settings_say() -> None:
    m = Maintenance(compact_small_files=10, vacuum_every_ms=3_600_000, retain_ms=86_400_000)
    now = T0 + 10 * 86_400_000
    fresh = mt.TableFacts(files=9, bytes=9 << 20, last_vacuumed_ms=now - 60_000)
    assert mt.due(m, fresh, now) == mt.Due(False, False, 86_400_000)
    many = mt.TableFacts(files=10, bytes=10 << 20, last_vacuumed_ms=now - 3_600_000)
    assert mt.due(m, many, now) == mt.Due(True, True, 86_400_000)
    # Ten large files are not small ones.
    big = mt.TableFacts(files=10, bytes=10 * (64 << 20), last_vacuumed_ms=None)
    assert mt.due(m, big, now) == mt.Due(False, True, 86_400_000)
    assert mt.due(Maintenance(enabled=False), many, now) == mt.Due(False, False, m.retain_ms * 7)
    assert not mt.compaction_due(Maintenance(compact_small_files=0), 1000, 1000)


def test_the_newest_sync_point_holds_its_version_past_the_retention() -> None:
    m = Maintenance(retain_ms=3_600_000)
    now = T0 + 86_400_000
    assert mt.vacuum_retain_ms(m, now, None) == 3_600_000
    # A sync point a day old: everything removed since it stays.
    assert mt.vacuum_retain_ms(m, now, ts(T0)) == 86_400_000
    assert mt.vacuum_retain_ms(m, now, ts(now - 60_000)) == 3_600_000
    resolved = ts(now)
    assert mt.readable_from(m, resolved, None) == ts(now - 3_600_000)
    assert mt.readable_from(m, resolved, ts(T0)) == ts(T0)
    assert mt.readable_from(m, None, None) is None


def test_plan_notes_a_retention_past_deltas_log_retention() -> None:
    assert mt.notes(Maintenance()) == []
    (note,) = mt.notes(Maintenance(retain_ms=60 * 86_400_000, retain_from="t.yml:3"))
    assert "maintenance.retain 60d (t.yml:3)" in note and "delta.logRetentionDuration" in note


def test_a_vacuum_keeps_whole_hours_rounded_up_never_down() -> None:
    # Delta's VACUUM rounds RETAIN to the nearest hour: 10 minutes sent as 0.166667 hours
    # kept nothing, and a sync point 25h20m old sent as 25.33 hours lost its last 20 minutes.
    hour = 3_600_000
    now = T0 + 30 * 86_400_000
    ten_minutes = Maintenance(retain_ms=600_000, retain_from="t.yml:4")
    assert mt.vacuum_retain_ms(ten_minutes, now, None) == hour
    assert mt.vacuum_hours(mt.vacuum_retain_ms(ten_minutes, now, None)) == 1
    held = ts(now - (25 * hour + 20 * 60_000))
    assert mt.vacuum_retain_ms(Maintenance(retain_ms=hour), now, held) == 26 * hour
    assert mt.vacuum_hours(26 * hour) == 26
    assert mt.vacuum_retain_ms(Maintenance(retain_ms=0), now, None) == 0
    assert mt.vacuum_hours(0) == 0
    assert mt.due(ten_minutes, mt.TableFacts(1, 1), now).retain_ms == hour
    (note,) = mt.notes(ten_minutes)
    assert "maintenance.retain 10m (t.yml:4) is not whole hours" in note and "stay 1h" in note
    assert mt.notes(Maintenance(retain_ms=2 * hour)) == []
    assert mt.notes(Maintenance(retain_ms=600_000, enabled=False)) == []
