"""Stop a run at a named crash point in the shared session, as a process death would, and
resume it: the in-JVM stand-in for SIGKILL that `ticdc_sync.core.crash_points` makes possible.

`run_resuming` runs a project once with one point armed: when the run stops there
(`SimulatedCrash`), the JVM forgets what a dead process's JVM would not keep (`abandon`:
Delta's cached logs, Spark's cached data, the run's global views), and a new run in the
same session resumes, as `ticdc-sync run` started again would. `facts` is what a test
compares with an uninterrupted play: every target's rows and marker, the sync points (each
one read back at its version), every target read as of the latest resolved TSO, the
quarantine, each source's staged positions, and that no file a crash left is visible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deltalake import DeltaTable

from tests.spark.engine_harness import load
from ticdc_sync.core import crash_points
from ticdc_sync.core.crash_points import SimulatedCrash
from ticdc_sync.spark import runner
from ticdc_sync.warehouse.locations import state_location, target_location, warehouse_path


def abandon(spark) -> None:
    """What a process death takes with it: Delta's cached logs (`DeltaLog.clearCache`),
    Spark's cached data, and the global views the run made (its shared windows)."""
    jvm = spark._jvm
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    spark.catalog.clearCache()
    # SHOW VIEWS, not `catalog.listTables`: the latter decodes every entry into a Table,
    # and fails on some that other tests of the shared session leave (session-catalog
    # tables of tests/spark/test_catalog_session.py among them).
    for r in spark.sql("SHOW VIEWS IN global_temp").collect():
        if r["namespace"] == "global_temp":
            spark.catalog.dropGlobalTempView(r["viewName"])


@dataclass
class Play:
    """How one run (and its resumption) went."""

    outcomes: list[str] = field(default_factory=list)  # `crashed at ...`, `exit 0`
    fired: bool = False
    reached: list[tuple[str, str | None]] = field(default_factory=list)  # (point, target)


def run_resuming(
    spark, root: Path, point: str | None = None, *, nth: int = 1, target: str | None = None
) -> Play:
    """`ticdc-sync run` of the project at `root` in the shared session, with `point` armed
    (the `nth` reach, for `target`) or, without one, recording the points it reaches; after
    a crash there, the JVM forgets what a dead process's would (`abandon`) and a new run
    resumes. Every run but a crashed one must exit 0."""
    play = Play()
    while True:
        project = load(root)
        if point is not None and not play.fired:
            arming = crash_points.armed(point, nth=nth, target=target)
        else:
            arming = crash_points.recording()
        with arming as a:
            try:
                code = runner.run(project, spark=spark, out=lambda s: None)
            except SimulatedCrash as e:
                play.outcomes.append(f"crashed at {e}")
                play.fired = True
                abandon(spark)
                continue
            finally:
                play.reached.extend(a.reached)
        play.outcomes.append(f"exit {code}")
        assert code == 0, play.outcomes
        return play


def _rows(table: DeltaTable) -> tuple[list[str], list[tuple]]:
    """A Delta table's columns (sorted) and rows (as text, sorted), read by delta-rs."""
    data = table.to_pyarrow_table()
    cols = sorted(data.column_names)
    rows = data.select(cols).to_pylist()
    return cols, sorted(tuple(str(r[c]) for c in cols) for r in rows)


