"""The run loop's sync points: when a source's targets are held at one TSO, and its record once
every target holds its tables there or stands behind it for good (`SyncPoints`, a mixin of
the loop). The record is the engine's, made on the stager thread.

No pyspark.
"""

from __future__ import annotations

from concurrent.futures import Future

from ticdc_sync.core.errors import Fatal
from ticdc_sync.run.engine import SyncPoint
from ticdc_sync.run.loop_state import Chore, LoopState, first_line


class SyncPoints(LoopState):
    def _sync_points(self) -> None:
        """Start a sync point for each source whose resolved TSO is `sync_every_ms` past
        its last one (at that resolved TSO), and record those every target has reached."""
        every = self.s.sync_every_ms
        plan = self.plan
        if every is None or plan is None or self.halt:
            return
        for sp in plan.sources:
            name = sp.source.name
            res = sp.resolved_ts
            if name not in self.sync_at:
                last = self.synced.get(name)
                # A TSO's physical part is milliseconds, above 18 logical bits (codec facts 1.1).
                if res is None or res < 0 or (last is not None and res - last < every << 18):
                    continue
                self.sync_at[name] = res
            self._sync_reached(name, self.sync_at[name])

    def _sync_reached(self, source: str, tso: int) -> None:
        """Record the sync point of `source` at `tso` once every target of it holds its
        tables at `tso` in a commit, or stands behind it for good (blocked, failed)."""
        if self.chore is not None:
            return  # the stager records it once its step in flight ends; the targets stay at it
        at: list[str] = []
        behind: list[tuple[str, int]] = []
        for t, _ in self._selected():
            if t.source != source or t.absent:
                continue
            if t.name in self.running:
                return
            if self._covers(t, tso) >= tso:
                at.append(t.name)
                continue
            r = self.result.targets.get(t.name)
            if self.blocked.get(t.name) is not None or t.refused or (r is not None and r.error):
                behind.append((t.name, self.state.target(t.name).marker.applied_ts))
                continue
            return  # it has changes up to `tso` still to apply
        point = SyncPoint(source, tso, tuple(sorted(at)), tuple(sorted(behind)))
        future = self.stager.submit(self.engine.record_sync_point, point)
        self._give(Chore("sync", future, point=point))

    def _recorded(self, point: SyncPoint, future: Future) -> None:
        """A sync point's record has ended: its targets go on past it."""
        source, tso = point.source, point.tso
        del self.sync_at[source]
        self.synced[source] = tso
        exc = future.exception()
        if isinstance(exc, Fatal) or (exc is not None and not isinstance(exc, Exception)):
            raise exc
        if exc is not None:  # the next sync point tries again
            self._error(f"source {source}: sync point at TSO {tso} not recorded: {first_line(exc)}")
            return
        behind = point.behind
        late = f", {len(behind)} behind ({', '.join(n for n, _ in behind)})" if behind else ""
        self.out(f"  {source}: sync point at TSO {tso}: {len(point.targets)} target(s){late}")
        self.result.sync_points.append(point)
