"""The run loop's staging: a poll handed to the stager thread (every source staged in turn; a
stop ends it between two), each source's outcome folded, and a source that could not be read
waited out (`Staging`, a mixin of the loop; it reports each poll, so it builds on
`Reporting`).

The staging itself is the engine's. No pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence

from ticdc_sync.core.model import Source
from ticdc_sync.run.engine import StageOutcome
from ticdc_sync.run.loop_report import Reporting
from ticdc_sync.run.loop_settings import SOURCE_MAX_BACKOFF_MS
from ticdc_sync.run.loop_state import Chore, PollCounts
from ticdc_sync.run.results import SourceRun


class Staging(Reporting):
    def _start_poll(self, now: float) -> None:
        if self.acc.n:
            self._summarize()
        self.acc = PollCounts(n=self.acc.n + 1)
        self.result.polls = self.acc.n
        s = self.s
        last = not s.follow or (s.max_polls is not None and self.acc.n >= s.max_polls)
        self.polls_over = last
        sources = [
            src
            for src in s.sources
            if (retry := self.source_retry.get(src.name)) is None or retry[1] <= now
        ]
        self._give(Chore("stage", self.stager.submit(self._stage_all, sources), at=now, last=last))

    def _stage_all(self, sources: Sequence[Source]) -> list[StageOutcome]:
        """On the stager: stage each source in turn; a stop ends it between two."""
        done: list[StageOutcome] = []
        for source in sources:
            if self.stop.level >= 1:
                break
            done.append(self.engine.stage(source))
        return done

    def _staged(self, o: StageOutcome, now: float) -> None:
        sr = self.result.sources.setdefault(o.source, SourceRun(o.source))
        if o.unavailable is not None:
            sr.unavailable += 1
            self._unavailable(o.source, o.unavailable, now)
            self._heard_stage(o)
            return
        self.source_retry.pop(o.source, None)
        self._fold_stage(o)
        sr.staged_events += o.staged
        if o.records is not None:
            sr.records = (sr.records or 0) + o.records
        sr.quarantined += o.quarantined
        sr.partitions = {
            f"{t}/{p}": pt.last_offset for (t, p), pt in sorted(o.tally.partitions.items())
        }
        self.acc.staged += o.staged
        for e in o.errors:
            self._error(e)
        self._heard_stage(o)

    def _heard_stage(self, o: StageOutcome) -> None:
        if self.on_stage is not None:
            self.on_stage(o, self.result)

    def _unavailable(self, name: str, why: str, now: float) -> None:
        count = self.source_retry.get(name, (0, 0.0))[0] + 1
        if not self.s.follow:
            self._error(f"source {name}: could not be read: {why}")
            self.source_retry[name] = (count, float("inf"))
            return
        # An outage is waited out: the wait doubles, capped low so that a broker back up is
        # read again within a minute (docs/kafka.md, "Broker outages").
        wait = min(SOURCE_MAX_BACKOFF_MS / 1000, self.s.poll_seconds * 2**count)
        self.source_retry[name] = (count, now + wait)
        self.out(
            f"warning: source {name}: Kafka unavailable ({why}); nothing was staged from it; "
            f"retrying in {wait:.0f}s (attempt {count})"
        )
