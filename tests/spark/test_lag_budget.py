"""Targets on a lag budget (`target_lag`): staging goes on while a target waits, nothing it
still needs is trimmed, a DDL reached while it is behind applies in order, and what lands in
the end is what a run that applied every poll lands.

The changes carry commit_ts from the wall clock of the test, so that a lag of an hour truly
keeps a target waiting during the run (a change from long ago is due at once, whatever
its lag).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.test_plan_is_program import MT, ddl
from ticdc_sync.commands import status
from ticdc_sync.run.loop import StopRequest
from ticdc_sync.spark import runner

pytestmark = pytest.mark.spark

TABLES = (
    '  - upstream: "shop.fast"\n    name: fast\n    target_lag: 0\n'
    '  - upstream: "shop.slow"\n    name: slow\n    target_lag: 10h\n'
)


def now_ts(offset_ms: int = 0) -> int:
    """A TSO of the wall clock now (its physical part, codec facts 1.1)."""
    return (int(time.time() * 1000) + offset_ms) << 18


def history(t0: int) -> list[bytes]:
    """`fast` is created and gets rows first; then `slow` is created, gets rows, drops a
    column (a barrier between its rows) and gets rows after it, while `fast` gets more."""
    step = 1 << 18  # 1 ms
    mt = {**MT, "w": "varchar"}
    clock = iter(range(t0, t0 + 1000 * step, step))
    create = "CREATE TABLE shop.{} (id INT PRIMARY KEY, v VARCHAR(10), w VARCHAR(10))"

    def row(name: str, i: int, w: str | None) -> bytes:
        data = {"id": str(i), "v": f"{name}{i}"}
        if w is not None:
            data["w"] = w
        return canal_row("shop", name, "INSERT", next(clock), data, mt if w else MT, ["id"])

    out = [ddl("fast", next(clock), create.format("fast"), "CREATE")]
    out += [row("fast", i, "x") for i in range(1, 4)]
    out.append(ddl("slow", next(clock), create.format("slow"), "CREATE"))
    out += [row("slow", i, "x") for i in range(1, 4)]
    out.append(ddl("slow", next(clock), "ALTER TABLE shop.slow DROP COLUMN w", "ALTER"))
    for i in range(4, 6):
        out += [row("fast", i, "y"), row("slow", i, None)]
    out.append(
        canal_row(
            "shop",
            "slow",
            "UPDATE",
            next(clock),
            {"id": "1", "v": "s1b"},
            MT,
            ["id"],
            old={"v": "slow1"},
        )
    )
    out.append(wm(next(clock)))
    return out


def follow_then_stop(project, spark, polls: int, until: str = "") -> tuple[int, list[str]]:
    """`run --follow` until a line holds `until` (then one more poll) or `polls` polls are
    summarized, then stopped as by Ctrl-C."""
    stop = StopRequest()
    lines: list[str] = []
    seen = []

    def out(line: str) -> None:
        lines.append(line)
        if until and until in line:
            seen.append(line)
        if line.startswith("poll ") and (seen or line.startswith(f"poll {polls}:")):
            stop.request()

    code = runner.run(
        project, spark=spark, follow=True, poll_seconds=0.2, out=out, stop_request=stop
    )
    return code, lines


def test_a_target_behind_keeps_its_rows_through_trims_and_its_ddl_in_order(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables=TABLES,
        defaults="staging:\n  retention: 0s\n",
    )
    write_captures(root, "t", [(0, i, None, m) for i, m in enumerate(history(now_ts()))])
    project = load(root)
    # Staging is trimmed every 30 polls' time (6 s here), which faster polls take more of
    # to reach: the run stops one poll after the trim, or at 40 polls without one.
    code, lines = follow_then_stop(project, spark, polls=40, until="older than the retention")
    assert code == 0, "\n".join(lines)
    results = json.loads((root / "target" / "run_results.json").read_text())
    # `fast` (lag 0) was applied; `slow` (lag 10h) waited, and is not over its lag.
    assert results["targets"]["fast"]["applies"] >= 1
    assert "slow" not in results["targets"] or results["targets"]["slow"]["applies"] == 0
    assert results["targets"]["slow"]["over_lag"] is False
    assert read_target(spark, project, "fast", "id")[-1]["id"] == 5
    # Staging was trimmed while `slow` was behind (retention 0s)...
    assert any("older than the retention deleted" in ln for ln in lines), "\n".join(lines)
    rep = {t["name"]: t for t in status.report(project)["targets"]}
    # ...yet every change of `slow` is still staged: its CREATE, 5 inserts, its DROP
    # COLUMN and an update.
    assert rep["slow"]["pending_events"] == 8
    assert rep["fast"]["pending_events"] == 0
    assert rep["fast"]["current_ts"] == rep["fast"]["applied_ts"]

    # A plain run applies what `slow` has waiting: rows, its DROP COLUMN, rows after it.
    lines.clear()
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    slow = [(r["id"], r["v"]) for r in read_target(spark, project, "slow", "id")]
    assert slow == [(1, "s1b"), (2, "slow2"), (3, "slow3"), (4, "slow4"), (5, "slow5")]
    assert "w" not in read_target(spark, project, "slow", "id")[0]
    fast = [(r["id"], r["v"], r["w"]) for r in read_target(spark, project, "fast", "id")]
    assert fast == [(i, f"fast{i}", "x" if i < 4 else "y") for i in range(1, 6)]


def test_follow_lands_the_same_with_lag_zero_and_a_lag_longer_than_the_run(spark, tmp_path):
    landed = {}
    for lag in ("0", "1h"):
        root = make_project(
            tmp_path / f"lag{lag}",
            protocol="canal-json",
            tables=f'  - upstream: "shop.*"\n    name: "{{table}}"\n    target_lag: {lag}\n',
        )
        write_captures(root, "t", [(0, i, None, m) for i, m in enumerate(history(now_ts()))])
        project = load(root)
        lines: list[str] = []
        # Two polls, then what is pending is applied (a bounded --follow ends as `run`).
        code = runner.run(
            project, spark=spark, follow=True, max_batches=2, poll_seconds=0.2, out=lines.append
        )
        assert code == 0, "\n".join(lines)
        polls = [ln for ln in lines if ln.startswith("poll ")]
        if lag == "1h":
            # Nothing is due during the polls: the first poll's summary applied nothing.
            assert polls[0].startswith("poll 1: ") and " 0 applied, 0 behind" in polls[0], polls
        landed[lag] = {
            name: [
                {k: v for k, v in r.items() if k != "_commit_ts"}
                for r in read_target(spark, project, name, "id")
            ]
            for name in ("fast", "slow")
        }
    assert landed["0"] == landed["1h"]
    assert [r["v"] for r in landed["0"]["slow"]] == ["s1b", "slow2", "slow3", "slow4", "slow5"]
