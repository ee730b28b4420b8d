"""The staging table's retention: what may be trimmed, decided from the plan's facts."""

from __future__ import annotations

from ticdc_sync.warehouse.retention import trim_bound

DAY_MS = 86_400_000


def tso(ms: int) -> int:
    return ms << 18


def test_trims_what_every_target_applied_older_than_the_retention():
    resolved = tso(10 * DAY_MS)
    applied = [tso(10 * DAY_MS), tso(9 * DAY_MS)]
    assert trim_bound(applied, resolved, 7 * DAY_MS, False) == tso(3 * DAY_MS)
    # Zero retention: everything every target applied.
    assert trim_bound(applied, resolved, 0, False) == tso(9 * DAY_MS)


def test_nothing_while_a_target_lags_or_a_record_is_open_or_nothing_resolved():
    resolved = tso(10 * DAY_MS)
    assert trim_bound([resolved, -1], resolved, 0, False) is None  # a target not created
    assert trim_bound([resolved], resolved, 0, True) is None  # an open bad record
    assert trim_bound([resolved], None, 0, False) is None
    assert trim_bound([resolved], -1, 0, False) is None
    assert trim_bound([resolved], resolved, 30 * DAY_MS, False) is None  # all too young
