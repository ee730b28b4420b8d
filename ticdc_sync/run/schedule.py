"""Which targets `run` applies next, and how stale each one is.

A target is *pending* when a change it can apply now (a row change or DDL above where it
stands, at or below where its rows stop) is staged. Its *deadline* is the wall time of its
oldest pending change plus its `target_lag`. The wall time is the TSO's physical part in
milliseconds (`ts >> 18`, codec facts 1.1). A target is *due* once its deadline, less the
time its applies usually take to make its changes visible (an EWMA of the latencies
reported here), has come. It is due earlier when the workers could not otherwise apply it
and every target with an earlier deadline by their deadlines: when the expected applies of
those targets, and of those running, take longer spread over the workers than the time
left to its deadline. The two figures differ for a target applied in a round
(`Engine.apply_round`): its changes are visible only when the whole round has committed
(its latency, the round's duration), while it takes only its share of the round's worker
(its cost). Due by its share, a target of a round of 100 would start a round's length too
late. So a
lightly loaded run waits for each deadline and applies as much as it can at once, and a
loaded one keeps its workers busy in deadline order instead of starting each target late
behind the others. Due targets go to the free apply workers earliest deadline first, ties
by name. A target never runs twice at once. A blocked target is never dispatched. A
failed one waits a backoff that doubles with each failure, and in a plain run it is not
tried again.

A RENAME TABLE that moves another target's rows into this one waits for that target to
stand just before it: until then this one applies only what comes before the rename, and
the other one becomes due at once. In *drain* mode (a plain run, or the end of a bounded
`--follow`), everything pending is due now and the lag is ignored, most behind first.

Also here: the staleness measures `status` and run_results show.
Pure: no clock (callers pass "now"), no threads, no I/O, no pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Weight of the newest apply duration in a target's expected apply time.
EWMA_ALPHA = 0.3
# Ranges of pending commit_ts kept per upstream table (the closest two merge beyond it).
MAX_SPANS = 32
# A failed target waits poll * 2^failures, at most this long, before it is tried again.
MAX_BACKOFF_MS = 300_000

_NEVER = float("inf")


def wall_ms(ts: int) -> int:
    """A TSO's physical part: milliseconds since the epoch (codec facts 1.1)."""
    return max(ts, 0) >> 18


# --------------------------------------------------------------------------- pending changes


class Spans:
    """The commit_ts ranges of one upstream table's staged changes that may still be
    pending, each (lowest, highest) of a staged batch.

    At most `limit` ranges: beyond it the two closest merge, so memory stays bounded
    however far behind a target falls. A merged range only makes a change look older
    than it is (its target is applied a little early), never newer."""

    def __init__(self, limit: int = MAX_SPANS) -> None:
        self._spans: list[tuple[int, int]] = []  # by lowest, not overlapping
        self._limit = max(1, limit)

    def __len__(self) -> int:
        return len(self._spans)

    def __repr__(self) -> str:
        return f"Spans({self._spans!r})"

    def add(self, lo: int, hi: int) -> None:
        lo, hi = min(lo, hi), max(lo, hi)
        merged: list[tuple[int, int]] = []
        for a, b in sorted([*self._spans, (lo, hi)]):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        while len(merged) > self._limit:
            gaps = [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]
            i = gaps.index(min(gaps))
            merged[i : i + 2] = [(merged[i][0], merged[i + 1][1])]
        self._spans = merged

    def prune(self, at: int) -> None:
        """Forget the ranges wholly at or below `at` (applied)."""
        self._spans = [s for s in self._spans if s[1] > at]

    def oldest(self, after: int, upto: int | None) -> int | None:
        """The lowest commit_ts above `after` and at or below `upto` that may hold a change
        (None: none). Inside a range only its ends are known to hold one, so a range that
        reaches over `after` counts from `after + 1`."""
        if upto is None:
            return None
        for lo, hi in self._spans:
            if hi <= after:
                continue
            first = max(lo, after + 1)
            return first if first <= upto else None
        return None


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class Need:
    """A RENAME TABLE ahead of a target that moves another target's rows into it."""

    target: str  # the target the rows come from
    ts: int  # which must stand at or beyond this first (the rename's commit_ts - 1)
    oldest: int | None  # the waiting target's oldest pending change at or before `ts`


