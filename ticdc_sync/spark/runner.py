"""`ticdc-sync run`: stage what the sources hold, build the plan, execute it.

First the run takes the warehouse's run lease (`ticdc_sync.lease`), before Spark starts, so
that a second run anywhere is refused (or waits) at once; it holds the lease to the end.
Per run (or micro-batch with `--follow`): read each source's records after the staged
positions (capture files or Kafka), decode them in Spark and append them to the staging
table in one commit; move undecodable records to the quarantine where their table's policy
says so; then read the warehouse state (`warehouse.read_state`, with the tallies just
computed) and build the Plan (`plan.build_plan`), the same one `ticdc-sync plan` shows, and
execute it (`executor`). With `--plan FILE`, the plan saved by `plan --out` is executed
only if the plan made from the project and warehouse as they are before staging is that
plan; DDL that arrives during the run waits for the next plan. Writes
`target/run_results.json` after every run or batch, also one that failed or was
interrupted (`outcome`). Each phase's Spark jobs carry its name (`labels.phase`) and
each phase is reported to the progress display (`progress.RunProgress`). Ctrl-C stops a
plain run before its next step (at once on the second one). One batch's work (stage,
plan, execute, trim) is `batch`; this module is the run around it: the lease, the session,
signals, the `--follow` loop and run_results.json. It decides nothing about targets: the
plan does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ticdc_sync.model import Project, TransportKind
from ticdc_sync.spark.batch import Out, run_once

if TYPE_CHECKING:
    from ticdc_sync.console import Console
    from ticdc_sync.interrupts import Interrupts
    from ticdc_sync.spark.progress import RunProgress


def _session(project: Project, jvm_output: Callable[[str], None] | None = None):
    """The session for `project`'s profile output; the JVM's output to `jvm_output`."""
    from ticdc_sync.spark.session import build_session

    spark = build_session(
        project.output,
        kafka=project.output.transport.kind is TransportKind.KAFKA,
        jvm_output=jvm_output,
    )
    if jvm_output is None:
        # No log file to keep Spark's warnings in: keep them off the terminal.
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(
    project: Project,
    *,
    select: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    follow: bool = False,
    out: Out | None = None,
    spark=None,
    poll_seconds: float = 2.0,
    max_batches: int | None = None,
    saved_plan: tuple[str, str] | None = None,
    console: Console | None = None,
    wait: float | None = None,
    reload: tuple[str, ...] = (),
    force: bool = False,
) -> int:
    """Consume what is available, apply what is resolved, exit (or keep going with follow).

    `saved_plan`: (text, where) of a plan saved with `plan --format json --out`; it is
    executed only if it is what a plan made now does (`plan.saved`). `out` takes the
    run's lines; `console` (the CLI's) also takes Spark's output, shows progress, and
    makes a plain run stop at the next step on Ctrl-C (at once on the second); with
    `follow` it prints one line per batch, the details going to the log. `wait`:
    seconds to wait for the warehouse's run lease while another run holds it (default:
    the profile's `run_lease.wait_seconds`). `reload`/`force`: targets to load again from
    their export (`plan.build_plan`), in the first batch only.
    Returns the exit code: 0, 1 (errors), 130 (interrupted)."""
    from ticdc_sync.interrupts import Interrupts
    from ticdc_sync.lease import RunLease
    from ticdc_sync.locations import warehouse_path
    from ticdc_sync.spark.progress import RunProgress

    if out is None:
        out = console.detail if console is not None else print
    wh = warehouse_path(project)
    saved = None
    reloading = {"reload": reload, "force": force}
    if saved_plan is not None:
        saved = _check_saved_plan(project, *saved_plan, **reloading)
    progress = RunProgress(spark, console)
    lease = RunLease(
        wh,
        ttl=project.output.run_lease_ttl,
        wait=project.output.run_lease_wait if wait is None else wait,
        out=out,
    )
    partial: dict = {}  # the batch's run_results so far, for an interrupted run

    def first(signum: int) -> None:
        if follow:
            out(
                f"warning: received signal {signum}: finishing the current batch, then "
                "stopping (a second signal stops at once)"
            )
        else:
            (console or out)(
                "warning: interrupted: stopping after the current step "
                "(press Ctrl-C again to stop at once)"
            )

    def abort() -> None:
        write_results(project, _failed(project, KeyboardInterrupt(), partial))
        lease.release()
        if console is not None:
            console.final(
                "interrupted: stopped at once; what was committed stays (run again to go on)"
            )

    # A plain run started outside the CLI keeps Python's Ctrl-C (KeyboardInterrupt).
    handled = follow or console is not None
    stop = Interrupts(first, abort, term=follow) if handled else None
    # The lease first: a second run is refused before it spends time starting a JVM.
    with lease, stop if stop is not None else nullcontext():
        if console is not None:
            console.progress_from(progress.line)
        try:
            return _run_locked(
                _Run(
                    project=project,
                    warehouse=wh,
                    select=select,
                    exclude=exclude,
                    follow=follow,
                    out=out,
                    poll_seconds=poll_seconds,
                    max_batches=max_batches,
                    saved=saved,
                    stop=stop,
                    progress=progress,
                    console=console,
                    partial=partial,
                    reloading=reloading,
                ),
                spark,
            )
        finally:
            if console is not None:
                console.progress_off()


def _check_saved_plan(project: Project, text: str, where: str, **reloading) -> dict:
    """The saved plan, if a plan made now (before anything is staged) is that plan."""
    from ticdc_sync import warehouse
    from ticdc_sync.plan import build_plan, check_saved, load_saved

    saved = load_saved(text, where)
    check_saved(saved, build_plan(project, warehouse.read_state(project), **reloading), where)
    return saved


@dataclass(frozen=True)
class _Run:
    """What `run` was asked to do, and the parts it set up before Spark starts."""

    project: Project
    warehouse: str
    select: tuple[str, ...]
    exclude: tuple[str, ...]
    follow: bool
    out: Out
    poll_seconds: float
    max_batches: int | None
    saved: dict | None
    stop: Interrupts | None
    progress: RunProgress
    console: Console | None
    partial: dict  # the batch's run_results so far, for an interrupted run
    reloading: dict  # reload= and force= for the first batch's plan


def _run_locked(r: _Run, spark) -> int:
    from ticdc_sync.interrupts import EXIT_INTERRUPTED
    from ticdc_sync.spark import labels
    from ticdc_sync.spark.state import State

    def stopping() -> bool:
        return r.stop is not None and r.stop.requested

    if spark is None:
        with r.progress.phase("starting Spark"):
            spark = _session(r.project, r.console.jvm_line if r.console is not None else None)
        if r.stop is not None:
            r.stop.reinstall()
    r.progress.attach(spark)
    with labels.phase(spark, "open state"), r.progress.phase("open state", groups=["open state"]):
        state = State(spark, r.warehouse)
    batches = 0
    code, failures = 0, 0
    while True:
        # A plain run stops between steps when asked; --follow finishes its batch.
        step_stop = (lambda: False) if r.follow else stopping
        try:
            if step_stop():
                raise KeyboardInterrupt
            code, result = run_once(
                r.project,
                spark,
                state,
                select=r.select,
                exclude=r.exclude,
                out=r.out,
                saved=r.saved,
                should_stop=step_stop,
                progress=r.progress,
                result=r.partial,
                **(r.reloading if batches == 0 else {}),
            )
        except BaseException as e:
            # --follow outlives a Kafka outage: a batch that failed reading Kafka staged
            # nothing (staging is one commit), so it is simply read again.
            if (
                not r.follow
                or stopping()
                or not isinstance(e, Exception)
                or not _kafka_unavailable(r.project, e)
            ):
                write_results(r.project, _failed(r.project, e, r.partial))
                if isinstance(e, KeyboardInterrupt) and stopping():
                    _interrupted(r.console, r.out)
                    return EXIT_INTERRUPTED
                raise
            failures += 1
            wait = min(FOLLOW_MAX_BACKOFF_S, r.poll_seconds * 2**failures)
            r.out(
                f"warning: Kafka unavailable ({_first_line(e)}); nothing was staged "
                f"from this batch; retrying in {wait:.0f}s (attempt {failures})"
            )
            _sleep_unless(stopping, wait)
            if stopping():
                return code
            continue
        failures = 0
        interrupted = not r.follow and stopping()
        result["outcome"] = "interrupted" if interrupted else "blocked or failed" if code else "ok"
        write_results(r.project, result)
        batches += 1
        if r.follow and r.console is not None:
            r.console.result(batch_line(batches, result))
        if interrupted:
            _interrupted(r.console, r.out)
            return EXIT_INTERRUPTED
        if not r.follow or stopping() or (r.max_batches is not None and batches >= r.max_batches):
            return code
        _sleep_unless(stopping, r.poll_seconds)
        if stopping():
            return code


def _interrupted(console: Console | None, out: Out) -> None:
    line = (
        "interrupted: stopped after the current step; what was committed stays (run again to go on)"
    )
    (console.error if console is not None else out)(line)


def batch_line(n: int, result: dict) -> str:
    """The one line `run --follow` prints per batch: events staged, targets' applied ts
    (the lowest; how far behind the wall clock it is) and the batch's time."""
    from ticdc_sync.status import tso_wall_time

    staged = sum(s.get("staged_events", 0) for s in result["sources"].values())
    applied = [
        t["applied_ts"] for t in result["targets"].values() if t.get("applied_ts") is not None
    ]
    low = min(applied) if applied else None
    lag = "-"
    if low is not None and low > 0:
        lag = f"{max(0.0, time.time() - (low >> 18) / 1000):.1f}s"
    errors = len(result.get("errors") or [])
    return (
        f"batch {n}: {staged} event(s) staged, {len(result['targets'])} target(s) at ts "
        f"{low if low is not None else '-'} ({tso_wall_time(low)}), lag {lag}, "
        f"{errors} error(s), {result.get('seconds', 0):.1f}s"
    )


