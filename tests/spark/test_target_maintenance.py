"""Targets maintained by the run (`spark/apply/maintain.py`, `run/loop_maintenance.py`):
several runs apply batches to two targets by MERGE (`rewrite_below: 0`), each leaving new
small files. The runs' looks at their end compact the targets once they pass
`compact_small_files` and VACUUM them (`vacuum_every: 0`) with a retention of an hour, each
first stopped at its crash point and resumed:
every target's rows exact, fewer files, and a read as of each earlier batch's TSO exact
(nothing inside a 10-minute retention deleted). Then a run with `retain: 0` VACUUMs the removed
files away: the rows still exact, the disk down to the live files, and a read older than the
retention refused with the setting's name.
"""

from __future__ import annotations

import time

import pytest

from tests.spark.crash_harness import run_resuming
from tests.spark.engine_harness import (
    canal_row,
    collect_each,
    load,
    make_project,
    read_target,
    write_captures,
)
from tests.spark.engine_harness import canal_watermark as wm
from ticdc_sync.core.errors import UserError
from ticdc_sync.spark import runner
from ticdc_sync.spark.apply import maintain
from ticdc_sync.spark.apply.maintain import _removed_bytes
from ticdc_sync.spark.as_of import as_of
from ticdc_sync.spark.runtime.delta_log import data_size
from ticdc_sync.warehouse.locations import local_path, target_location, warehouse_path

pytestmark = pytest.mark.spark

TABLES = ("a", "b")
SCHEMA = "".join(f"CREATE TABLE shop.{t} (id INT PRIMARY KEY, v VARCHAR(20));\n" for t in TABLES)
TYPES = {"id": "int", "v": "varchar(20)"}
RUNS = 4


def _defaults(retain: str, vacuum_every: str, compact: int = 4) -> str:
    return (
        f"defaults:\n  rewrite_below: 0\n  maintenance:\n    compact_small_files: {compact}\n"
        f"    vacuum_every: {vacuum_every}\n    retain: {retain}\n"
    )


class Upstream:
    """Canal-JSON records of the two tables, their TSOs ten minutes ago and on, ten seconds apart, and the rows
    each table holds after each batch."""

    def __init__(self, root) -> None:
        self.root = root
        self.ts = (int(time.time() * 1000) - 600_000) << 18
        self.offset = 0
        self.truth: dict[str, dict[int, str]] = {t: {} for t in TABLES}
        self.marks: list[tuple[int, dict[str, dict[int, str]]]] = []

    def batch(self, keys: range, tag: str) -> None:
        """Each table's rows `keys` written (inserted or updated), then a watermark."""
        records = []
        self.ts += 10_000 << 18
        for t in TABLES:
            for i in keys:
                self.ts += 1 << 18
                v = f"{t}{tag}-{i}"
                old = self.truth[t].get(i)
                kind, before = ("INSERT", None) if old is None else ("UPDATE", {"v": old})
                rec = canal_row("shop", t, kind, self.ts, _r(i, v), TYPES, ["id"], before)
                records.append((0, self.offset, None, rec))
                self.offset += 1
                self.truth[t][i] = v
        self.ts += 1 << 18
        records.append((0, self.offset, None, wm(self.ts)))
        self.offset += 1
        write_captures(self.root, "t", records)
        self.marks.append((self.ts, {t: dict(rows) for t, rows in self.truth.items()}))


