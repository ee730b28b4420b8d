"""What a run loop reports: each poll's summary, the staleness of every target and source
against its lag, and the exit code (`Reporting`, a mixin of the loop over `LoopState`; the
results' shapes are `run.results`).

Reads the loop's state only; no I/O beyond the `on_poll` callback, no pyspark.
"""

from __future__ import annotations

from ticdc_sync.plan.model import READY
from ticdc_sync.run.loop_state import NOT_APPLIED, LoopState
from ticdc_sync.run.results import PollSummary, SourceRun
from ticdc_sync.run.schedule import (
    over_lag,
    staging_lag_ms,
    staleness_ms,
)


class Reporting(LoopState):
    def _measure(self) -> int:
        """Staleness of every selected target and of every source, now; how many targets
        are past their lag."""
        now = self._now_ms()
        behind = 0
        resolved: dict[str, int | None] = {}
        plan = self.plan
        for sp in plan.sources if plan is not None else ():
            resolved[sp.source.name] = sp.resolved_ts
            sr = self.result.sources.setdefault(sp.source.name, SourceRun(sp.source.name))
            sr.resolved_ts = sp.resolved_ts
            lag = staging_lag_ms(now, sp.resolved_ts)
            sr.staging_lag_seconds = None if lag is None else lag / 1000
            sr.skipped_tables = {f"{db}.{t}": n for db, t, n in sp.skipped}
        for t, sp in self._selected():
            r = self._target_run(t)
            r.target_lag_seconds = t.lag_ms / 1000
            if r.applied_ts is None and t.exists:
                r.applied_ts = t.marker.applied_ts
            res = sp.resolved_ts
            upto = res if res is not None and res >= 0 else None
            oldest = self._oldest(t, upto, NOT_APPLIED)
            st = staleness_ms(now, res, oldest)
            r.staleness_seconds = None if st is None else st / 1000
            # The TSO the target holds its tables as of (as `status` shows it): its marker,
            # or its source's resolved TSO when nothing of it is pending below that.
            r.current_ts = self._covers(t, res) if t.exists or r.applied_ts is not None else None
            r.over_lag = over_lag(now, oldest, t.lag_ms)
            r.oldest_pending_ts = oldest
            r.pending_ddl = len(t.pending)
            behind += r.over_lag
            if r.waits_for is not None and not any(
                d.status == READY and d.rename_from for d in t.ddl
            ):
                r.waits_for = None
        return behind

    def _summarize(self) -> None:
        behind = self._measure()
        lags = [
            s.staging_lag_seconds
            for s in self.result.sources.values()
            if s.staging_lag_seconds is not None
        ]
        summary = PollSummary(
            n=self.acc.n,
            staged=self.acc.staged,
            applied=self.acc.applied,
            behind=behind,
            staging_lag_seconds=max(lags) if lags else None,
            errors=self.acc.errors,
        )
        self.result.last_poll = summary
        self.result.code = self._code()
        if self.on_poll is not None:
            self.on_poll(summary, self.result)

    def _code(self) -> int:
        if any(r.error or r.blocked for r in self.result.targets.values()):
            return 1
        if self.s.follow and not self.draining:
            return 1 if self.acc.errors else 0
        return 1 if self.result.errors else 0

    def _finish(self, announce: bool) -> None:
        """The results as the loop ends; the last poll's summary to `on_poll` unless the
        loop is raising."""
        if self.acc.n and announce:
            self._summarize()
        else:
            self._measure()
            self.result.code = self._code()