def facts(spark, root: Path, targets: Sequence[str]) -> dict:
    """What an interrupted play must leave as an uninterrupted one does (see the module).
    The tables are read by delta-rs, a reader other than Spark: it reads every file the log
    names and only those, so a file a crash left is no part of what it sees."""
    from ticdc_sync.core.lake import LakeTable
    from ticdc_sync.core.window import Marker
    from ticdc_sync.read import sync_points as sp
    from ticdc_sync.spark.as_of import as_of
    from ticdc_sync.warehouse import read as warehouse

    project = load(root)
    wh = warehouse_path(project)
    out: dict = {"targets": {}, "sync_points": [], "quarantine": [], "resolved": {}}
    for name in targets:
        loc = target_location(wh, name)
        cols, rows = _rows(DeltaTable(loc))
        m = LakeTable(loc).newest_user_metadata(Marker.from_user_metadata)
        out["targets"][name] = {
            "columns": cols,
            "rows": rows,
            "marker": None if m is None else (m.applied_ts, m.ddl_ts, m.ddl_part, m.ddl_parts),
            "uncommitted_rewrite_folders": _uncommitted_rewrites(loc),
        }
    # Each sync point's TSO and target, and the target's rows read at its version (the
    # versions themselves may differ: a resumed run can take more commits to get there).
    recorded = LakeTable(sp.location(project))
    for r in sorted(
        recorded.read().to_pylist() if recorded.exists() else [],
        key=lambda r: (r["source"], r["tso"], r["target"]),
    ):
        at = DeltaTable(target_location(wh, r["target"]), version=r["version"])
        out["sync_points"].append((r["source"], r["tso"], r["target"], _rows(at)[1]))
    quarantine = LakeTable(state_location(wh, "quarantine"))
    if quarantine.exists():
        out["quarantine"] = sorted(
            (r["source"], r["topic"], r["partition"], r["offset"], r["idx"], r["reason"])
            for r in quarantine.read().to_pylist()
        )
    # Every target read as of the latest resolved TSO (its version with the staged changes
    # after it, merged as an apply would): the reader every consistent read goes through.
    read = as_of(spark, project, "latest", list(targets))
    out["as_of"] = (read.at.tso, {})
    for name, frame in sorted(read.frames.items()):
        cols = sorted(frame.columns)
        out["as_of"][1][name] = sorted(tuple(str(r[c]) for c in cols) for r in frame.collect())
    state = warehouse.read_state(project)
    # Each partition's staged position and watermark.
    out["resolved"] = {
        name: sorted((k, p.last_offset, p.progress_ts) for k, p in s.tally.partitions.items())
        for name, s in sorted(state.sources.items())
    }
    return out


def _uncommitted_rewrites(location: str) -> list[str]:
    """Rewrite folders (`rs-<version>-...`) in the target that no commit of the log names:
    files a crash left where a reader of the folder could see them."""
    from ticdc_sync.spark.apply.rewrite import FOLDER

    folder = Path(location)
    log = "".join(p.read_text() for p in sorted((folder / "_delta_log").glob("*.json")))
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_dir() and FOLDER.match(p.name) and p.name not in log
    )


def assert_same_facts(got: dict, want: dict, outcomes: list[str]) -> None:
    """`got` equals `want` (`facts`), each difference named."""
    for name, w in want["targets"].items():
        g = got["targets"][name]
        for key in ("columns", "marker", "uncommitted_rewrite_folders"):
            assert g[key] == w[key], (name, key, g[key], w[key], outcomes)
        missing = sorted(set(w["rows"]) - set(g["rows"]))
        extra = sorted(set(g["rows"]) - set(w["rows"]))
        assert g["rows"] == w["rows"], (name, "missing", missing, "extra", extra, outcomes)
    g_sp = {sp[:3]: sp[3] for sp in got["sync_points"]}
    w_sp = {sp[:3]: sp[3] for sp in want["sync_points"]}
    assert len(g_sp) == len(got["sync_points"]), ("a sync point twice", outcomes)
    assert sorted(g_sp) == sorted(w_sp), ("sync points", sorted(g_sp), sorted(w_sp), outcomes)
    for key, rows in w_sp.items():
        assert g_sp[key] == rows, ("sync point", key, g_sp[key], rows, outcomes)
    assert got["as_of"][0] == want["as_of"][0], ("as_of latest TSO", outcomes)
    for name, rows in want["as_of"][1].items():
        assert got["as_of"][1][name] == rows, ("as_of latest", name, outcomes)
    q_missing = sorted((Counter(want["quarantine"]) - Counter(got["quarantine"])).elements())
    q_extra = sorted((Counter(got["quarantine"]) - Counter(want["quarantine"])).elements())
    assert got["quarantine"] == want["quarantine"], (
        "quarantine",
        "missing",
        q_missing,
        "extra",
        q_extra,
        outcomes,
    )
    assert got["resolved"] == want["resolved"], (
        "staged positions",
        got["resolved"],
        want["resolved"],
        outcomes,
    )