@pytest.mark.e2e
def test_runs_compact_and_vacuum_targets_keeping_every_read_inside_the_retention(
    spark, tmp_path, monkeypatch
):
    root = make_project(
        tmp_path, protocol="canal-json", schema_sql=SCHEMA, defaults=_defaults("1h", "1h", 1000)
    )
    project = load(root)
    up = Upstream(root)
    lines: list[str] = []
    wh = warehouse_path(project)
    # Batches of new keys: each MERGE adds files, none is removed; the targets are new, so
    # no VACUUM is due (`vacuum_every` 1h), and no compaction (`compact_small_files` 1000)
    # until the last run, due one at 4 files (each MERGE added one at least). That run
    # stops at the first compaction's commit point, as a kill would stop it, and a run
    # resumes (`crash_harness.run_resuming`): it compacts both.
    for run in range(RUNS - 1):
        up.batch(range(run * 10, run * 10 + 10), str(run))
        assert runner.run(project, spark=spark, out=lines.append) == 0
    assert "compacted" not in "\n".join(lines) and "vacuumed" not in "\n".join(lines)
    up.batch(range((RUNS - 1) * 10, RUNS * 10), "last")
    _configure(root, "1h", "1h")
    play = run_resuming(spark, root, "maintenance.compact")
    assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
    for t in TABLES:
        files, _ = data_size(spark, target_location(wh, t))
        assert files < 4, f"{t}: {files} files after compaction"
        assert _rows(read_target(spark, project, t, "id")) == up.truth[t]
        assert "OPTIMIZE" in _operations(spark, target_location(wh, t))

    # Updates, and a VACUUM at each look keeping 10 minutes: nothing a read needs is
    # deleted. (Delta rounds a VACUUM's RETAIN to whole hours: sent as 0.166667 hours, 10
    # minutes kept nothing, and these reads failed; it is sent as 1 hour.)
    _configure(root, "10m", "0")
    project = load(root)
    up.batch(range(5, 15), "u")
    play = run_resuming(spark, root, "maintenance.vacuum", target="a")
    assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
    for t in TABLES:
        assert "VACUUM END" in _operations(spark, target_location(wh, t)), t
    for at, held in up.marks:
        read = as_of(spark, project, at, list(TABLES))
        got = collect_each([read.frames[t] for t in TABLES])
        for t, rows in zip(TABLES, got, strict=True):
            assert _rows(rows) == held[t], (t, at)
    for t in TABLES:
        loc = target_location(wh, t)
        assert _rows(read_target(spark, project, t, "id")) == up.truth[t]
        assert (_removed_bytes(loc, data_size(spark, loc)[1]) or 0) > 0, t

    # A retention of 0: the next look's VACUUM deletes every removed file.
    _configure(root, "0", "0")
    project = load(root)
    # And a checkpoint at the look after any commit without one, stopped at its point too.
    # (Due whatever the log holds: Delta's own writer checkpoints every tenth version, so
    # the look's newest version may have one already.)
    monkeypatch.setattr(maintain, "CHECKPOINT_AFTER", 1)
    monkeypatch.setattr(maintain, "_last_checkpoint", lambda location: -1)
    play = run_resuming(spark, root, "maintenance.checkpoint")
    assert play.fired and play.outcomes[-1] == "exit 0", play.outcomes
    for t in TABLES:
        log = local_path(target_location(wh, t)) / "_delta_log"
        assert (log / "_last_checkpoint").exists(), t
    for t in TABLES:
        loc = target_location(wh, t)
        assert _rows(read_target(spark, project, t, "id")) == up.truth[t]
        assert _removed_bytes(loc, data_size(spark, loc)[1]) == 0, t
    latest = as_of(spark, project, up.marks[-1][0], ["a"])
    assert _rows(collect_each([latest.frames["a"]])[0]) == up.truth["a"]
    with pytest.raises(UserError, match="maintenance.retain"):
        as_of(spark, project, up.marks[0][0], ["a"])


def _operations(spark, location: str) -> set[str]:
    return {r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{location}`").collect()}


def _configure(root, retain: str, vacuum_every: str, compact: int = 4) -> None:
    (root / "ticdc_sync.yml").write_text(
        f"name: test\nprofile: test\n{_defaults(retain, vacuum_every, compact)}"
    )


def _r(i: int, v: str) -> dict:
    return {"id": str(i), "v": v}


def _rows(rows: list[dict]) -> dict[int, str]:
    return {int(r["id"]): r["v"] for r in rows}
