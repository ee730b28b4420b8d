"""The run loop's trims: each source's bound (`retention.trim_bound` over where its targets
stand) handed to the stager thread, and what the engine deleted and compacted beside the
polls since the last trim reported (`Trimming`, a mixin of the loop).

No pyspark.
"""

from __future__ import annotations

from ticdc_sync.run.engine import TrimOutcome
from ticdc_sync.run.loop_state import Chore, LoopState
from ticdc_sync.run.results import SourceRun
from ticdc_sync.warehouse.retention import trim_bound


class Trimming(LoopState):
    def _trim(self, final: bool = False) -> bool:
        """Hand the stager a trim of every source to its bound, if there is one (`final`:
        always, and wait for it); whether it was handed."""
        plan = self.plan
        if plan is None or self.halt:
            return False
        bounds: dict[str, int] = {}
        for sp in plan.sources:
            name = sp.source.name
            applied = [self._covers(t, sp.resolved_ts) for t in plan.targets if t.source == name]
            bound = trim_bound(applied, sp.resolved_ts, self.s.retention_ms, sp.open_bad)
            if bound is not None and bound > self.trimmed.get(name, -1):
                bounds[name] = bound
        if not bounds and not final:
            return False
        future = self.stager.submit(self.engine.trim, bounds, final=final)
        self._give(Chore("trim", future, bounds=bounds))
        if final:
            self.chore.future.result()  # type: ignore[union-attr]
            self._harvest_chore()
        return True

    def _trimmed(self, bounds: dict[str, int], o: TrimOutcome) -> None:
        self.trimmed.update(bounds)
        for name, n in sorted(o.deleted.items()):
            if n:
                sr = self.result.sources.setdefault(name, SourceRun(name))
                sr.trimmed_events += n
        for line in o.lines():
            self.out(line)
