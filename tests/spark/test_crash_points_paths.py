"""Crash safety at every named commit point over the rewrite and the round, every mode: the
`paths` variant of `crash_scenario` (its docstring says what each case checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark import crash_scenario as sc
from ticdc_sync.core.crash_points import POINTS

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


@pytest.fixture(scope="module")
def settings():
    with sc.staging_settings() as batch:
        yield batch


@pytest.fixture(scope="module")
def reference(spark, settings, tmp_path_factory):
    return sc.reference(spark, settings, tmp_path_factory.mktemp("ref-paths"), "paths")


def test_every_point_has_a_case():
    named = {c[1] for c in sc.CASES} | set(sc.ELSEWHERE)
    assert set(POINTS) == named, set(POINTS) ^ named
    repo = Path(__file__).resolve().parents[2]
    for point, test in sc.ELSEWHERE.items():
        assert f'"{point}"' in (repo / test).read_text(), (point, test, "arms no such point")


def test_each_case_is_reached_by_an_uninterrupted_play(reference):
    sc.assert_each_case_reached(reference)


@pytest.mark.parametrize("point,chunk,nth,target", sc.cases("paths"))
def test_a_run_stopped_at_a_point_then_resumed_leaves_what_an_uninterrupted_one_does(
    spark, settings, reference, tmp_path, point, chunk, nth, target
):
    sc.crash_and_compare(spark, settings, reference, tmp_path, point, chunk, nth, target)
