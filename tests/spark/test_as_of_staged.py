"""What a read as of a TSO reads of the staged changes: only the pages of the target's tables
in (its version's applied ts, the TSO], not every table's changes of the window, nor what was
staged before the version (`staging.table.LAYOUT`, `PAGE_ROWS`); and those as of the staging
version where they were counted, so that its frames keep their rows when a later run trims
them (`spark.as_of._Staged`).

Eight tables, applied once; then a batch of row changes per table (1,000 each), interleaved as
the upstream commits them, staged and not applied. The read of one target is checked through
the staging scan's metrics in its executed plan (files and rows the scan produced), not
timing; its rows against the upstream's; again after the staging table is compacted; and
against the target a run applies afterwards. Then, with `staging.retention: 0s`, a read's
frame computed again after a run applied and trimmed its pending changes.
"""

from __future__ import annotations

import pytest

from tests.spark.engine_harness import canal_row, load, make_project, write_captures
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.spark import runner
from ticdc_sync.spark.as_of import as_of, register_views
from ticdc_sync.spark.staging.state import State
from ticdc_sync.spark.staging.table import PAGE_ROWS, Staging
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = pytest.mark.spark

TABLES = [f"t{i}" for i in range(8)]
SCHEMA = "".join(f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v VARCHAR(20));\n" for t in TABLES)
TYPES = {"id": "int", "v": "varchar(20)"}
TARGET = "t5"


class History:
    """Canal-JSON records of the eight tables on one partition, and each table's rows."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.ts = 1_700_000_000_000 << 18  # a TSO: milliseconds above 18 logical bits
        self.truth: dict[str, dict[int, str]] = {t: {} for t in TABLES}

    def _add(self, value: bytes) -> None:
        self.records.append((0, len(self.records), None, value))

    def changes(self, per_table: int) -> None:
        """`per_table` changes of every table, interleaved, a watermark every 250 rounds
        and at the end: inserts, then updates and deletes of the keys 0-39."""
        for n in range(per_table):
            for t in TABLES:
                self.ts += 1 << 18
                rows, i = self.truth[t], n % 40
                if i not in rows:
                    v = f"{t}-{n}"
                    self._add(canal_row("shop", t, "INSERT", self.ts, _r(i, v), TYPES, ["id"]))
                    rows[i] = v
                elif n % 7 == 0:
                    old = _r(i, rows.pop(i))
                    self._add(canal_row("shop", t, "DELETE", self.ts, old, TYPES, ["id"]))
                else:
                    v, old = f"{t}-u{n}", {"v": rows[i]}
                    self._add(canal_row("shop", t, "UPDATE", self.ts, _r(i, v), TYPES, ["id"], old))
                    rows[i] = v
            if n % 250 == 249 or n == per_table - 1:
                self.ts += 1 << 18
                self._add(wm(self.ts))


def _r(i: int, v: str) -> dict:
    return {"id": str(i), "v": v}


def _project(tmp_path, defaults: str = ""):
    root = make_project(tmp_path, protocol="canal-json", schema_sql=SCHEMA, defaults=defaults)
    return root, load(root)


def _stage_only(spark, project) -> None:
    from tests.spark.test_as_of import _stage_only as stage

    stage(spark, project)


def scans(df) -> list[dict]:
    """Each file scan of `df`'s executed plan (run first): its location's text, the files it
    read and the rows it produced (after Parquet's page index skipped what it could)."""
    df.collect()
    found: list[dict] = []

    def walk(node) -> None:
        name = node.nodeName()
        if "AdaptiveSparkPlan" in name:
            return walk(node.executedPlan())
        if "QueryStage" in name:
            return walk(node.plan())
        if name.startswith("Scan"):
            m = node.metrics()
            found.append(
                {
                    "location": node.relation().location().toString(),
                    "files": int(m.apply("numFiles").value()),
                    "rows": int(m.apply("numOutputRows").value()),
                }
            )
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    return found


def staging_scan(df) -> dict:
    (scan,) = [s for s in scans(df) if "_ticdc_sync/events" in s["location"]]
    return scan


def test_a_read_scans_only_its_tables_pages_after_its_version(spark, tmp_path):
    root, project = _project(tmp_path)
    h = History()
    h.changes(10)
    write_captures(root, "t", h.records)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    applied = len(h.records)
    per_table = 1000
    h.changes(per_table)  # staged only
    write_captures(root, "t", h.records[applied:])
    _stage_only(spark, project)
    staged = len(h.records) - applied

    def check_read(when: str) -> None:
        read = as_of(spark, project, "latest", [TARGET])
        assert read.at.tso == h.ts and read.pending[TARGET] == per_table, when
        df = read.frames[TARGET]
        assert {r["id"]: r["v"] for r in df.collect()} == h.truth[TARGET], when
        scan = staging_scan(df)
        # Every table's changes of the window are in the same files; the pages of the
        # target's table are what the scan reads: its rows and at most a page each side.
        assert per_table <= scan["rows"] <= per_table + 2 * PAGE_ROWS, (when, scan)
        assert scan["rows"] < staged / 2, (when, scan)
        # The applied batch's files are skipped by their commit_ts statistics.
        assert scan["files"] == 1, (when, scan)

    check_read("staged")
    # Compacted into one file with the applied batch's: the pages still hold a table's
    # changes together, and the file is read for the target's pages only.
    staging = Staging(spark, warehouse_path(project))
    staging.compact(spark)
    assert len(spark.read.format("delta").load(staging.events_path).inputFiles()) == 1
    check_read("compacted")

    # What a run applies is what the read gave.
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    read = as_of(spark, project, "latest", [TARGET])
    assert read.pending[TARGET] == 0
    assert {r["id"]: r["v"] for r in read.frames[TARGET].collect()} == h.truth[TARGET]


def test_a_read_keeps_its_rows_when_a_run_trims_the_changes_it_read(spark, tmp_path):
    root, project = _project(tmp_path, defaults="staging:\n  retention: 0s\n")
    h = History()
    h.changes(10)
    write_captures(root, "t", h.records)
    assert runner.run(project, spark=spark, out=lambda s: None) == 0
    applied = len(h.records)
    h.changes(40)
    write_captures(root, "t", h.records[applied:])
    _stage_only(spark, project)
    read = as_of(spark, project, "latest", [TARGET])
    assert read.pending[TARGET] == 40
    df = read.frames[TARGET]
    assert {r["id"]: r["v"] for r in df.collect()} == h.truth[TARGET]
    # A run applies the changes the read merged and deletes them from the staging table.
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0
    assert "applied event(s) older than the retention deleted" in "\n".join(lines)
    staging = State(spark, warehouse_path(project)).staging
    assert staging.events().where(f"kind = 'row' AND tbl = '{TARGET}'").count() == 0
    # A query of the frame (planned anew, unlike a second `collect` of the same frame,
    # which keeps its plan and the files it listed): the target's version the read chose,
    # and the changes staged after it as the read found them, trimmed or not.
    assert {r["id"]: r["v"] for r in df.select("id", "v").collect()} == h.truth[TARGET]
    register_views(spark, read)
    got = spark.sql(f"SELECT id, v FROM {TARGET}").collect()
    assert {r["id"]: r["v"] for r in got} == h.truth[TARGET]
