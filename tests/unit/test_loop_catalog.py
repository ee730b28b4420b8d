"""The run loop's check that the output's catalog loads (`Applies._check_catalog`), over the
in-memory engine: made once per run before the first apply, by a follower too (not per
poll), only when the plan has catalog steps; a catalog that cannot load ends the run before
any apply."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from tests.unit.loop_fakes import T0, Clock, Fake, Spec
from tests.unit.test_loop import batch, run
from ticdc_sync.core.errors import UserError
from ticdc_sync.plan.model import CATALOG_REGISTER, Catalog, CatalogEntry, Plan


@dataclass
class Cataloged(Fake):
    """The fake engine whose plans have a catalog step per target (`with_steps`), checking
    the catalog as told (`fails`: why it cannot load)."""

    with_steps: bool = True
    fails: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.checks: list[tuple[str, int]] = []  # (catalog, applies made before it)

    def replan(self, state) -> Plan:
        plan = super().replan(state)
        if not self.with_steps:
            return plan
        entry = CatalogEntry("uc", "lake", "t", "mem/t", "", CATALOG_REGISTER)
        targets = tuple(replace(t, steps=(*t.steps, Catalog(entry))) for t in plan.targets)
        return replace(plan, targets=targets)

    def check_catalog(self, catalog: str) -> None:
        self.checks.append((catalog, len(self.calls)))
        if self.fails is not None:
            raise UserError(f"catalog {catalog}: {self.fails}")


def _fake(**kw) -> Cataloged:
    polls = [batch(T0 + 1_000 * k + 500, a=[T0 + 1_000 * k]) for k in range(1, 6)]
    return Cataloged([Spec("a", lag_ms=0), Spec("b", lag_ms=0)], {"s": polls}, Clock(T0), **kw)


def test_a_follower_checks_the_catalog_once_before_its_first_apply() -> None:
    fake = _fake()
    res = run(fake, follow=True, max_polls=5)
    assert fake.checks == [("uc", 0)]
    assert len(fake.calls) >= 2 and res.code == 0


def test_a_catalog_that_cannot_load_ends_the_run_before_any_apply() -> None:
    fake = _fake(fails="Cannot find catalog plugin class")
    with pytest.raises(UserError, match="catalog uc: Cannot find"):
        run(fake, follow=True, max_polls=5)
    assert fake.checks == [("uc", 0)] and fake.calls == []


def test_a_plan_without_catalog_steps_checks_nothing() -> None:
    fake = _fake(with_steps=False)
    run(fake)
    assert fake.checks == [] and fake.calls
