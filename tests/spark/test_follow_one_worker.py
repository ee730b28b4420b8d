"""`run --follow` with one apply worker (`run.apply_workers: 1`, or `master: local`): staging
and the apply still run at the same time, on two threads, and each commit still carries
its own userMetadata.

A target's progress marker and the staging tallies both travel to Delta in the same
session conf (`spark.conf.user_metadata`). An apply that shared the run's session with
staging could stamp the staging tallies on a target's commit, or its marker on a staging
commit, whenever the two overlapped. Records keep arriving while the run follows, so
polls stage while the target is being applied; afterwards every commit of the target must
carry a marker and every staging append the tallies.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, read_target, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from tests.spark.test_lag_budget import now_ts
from tests.spark.test_plan_is_program import MT, ddl
from ticdc_sync.core.sqlgen import table_ref
from ticdc_sync.core.staged import from_user_metadata
from ticdc_sync.core.window import Marker
from ticdc_sync.run.loop import StopRequest
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import state_location, target_location, warehouse_path

pytestmark = pytest.mark.spark

POLLS = 12


def history(root, stop: threading.Event) -> None:
    """A CREATE, then an insert and a watermark every 50 ms until `stop` (at most 30 s)."""
    offset, last = 0, 0

    def ts() -> int:
        # From the wall clock, and rising: no row shares its CREATE's commit_ts.
        nonlocal last
        last = max(last + 1, now_ts())
        return last

    def put(message: bytes) -> None:
        nonlocal offset
        write_captures(root, "t", [(0, offset, None, message)])
        offset += 1

    put(ddl("a", ts(), "CREATE TABLE shop.a (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE"))
    deadline = time.monotonic() + 30
    i = 0
    while not stop.is_set() and time.monotonic() < deadline:
        i += 1
        put(canal_row("shop", "a", "INSERT", ts(), {"id": str(i), "v": f"v{i}"}, MT, ["id"]))
        put(wm(ts()))
        stop.wait(0.05)


def history_of(spark, location: str) -> list[tuple[int, str, str | None]]:
    rows = spark.sql(f"DESCRIBE HISTORY {table_ref(location)}").orderBy("version").collect()
    return [(r["version"], r["operation"], r["userMetadata"]) for r in rows]


def test_one_apply_worker_keeps_each_commits_metadata_its_own(spark, tmp_path):
    root = make_project(
        tmp_path / "p",
        protocol="canal-json",
        tables='  - upstream: "shop.a"\n    name: a\n    target_lag: 0\n',
    )
    profiles = root / "profiles.yml"
    profiles.write_text(profiles.read_text() + "      run: {apply_workers: 1}\n")
    done = threading.Event()
    writer = threading.Thread(target=history, args=(root, done), daemon=True)
    writer.start()
    try:
        time.sleep(0.3)
        project = load(root)
        stop = StopRequest()
        lines: list[str] = []

        def out(line: str) -> None:
            lines.append(line)
            if line.startswith(f"poll {POLLS}:"):
                stop.request()

        code = runner.run(
            project, spark=spark, follow=True, poll_seconds=0.2, out=out, stop_request=stop
        )
    finally:
        done.set()
        writer.join()
    assert code == 0, "\n".join(lines)
    wh = warehouse_path(project)
    target = history_of(spark, target_location(wh, "a"))
    staging = history_of(spark, state_location(wh, "events"))
    # The target was applied at several polls while staging went on.
    assert len([c for c in target if c[1] in ("MERGE", "WRITE")]) >= 2, target
    assert len([c for c in staging if c[1] == "WRITE"]) >= 2, staging
    # Each target commit a marker (its CREATE may have none), never the staging tallies.
    wrong = [
        c
        for c in target
        if (c[1] != "CREATE TABLE" and Marker.from_user_metadata(c[2]) is None)
        or from_user_metadata(c[2]) is not None
    ]
    assert wrong == [], wrong
    wrong = [c for c in staging if c[1] == "WRITE" and from_user_metadata(c[2]) is None]
    assert wrong == [], wrong
    # What landed is rows 1..n, none missing.
    rows = read_target(spark, project, "a", "id")
    assert [r["v"] for r in rows] == [f"v{i}" for i in range(1, len(rows) + 1)]
