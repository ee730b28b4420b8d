"""Staging one source in Spark: read its records after the staged positions, decode them and
append them to the staging table in one commit (`stage_source`), and settle its open bad
records by their tables' policy (`resolve_bad_records`).

`spark.engine` calls these for each poll of the run loop. Knows nothing of the lease,
signals, `--follow` or run_results.json (`runner`), nor of targets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ticdc_sync.core.model import Project, TransportKind

if TYPE_CHECKING:
    from ticdc_sync.spark.runtime.progress import RunProgress

Out = Callable[[str], None]

# A poll of at most this many Kafka records, or a capture-files source of at most this many
# bytes (a files poll reads every file), is staged without code generation
# (`conf.INTERPRETED`): a `--follow` poll holds a few thousand records, and compiling the
# decode and the staging write's code again costs more than running it (Spark keeps 100
# compiled classes, and the targets' MERGEs push the staging's out). Larger batches keep
# code generation: interpreted, a catch-up's decode of a million records is slower.
SMALL_POLL_RECORDS = 10_000
SMALL_POLL_BYTES = 8 << 20
# A poll of at most this many records (or capture bytes) is kept in memory while it is
# staged, so that its aggregate is taken before the write and its one commit carries its
# own tallies (`Staging.stage`). Keeping a catch-up batch costs more than reading it back
# from the staging table after the write (a million records: about 4 s more of staging,
# benchmarks/README.md), which then costs a second, empty commit for the tallies.
KEEP_POLL_RECORDS = 100_000
KEEP_POLL_BYTES = 64 << 20


def _at_most(records: int | None, capture_bytes: int | None, most: int, most_bytes: int) -> bool:
    """Whether a poll holds at most `most` Kafka records, or else at most `most_bytes` of
    capture files; unknown sizes do not."""
    if records is not None:
        return records <= most
    return capture_bytes is not None and capture_bytes <= most_bytes


def small_poll(records: int | None, capture_bytes: int | None) -> bool:
    """Whether a poll is small enough to stage interpreted (`SMALL_POLL_RECORDS`)."""
    return _at_most(records, capture_bytes, SMALL_POLL_RECORDS, SMALL_POLL_BYTES)


def kept_poll(records: int | None, capture_bytes: int | None) -> bool:
    """Whether a poll is small enough to keep while staged (`KEEP_POLL_RECORDS`)."""
    return _at_most(records, capture_bytes, KEEP_POLL_RECORDS, KEEP_POLL_BYTES)


def labels_phase(spark, text: str):
    from ticdc_sync.spark.runtime import labels

    return labels.phase(spark, text)


def stage_source(
    project: Project, spark, state, source, out: Out, progress: RunProgress | None = None
) -> tuple[int, int | None]:
    """Read the source's records after the staged positions, decode and stage them in one
    commit; the number of events staged, and of Kafka records read (None for capture
    files: counting them would take a pass of its own)."""
    from ticdc_sync.spark.runtime import labels
    from ticdc_sync.spark.runtime.conf import INTERPRETED, session_confs
    from ticdc_sync.spark.runtime.progress import RunProgress
    from ticdc_sync.spark.staging.decode import decode_records
    from ticdc_sync.spark.transports import sources as sources_mod

    progress = progress or RunProgress()
    phase = f"stage {source.name}"
    capture_bytes = sources_mod.capture_bytes(project, source)
    with (
        labels_phase(spark, phase),
        progress.phase(
            phase,
            groups=[phase],
            read_job=labels.read_job(source.name),
            bytes_total=capture_bytes,
        ),
    ):
        t = time.monotonic()
        tally = state.staging.tally(source.name)
        consumed = tally.consumed()
        # Sources without commit_ts keep their approximate order rising across batches.
        floors = {
            k: p.progress_ts for k, p in tally.partitions.items() if p.progress_ts is not None
        }
        sized: list[int] = []

        def on_size(records: int) -> None:
            sized.append(records)
            progress.sized(records)

        records = sources_mod.read_records(spark, project, source, consumed, on_size=on_size)
        decoded = decode_records(records, source, floors, seeded=project.seed_schemas)
        # Overlapping capture files may hold a record twice; Kafka never repeats an offset.
        may_repeat = project.output.transport.kind is TransportKind.FILES
        size = sized[-1] if sized else None
        small = small_poll(size, capture_bytes)
        try:
            with (
                sources_mod.balanced_splits(spark, project, source),
                session_confs(spark, INTERPRETED if small else {}),
            ):
                staged = state.staging.stage(
                    source.name,
                    decoded,
                    may_repeat=may_repeat,
                    keep=kept_poll(size, capture_bytes),
                )
        except Exception as e:  # noqa: BLE001 - a bad capture line, raised inside the job
            raise sources_mod.read_failure(spark, project, source, e) from None
        out(
            f"read+decode {source.name}: {staged} new event(s) staged ({time.monotonic() - t:.1f}s)"
        )
        return staged, size


def resolve_bad_records(project: Project, state, source, s_res: dict, out: Out) -> list[str]:
    """Quarantine the open bad records whose table's policy says so (`Project.quarantines`);
    the error lines for the others, which stop their partitions just before them."""
    tables = state.quarantine.open_tables(source.name)
    to_quarantine = [(db, t) for db, t in tables if project.quarantines(source.name, db, t)]
    n = state.quarantine.quarantine_open_bad(source.name, to_quarantine)
    if n:
        out(f"  {source.name}: {n} undecodable record(s) quarantined")
        s_res["quarantined"] = n
    errors = []
    for b in state.quarantine.open_bad_records(source.name):
        table = f" table {b['db']}.{b['tbl']}" if b["tbl"] else ""
        entry = project.route(source.name, b["db"] or "", b["tbl"] or "") if b["tbl"] else None
        where = (
            f"on its table entry ({entry.origin.render()})"
            if entry
            else "in ticdc_sync.yml defaults"
        )
        msg = (
            f"{b['topic']}/{b['partition']}/{b['offset']}{table}: {b['error']} (hint: fix the "
            f"producer, or set `on_bad_message: quarantine` {where})"
        )
        errors.append(msg)
        out(f"error: {msg}")
    return errors