@dataclass(frozen=True, slots=True)
class Candidate:
    """One target as the scheduler sees it."""

    name: str
    lag_ms: int
    at: int  # every change with commit_ts at or below this is in the target
    oldest: int | None = None  # its oldest change it can apply now (None: nothing pending)
    upto: int | None = None  # where its rows stop now (the resolved TSO, or before a block)
    work: str | None = None  # work without a commit_ts, due at once: what (create, load...)
    running: bool = False
    blocked: bool = False
    needs: Need | None = None
    # How far its table's own marker says it is (the applied TSO, or just before the last
    # DDL it applied): what a RENAME that copies its rows checks. None: `at`.
    stands: int | None = None


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Apply `name` now: the steps that end at or before `limit` (None: all)."""

    name: str
    limit: int | None
    deadline_ms: int | None  # None: due at once
    reason: str


class Scheduler:
    """The scheduling decisions of one run, and what it remembers between them: each
    target's expected apply time and its failures."""

    def __init__(
        self, poll_ms: int, max_backoff_ms: int = MAX_BACKOFF_MS, workers: int = 1
    ) -> None:
        self.poll_ms = max(1, poll_ms)
        self.max_backoff_ms = max_backoff_ms
        self.workers = max(1, workers)
        self._expected: dict[str, float] = {}  # target -> EWMA of its apply's worker seconds
        self._latency: dict[str, float] = {}  # target -> EWMA of dispatch-to-visible seconds
        self._failures: dict[str, tuple[int, int]] = {}  # target -> (count, retry at ms)

    # --- what happened --------------------------------------------------------------

    def report(
        self, name: str, seconds: float, failed: bool, now_ms: int, latency: float | None = None
    ) -> int | None:
        """Record an apply of `name` that took `seconds` of a worker and made its changes
        visible `latency` seconds after it was dispatched (None: `seconds`, an apply alone;
        in a round, the round's duration); for a failure, return when it may be tried again
        (ms), the backoff doubling with each failure in a row."""
        seconds = max(0.0, seconds)
        _ewma(self._expected, name, seconds)
        _ewma(self._latency, name, seconds if latency is None else max(0.0, latency))
        if not failed:
            self._failures.pop(name, None)
            return None
        count = self._failures.get(name, (0, 0))[0] + 1
        retry = now_ms + min(self.max_backoff_ms, self.poll_ms * 2**count)
        self._failures[name] = (count, retry)
        return retry

    def expected_ms(self, name: str) -> int:
        """How long an apply of `name` is expected to keep a worker: its EWMA, else the mean
        of the other targets' (0 before any apply)."""
        return _expected_ms(self._expected, name)

    def latency_ms(self, name: str) -> int:
        """How long after its dispatch an apply of `name` is expected to make its changes
        visible, likewise."""
        return _expected_ms(self._latency, name)

    def failures(self, name: str) -> int:
        return self._failures.get(name, (0, 0))[0]

    def retry_at(self, name: str) -> int | None:
        f = self._failures.get(name)
        return f[1] if f is not None else None

    # --- what to do -----------------------------------------------------------------

    def choose(
        self, candidates: Sequence[Candidate], now_ms: int, free: int, *, drain: bool = False
    ) -> list[Dispatch]:
        """The targets to apply now, most urgent first, at most `free` of them."""
        due = self._due(candidates, now_ms, drain)
        due.sort(key=lambda d: (-_NEVER if d.deadline_ms is None else d.deadline_ms, d.name))
        return due[: max(0, free)]

    def next_wake(
        self, candidates: Sequence[Candidate], now_ms: int, *, drain: bool = False
    ) -> int | None:
        """The next time (ms) a target that is not due now becomes due, if any."""
        limits, _ = _dependencies(candidates)
        best: float = _NEVER
        if not drain:
            for start in self._queue(candidates, limits).values():
                if start > now_ms:
                    best = min(best, start)
        for c in candidates:
            if c.running or c.blocked or (drain and c.name in self._failures):
                continue
            oldest = c.needs.oldest if c.name in limits and c.needs else c.oldest
            if not c.work and oldest is None:
                continue
            at = float(self._failures.get(c.name, (0, 0))[1])
            if not c.work and not drain:
                at = max(at, wall_ms(oldest or 0) + c.lag_ms - self.latency_ms(c.name))
            if at > now_ms:
                best = min(best, at)
        return None if best == _NEVER else int(best)

    def _due(self, candidates: Sequence[Candidate], now_ms: int, drain: bool) -> list[Dispatch]:
        names = [c.name for c in candidates]
        if len(set(names)) != len(names):
            raise ValueError("a target appears twice among the candidates")
        limits, urgent = _dependencies(candidates)
        latest = {} if drain else self._queue(candidates, limits)
        due: list[Dispatch] = []
        for c in candidates:
            if c.running or c.blocked or self._held(c.name, now_ms, drain):
                continue
            limit = limits.get(c.name)
            oldest = c.needs.oldest if limit is not None and c.needs else c.oldest
            reach = c.upto if limit is None or c.upto is None else min(c.upto, limit)
            if c.work:
                due.append(Dispatch(c.name, limit, None, c.work))
            elif c.name in urgent and (oldest is not None or (reach is not None and reach > c.at)):
                # Even with no change known to be pending: an apply brings it to `reach`.
                due.append(Dispatch(c.name, limit, None, f"{urgent[c.name]} waits for it"))
            elif oldest is None:
                continue
            else:
                deadline = wall_ms(oldest) + (0 if drain else c.lag_ms)
                if drain or deadline - self.latency_ms(c.name) <= now_ms:
                    due.append(Dispatch(c.name, limit, deadline, "deadline"))
                elif latest.get(c.name, _NEVER) <= now_ms:
                    due.append(Dispatch(c.name, limit, deadline, "deadline, behind others"))
        return due

    def _queue(self, candidates: Sequence[Candidate], limits: dict[str, int]) -> dict[str, float]:
        """When each target waiting for its deadline must start at the latest so that it
        and every target with an earlier deadline are applied by their deadlines: taken in
        deadline order, the expected applies of a target and of all before it, and of
        those running (held as a whole: how far they are is not known), spread over the
        workers, end at its deadline. A target before one that must start now starts now
        too (it goes first)."""
        busy = sum(self.expected_ms(c.name) for c in candidates if c.running)
        waiting: list[tuple[int, str]] = []
        for c in candidates:
            if c.running or c.blocked or c.work or c.name in self._failures:
                continue
            limit = limits.get(c.name)
            oldest = c.needs.oldest if limit is not None and c.needs else c.oldest
            if oldest is not None:
                waiting.append((wall_ms(oldest) + c.lag_ms, c.name))
        waiting.sort()
        latest: dict[str, float] = {}
        work = busy
        for deadline, name in waiting:
            work += self.expected_ms(name)
            latest[name] = deadline - work / self.workers
        # A target must start no later than any target after it in deadline order.
        start = _NEVER
        for _, name in reversed(waiting):
            start = min(start, latest[name])
            latest[name] = start
        return latest

    def _held(self, name: str, now_ms: int, drain: bool) -> bool:
        """A failed target: not tried again in drain mode, else not before its backoff."""
        f = self._failures.get(name)
        if f is None:
            return False
        return drain or f[1] > now_ms


