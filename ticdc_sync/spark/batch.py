"""One batch of `ticdc-sync run`: stage every source (read, decode, append to the staging
table in one commit), settle its open bad records, build the Plan from the warehouse state
with the tallies just computed, execute it (`executor`), then trim the staging table.

Fills the batch's run_results body as it goes. Knows nothing of the lease, signals,
`--follow` or run_results.json (that is `runner`), and decides nothing about targets: the
plan does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ticdc_sync import routing
from ticdc_sync.errors import UserError
from ticdc_sync.model import Project, TransportKind

if TYPE_CHECKING:
    from ticdc_sync.spark.progress import RunProgress

Out = Callable[[str], None]


def run_once(
    project: Project,
    spark,
    state,
    *,
    select: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    out: Out = print,
    saved: dict | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    progress: RunProgress | None = None,
    result: dict | None = None,
    reload: tuple[str, ...] = (),
    force: bool = False,
):
    """One batch: stage every source, plan, execute. Fills `result` (the run_results
    body) as it goes; when `should_stop` says so it stops before the next source or step
    and returns what it did."""
    from ticdc_sync import warehouse
    from ticdc_sync.plan import build_plan
    from ticdc_sync.plan.saved import hold_unreviewed
    from ticdc_sync.spark import executor
    from ticdc_sync.spark.progress import RunProgress

    progress = progress or RunProgress()
    t0 = time.monotonic()
    result = result if result is not None else {}
    result.clear()
    result.update({"project": project.name, "sources": {}, "targets": {}, "errors": []})
    exit_code = 0
    tallies, capped = {}, {}
    for source in project.sources:
        if should_stop():
            return _stopped(result, t0, exit_code)
        s_res: dict = {}
        s_res["staged_events"] = stage_source(project, spark, state, source, out, progress)
        result["sources"][source.name] = s_res
        phase = f"resolve {source.name}"
        with labels_phase(spark, phase), progress.phase(phase, groups=[phase]):
            errors = resolve_bad_records(project, state, source, s_res, out)
            result["errors"].extend(errors)
            exit_code = 1 if errors else exit_code
            tally = state.staging.tally(source.name)
            tallies[source.name] = tally
            if not tally.partitions:
                topics = ", ".join(source.topics) or f"pattern {source.topic_pattern}"
                out(
                    f"warning: source {source.name} has read nothing from its topics ever ({topics})"
                )
            open_bad = state.quarantine.first_open(source.name) if tally.bad else {}
            parts = state.staging.partitions(source.name, open_bad)
            capped[source.name] = {
                (p.topic, p.partition): state.staging.capped_watermark(source.name, p)
                for p in parts
                if p.first_bad_offset is not None
            }
    if should_stop():
        return _stopped(result, t0, exit_code)
    with labels_phase(spark, "plan"), progress.phase("plan", groups=["plan"]):
        plan = build_plan(
            project,
            warehouse.read_state(project, tallies=tallies, progress=capped),
            reload=reload,
            force=force,
        )
        if saved is not None:
            plan = hold_unreviewed(plan, saved)
    names = [t.name for t in plan.targets]
    if select and not any(executor.selected(n, select) for n in names):
        raise UserError(
            f"--select {' '.join(select)} matches no target (targets: {', '.join(names) or 'none'})"
            " (hint: `ticdc-sync plan` lists them; globs like 'canal_*' work)"
        )
    for sp in plan.sources:
        s_res = result["sources"][sp.source.name]
        s_res["resolved_ts"] = sp.resolved_ts
        # Where the next run continues: the last staged offset of each partition.
        s_res["partitions"] = {
            f"{topic}/{part}": pt.last_offset
            for (topic, part), pt in sorted(tallies[sp.source.name].partitions.items())
        }
        if sp.skipped:
            s_res["skipped_tables"] = {f"{db}.{t}": n for db, t, n in sp.skipped}
            out(
                f"  {sp.source.name}: skipped {sum(n for *_, n in sp.skipped)} row change(s) of "
                "unrouted tables " + ", ".join(f"{db}.{t}" for db, t, _ in sp.skipped)
            )
        if sp.resolved_ts is not None:
            out(
                f"  {sp.source.name}: resolved ts {sp.resolved_ts} over {sp.partitions} partition(s)"
            )
        for note in sp.notes:
            out(f"  {sp.source.name}: {note}")
    chosen = [t.name for t in plan.targets if executor.selected(t.name, select, exclude)]
    for t in plan.targets:
        for note in t.notes:
            if t.name in chosen:
                out(f"  {t.name}: {note}")
    with progress.phase("apply", groups=[f"apply {n}" for n in chosen], targets_total=len(chosen)):
        targets, errors = executor.execute(
            spark,
            state,
            project,
            plan,
            select=select,
            exclude=exclude,
            out=out,
            should_stop=should_stop,
            on_step=progress.step,
        )
    result["targets"] = targets
    result["errors"].extend(errors)
    if errors:
        exit_code = 1
    if not should_stop():  # trimming can wait for the next run
        with labels_phase(spark, "retention"), progress.phase("retention", groups=["retention"]):
            tidy_staging(project, state, plan, targets, result, out)
    result["seconds"] = round(time.monotonic() - t0, 3)
    result["phases"] = progress.take_seconds()
    out(
        f"done: {len(result['targets'])} target(s), {len(result['errors'])} error(s) "
        f"in {result['seconds']:.1f}s"
    )
    return exit_code, result


def _stopped(result: dict, t0: float, exit_code: int) -> tuple[int, dict]:
    result["seconds"] = round(time.monotonic() - t0, 3)
    return exit_code, result


def tidy_staging(project: Project, state, plan, targets: dict, result: dict, out: Out) -> None:
    """Delete staged events every target has applied once they are older than the retention
    (`retention.trim_bound` decides), and compact the staging table when it has many files."""
    from ticdc_sync.retention import trim_bound

    names = [s.name for s in project.sources]
    for sp in plan.sources:
        applied = [
            targets[t.name]["applied_ts"] if t.name in targets else t.marker.applied_ts
            for t in plan.targets
            if t.source == sp.source.name
        ]
        bound = trim_bound(applied, sp.resolved_ts, project.staging_retention_ms, sp.open_bad)
        if bound is None or not _may_trim(state, sp.source.name, bound):
            continue
        n = state.staging.trim(names, sp.source.name, bound)
        if n:
            result["sources"][sp.source.name]["trimmed_events"] = n
            out(f"  {sp.source.name}: {n} applied event(s) older than the retention deleted")
    if state.staging.compact(names):
        out("  staging table compacted")


def _may_trim(state, source: str, bound: int) -> bool:
    """Whether the staging table may hold an event `Staging.trim` would delete. Asked of
    delta-rs, which answers from the files' statistics without a Spark job (the staged
    events of a warehouse younger than the retention never are); where it cannot answer,
    the trim runs and finds out itself."""
    from ticdc_sync.events import KIND_EMPTY, KIND_ROW, KIND_WATERMARK
    from ticdc_sync.lake import LakeTable

    where = [
        ("source", "=", source),
        ("kind", "in", [KIND_ROW, KIND_WATERMARK, KIND_EMPTY]),
        ("commit_ts", "<=", int(bound)),
    ]
    try:
        return LakeTable(state.staging.events_path).read(["commit_ts"], where, limit=1).num_rows > 0
    except Exception:  # noqa: BLE001 - only a shortcut: Spark's DELETE decides
        return True


def labels_phase(spark, text: str):
    from ticdc_sync.spark import labels

    return labels.phase(spark, text)


def stage_source(
    project: Project, spark, state, source, out: Out, progress: RunProgress | None = None
) -> int:
    """Read the source's records after the staged positions, decode and stage them in one
    commit; the number of events staged."""
    from ticdc_sync.spark import labels
    from ticdc_sync.spark import sources as sources_mod
    from ticdc_sync.spark.decode import decode_records
    from ticdc_sync.spark.progress import RunProgress

    progress = progress or RunProgress()
    phase = f"stage {source.name}"
    with (
        labels_phase(spark, phase),
        progress.phase(
            phase,
            groups=[phase],
            read_job=labels.read_job(source.name),
            bytes_total=sources_mod.capture_bytes(project, source),
        ),
    ):
        t = time.monotonic()
        tally = state.staging.tally(source.name)
        consumed = tally.consumed()
        # Sources without commit_ts keep their approximate order rising across batches.
        floors = {
            k: p.progress_ts for k, p in tally.partitions.items() if p.progress_ts is not None
        }
        records = sources_mod.read_records(spark, project, source, consumed, on_size=progress.sized)
        decoded = decode_records(records, source, floors, seeded=project.seed_schemas)
        # Overlapping capture files may hold a record twice; Kafka never repeats an offset.
        may_repeat = project.output.transport.kind is TransportKind.FILES
        try:
            with sources_mod.balanced_splits(spark, project, source):
                staged = state.staging.stage(source.name, decoded, may_repeat=may_repeat)
        except Exception as e:  # noqa: BLE001 - a bad capture line, raised inside the job
            raise sources_mod.read_failure(spark, project, source, e) from None
        out(
            f"read+decode {source.name}: {staged} new event(s) staged ({time.monotonic() - t:.1f}s)"
        )
        return staged


def resolve_bad_records(project: Project, state, source, s_res: dict, out: Out) -> list[str]:
    """Quarantine the open bad records whose table's policy says so (`routing.quarantines`);
    the error lines for the others, which stop their partitions just before them."""
    tables = state.quarantine.open_tables(source.name)
    to_quarantine = [
        (db, t) for db, t in tables if routing.quarantines(project, source.name, db, t)
    ]
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
