"""Land the row segments of many small targets at once (`WRITE_ROUND`): ONE Spark job writes
every target's new files, then ONE commit per target (delta-rs) swaps them for its old
files and carries its marker.

Why: a target's fixed cost on the other paths is a Spark query of its own (planning,
analysis, a job: about a second), whatever its size (benchmarks/README.md). Here the query
is the same for 3 targets or 300 (`round_query`), each target's rows are merged and written
by Arrow inside that job's tasks (`round_arrow`), and what a target adds is its commit.

Exactly once, as the rewrite (`rewrite`), whose folders, orphan removal and commit this
reuses: a target's new file goes into a folder of its own (`rs-<version>-<id>/`) that no
reader sees until its commit names it; each commit is the table's next version, made after
the run lease is checked, and carries the new marker. A run killed after the job and before
some commit leaves those targets and their markers as they were (their folders are removed
by the next run, before it writes: `rewrite.remove_orphans`), and the next run redoes them.

A target the round does not write lands by the rewrite, which has the same rules: one whose
table delta-rs cannot load now, one with a row whose value does not fit (the rewrite applies
`on_bad_message`), one whose commit failed, and all of them when the job failed (said on
the run's output). Must not: choose which segments take the round (the plan did), or write
a target whose plan did not send it here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ticdc_sync.core.crash_points import reach
from ticdc_sync.core.window import Marker
from ticdc_sync.plan.model import Rows
from ticdc_sync.spark.apply import round_arrow
from ticdc_sync.spark.apply.rewrite import Table
from ticdc_sync.spark.apply.round_arrow import RESULT, SAME, WRITTEN, TargetFiles
from ticdc_sync.spark.apply.round_query import RoundSegment, round_changes
from ticdc_sync.spark.apply.rows import TargetWriter
from ticdc_sync.spark.staging.state import State
from ticdc_sync.warehouse.lease import LeaseLost


@dataclass
class RoundItem:
    """One target's segment in a round: its writer, its marker before, the segment."""

    writer: TargetWriter
    marker: Marker
    step: Rows


@dataclass
class _Entry:
    item: RoundItem
    table: Table
    files: TargetFiles
    segment: RoundSegment
    listed: list[tuple[str, int]]  # the table's files (path, bytes) when the round began


def land(spark: SparkSession, state: State, items: Sequence[RoundItem]) -> list[Marker | None]:
    """Each item's new marker when the round landed its segment; None for an item the round
    did not write (the caller lands it by the rewrite). Raises `LeaseLost` only."""
    out: list[Marker | None] = [None] * len(items)
    entries: dict[int, _Entry] = {}
    for tid, item in enumerate(items):
        entry = _entry(tid, item)
        if isinstance(entry, Marker):
            out[tid] = entry
        elif entry is not None:
            entries[tid] = entry
    if not entries:
        return out
    facts = {tid: e.files for tid, e in entries.items()}
    segments = [e.segment for e in entries.values()]
    try:
        changes = round_changes(spark, state.staging.events(spark), segments)
        rows = changes.groupBy("tid").applyInArrow(round_arrow.task(facts), RESULT).collect()
    except Exception as e:  # noqa: BLE001 - each target then lands by the rewrite
        _remove_folders(entries.values())
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        items[0].writer.out(
            f"  the round of {len(entries)} target(s) failed ({first}); each lands by the "
            "rewrite instead"
        )
        return out
    first = next(iter(entries.values()))
    reach("round.files", partial_in=f"{first.table.location.rstrip('/')}/{first.files.folder}")
    by_tid = {int(r["tid"]): r for r in rows}
    for tid, e in entries.items():
        out[tid] = _commit(e, by_tid.get(tid))
    return out


def _entry(tid: int, item: RoundItem) -> _Entry | Marker | None:
    """What the round needs of one target; its marker when it has nothing to land (no table
    of the segment has a schema); None when the round does not write it."""
    w, step = item.writer, item.step
    if step.error is not None:
        return None
    if not step.tables:
        return item.marker
    try:
        table = Table(w.location)
    except Exception:  # noqa: BLE001 - the rewrite says why (or waits for the create)
        return None
    own = w.own_columns()
    names = [c.name for c in table.columns]
    upstream = [(c.name, c.type) for c in table.columns if c.name not in own]
    lower = [n.lower() for n in names]
    listed = table.files()
    try:
        for c in table.columns:
            round_arrow.arrow_type(c.type)
        keys = tuple(lower.index(k.lower()) for k in step.keys)
        commit_ts = lower.index("_commit_ts")
    except ValueError:
        return None  # a type the round does not carry, or a key that is not a column
    files = TargetFiles(
        tid=tid,
        uri=table.uri,
        options=tuple(sorted(table.options.items())),
        folder=f"rs-{table.version + 1:020d}-{uuid.uuid4().hex}",
        files=tuple(p for p, _ in listed),
        columns=tuple((c.name, c.physical, c.type) for c in table.columns),
        values=tuple(names.index(n) for n, _ in upstream),
        keys=keys,
        commit_ts=commit_ts,
    )
    segment = RoundSegment(
        tid=tid,
        source=w.source,
        step=step,
        columns=tuple(upstream),
        ignored=tuple(w.plan.entry.ignore_columns),
    )
    return _Entry(item, table, files, segment, listed)


def _commit(e: _Entry, row) -> Marker | None:
    """Commit one target's written file (or only its marker); None when the round did not
    land it."""
    item, table = e.item, e.table
    w, step = item.writer, item.step
    new_marker = Marker(step.hi, item.marker.ddl_ts, item.marker.ddl_part, item.marker.ddl_parts)
    status = SAME if row is None else row["status"]
    try:
        if status == SAME:
            # Nothing changed (replays only, or no row in the window): record the marker.
            table.record_marker(new_marker, w.name)
            w.result.merges += 1
            return new_marker
        if status != WRITTEN:
            return None  # a row that does not fit: the rewrite applies the policy
        new = [(row["path"], int(row["size"]), int(row["rows"]))]
        table.replace_files(e.listed, new, new_marker, "round.commit", w.name)
    except LeaseLost:
        raise
    except Exception:  # noqa: BLE001 - not committed: the rewrite lands it (or says why)
        with suppress(Exception):
            table.delete(e.files.folder)
        return None
    w.result.inserted += int(row["inserted"])
    w.result.updated += int(row["updated"])
    w.result.deleted += int(row["deleted"])
    w.result.merges += 1
    return new_marker


def _remove_folders(entries) -> None:
    for e in entries:
        with suppress(Exception):
            e.table.delete(e.files.folder)