def _failed(project: Project, e: BaseException, done: dict | None = None) -> dict:
    """The run_results of a run that ended with `e` (interrupted, or an error), with the
    sources and targets it had finished (`done`)."""
    outcome = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
    done = done or {}
    return {
        "project": project.name,
        "outcome": outcome,
        "errors": [
            *done.get("errors", []),
            _first_line(e) if isinstance(e, Exception) else "interrupted",
        ],
        "sources": dict(done.get("sources", {})),
        "targets": dict(done.get("targets", {})),
    }


FOLLOW_MAX_BACKOFF_S = 60.0


def _sleep_unless(stopping: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stopping():
        time.sleep(0.2)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def _kafka_unavailable(project: Project, e: Exception) -> bool:
    if project.output.transport.kind is not TransportKind.KAFKA:
        return False
    from ticdc_sync.spark.kafka import is_unavailable

    return is_unavailable(project.output.transport, e)


def write_results(project: Project, result: dict) -> None:
    """`target/run_results.json`: what the run did, written after every run or batch, also
    one that failed (`outcome`)."""
    folder = project.root / "target"
    folder.mkdir(parents=True, exist_ok=True)
    body = {"format_version": RESULTS_FORMAT, **result}
    tmp = folder / "run_results.json.tmp"
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(folder / "run_results.json")


RESULTS_FORMAT = 1