def _ewma(into: dict[str, float], name: str, value: float) -> None:
    old = into.get(name)
    into[name] = value if old is None else EWMA_ALPHA * value + (1 - EWMA_ALPHA) * old


def _expected_ms(of: dict[str, float], name: str) -> int:
    """`name`'s EWMA in ms, else the mean of the other targets' (0 before any apply)."""
    if name in of:
        return int(of[name] * 1000)
    if not of:
        return 0
    return int(sum(of.values()) / len(of) * 1000)


def _dependencies(candidates: Sequence[Candidate]) -> tuple[dict[str, int], dict[str, str]]:
    """Targets waiting at a rename for another one (their limit), and the targets waited
    for (with the name of one that waits). A target not among the candidates (not selected)
    does not hold anyone back."""
    by_name = {c.name: c for c in candidates}
    limits: dict[str, int] = {}
    urgent: dict[str, str] = {}
    for c in sorted(candidates, key=lambda c: c.name):
        n = c.needs
        if n is None or n.target not in by_name:
            continue
        dep = by_name[n.target]
        if (dep.stands if dep.stands is not None else dep.at) >= n.ts:
            continue
        limits[c.name] = n.ts
        urgent.setdefault(n.target, c.name)
    return limits, urgent


# --------------------------------------------------------------------------- staleness


def staleness_ms(now_ms: int, resolved: int | None, oldest: int | None) -> int | None:
    """How old a target is: now minus the wall time of the TSO it is exact at, which is the
    source's resolved TSO when nothing is pending, else just before its oldest pending
    change. None while nothing is resolved."""
    if resolved is None or resolved < 0:
        return None
    effective = resolved if oldest is None else min(resolved, oldest - 1)
    return max(0, now_ms - wall_ms(effective))


def over_lag(now_ms: int, oldest: int | None, lag_ms: int) -> bool:
    """Whether a target is past its deadline: a pending change older than its lag."""
    return oldest is not None and now_ms - wall_ms(oldest) > lag_ms


def staging_lag_ms(now_ms: int, resolved: int | None) -> int | None:
    """How old a source's staged data is: now minus the wall time of its resolved TSO."""
    if resolved is None or resolved < 0:
        return None
    return max(0, now_ms - wall_ms(resolved))
