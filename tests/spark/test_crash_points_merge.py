"""Crash safety at the commit points of the MERGE and of a catch-up's staging, every mode:
the `merge` variant of `crash_scenario` (its docstring says what each case checks)."""

from __future__ import annotations

import pytest

from tests.spark import crash_scenario as sc

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


@pytest.fixture(scope="module")
def settings():
    with sc.staging_settings() as batch:
        yield batch


@pytest.fixture(scope="module")
def reference(spark, settings, tmp_path_factory):
    return sc.reference(spark, settings, tmp_path_factory.mktemp("ref-merge"), "merge")


def test_each_case_is_reached_by_an_uninterrupted_play(reference):
    sc.assert_each_case_reached(reference)


@pytest.mark.parametrize("point,chunk,nth,target", sc.cases("merge"))
def test_a_run_stopped_at_a_point_then_resumed_leaves_what_an_uninterrupted_one_does(
    spark, settings, reference, tmp_path, point, chunk, nth, target
):
    sc.crash_and_compare(spark, settings, reference, tmp_path, point, chunk, nth, target)
