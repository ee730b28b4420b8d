"""The crash points: every commit path names its point, every named point is reached by
some code, and an armed point stops the run there and at every point after it."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from ticdc_sync.core import crash_points
from ticdc_sync.core.crash_points import POINTS, SimulatedCrash

PACKAGE = Path(__file__).resolve().parents[2] / "ticdc_sync"
# The calls whose string arguments name a crash point.
NAMING = {"reach", "before_commit", "user_metadata", "commit_marker", "replace_files", "commit"}


def _named_points() -> dict[str, list[str]]:
    """point name -> where in the package a call names it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "crash_points.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name not in NAMING:
                continue
            for arg in node.args:
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and ("." in arg.value or arg.value in POINTS)
                ):
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    found.setdefault(arg.value, []).append(where)
    return found


def test_every_point_the_code_names_is_in_the_catalog_and_every_catalogued_one_is_named():
    named = _named_points()
    unknown = {p: w for p, w in named.items() if p not in POINTS}
    assert not unknown, f"points named in code but not in crash_points.POINTS: {unknown}"
    unused = sorted(set(POINTS) - set(named))
    assert not unused, f"points in crash_points.POINTS that no code reaches: {unused}"


def test_before_commit_requires_a_point():
    # Every commit names its point: the function has no default for it.
    src = (PACKAGE / "spark" / "runtime" / "conf.py").read_text()
    fn = next(
        n
        for n in ast.walk(ast.parse(src))
        if isinstance(n, ast.FunctionDef) and n.name == "before_commit"
    )
    assert [a.arg for a in fn.args.args] == ["point"]
    assert not fn.args.defaults


def test_unarmed_points_do_nothing():
    crash_points.reset()
    for point in POINTS:
        crash_points.reach(point, target="t")
    assert not crash_points.crashed()


def test_an_armed_point_fires_at_its_nth_reach_for_its_target_then_every_point_raises():
    with crash_points.armed("merge", nth=2, target="b") as a:
        crash_points.reach("merge", target="a")
        crash_points.reach("merge", target="b")
        crash_points.reach("create", target="b")
        with pytest.raises(SimulatedCrash, match="crash point merge of target b"):
            crash_points.reach("merge", target="b")
        assert a.fired and crash_points.crashed()
        # Dead: any point on any thread raises from now on.
        with pytest.raises(SimulatedCrash):
            crash_points.reach("staging.append")
        errors: list[BaseException] = []

        def other() -> None:
            try:
                crash_points.reach("lease.renew")
            except BaseException as e:  # noqa: BLE001 - what the thread met
                errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and isinstance(errors[0], SimulatedCrash)
    assert not crash_points.crashed()
    crash_points.reach("merge", target="b")  # alive again once the block ends


def test_a_crash_is_not_an_exception_the_run_would_catch():
    assert not issubclass(SimulatedCrash, Exception)


def test_a_crash_where_files_are_written_leaves_a_half_written_one(tmp_path):
    folder = tmp_path / "rs-00000000000000000001-x"
    with crash_points.armed("rewrite.files"), pytest.raises(SimulatedCrash):
        crash_points.reach("rewrite.files", target="t", partial_in=str(folder))
    (left,) = list(folder.iterdir())
    assert left.name.endswith(".parquet") and left.stat().st_size < 16


def test_recording_lists_what_was_reached_and_fires_nothing():
    with crash_points.recording() as r:
        crash_points.reach("staging.append")
        crash_points.reach("merge", target="t")
    assert r.reached == [("staging.append", None), ("merge", "t")]
    assert not r.fired


def test_an_unknown_point_is_refused():
    with pytest.raises(ValueError, match="unknown crash point"), crash_points.armed("no.such"):
        pass
    with crash_points.recording(), pytest.raises(AssertionError, match="not in"):
        crash_points.reach("no.such")
