"""`ticdc-sync run`: stage what the sources hold, build the plan, execute it.

First the run takes the warehouse's run lease (`ticdc_sync.warehouse.lease`), before Spark starts, so
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
signals, the `--follow` loop, run_results.json and where the run's metrics go (`_Metrics`:
served while it holds the lease, written or pushed when it ends). It decides nothing about
targets: the plan does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Project, TransportKind
from ticdc_sync.spark.staging.batch import Out

if TYPE_CHECKING:
    from ticdc_sync.core.console import Console
    from ticdc_sync.core.interrupts import Interrupts
    from ticdc_sync.run.loop import LoopResult, StopRequest
    from ticdc_sync.run.metrics_export import MetricsOptions
    from ticdc_sync.spark.runtime.progress import RunProgress
    from ticdc_sync.warehouse.lease import RunLease


# A trim raises a source's bound, and its DELETE then rewrites staging files beside the
# polls: not every poll, but often enough that a `--follow` run's staging stays small (30
# polls: a minute at the default 2 s).
TRIM_EVERY_POLLS = 30


def run_session(
    project: Project,
    jvm_output: Callable[[str], None] | None = None,
    session_id: str | None = None,
):
    """The session for `project`'s profile output; the JVM's output to `jvm_output`
    (`session_id`: the id of a Spark Connect session, `remote.session_id`)."""
    from ticdc_sync.spark.runtime.session import build_session, catalog_conf
    from ticdc_sync.warehouse.locations import warehouse_path

    spark = build_session(
        project.output,
        kafka=project.output.transport.kind is TransportKind.KAFKA,
        # A Spark Connect server's catalog is the server's to configure.
        extra_conf=(
            None
            if project.output.spark_remote
            else catalog_conf(project.output, warehouse_path(project))
        ),
        jvm_output=jvm_output,
        session_id=session_id,
    )
    if jvm_output is None and not project.output.spark_remote:
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
    stop_request: StopRequest | None = None,
    metrics: MetricsOptions | None = None,
) -> int:
    """Consume what is available, apply what is resolved, exit (or keep going with follow).

    `saved_plan`: (text, where) of a plan saved with `plan --format json --out`; it is
    executed only if it is what a plan made now does (`plan.saved`). `out` takes the
    run's lines; `console` (the CLI's) also takes Spark's output, shows progress, and
    makes a plain run stop at the next step on Ctrl-C (at once on the second); with
    `follow` it prints one line per batch, the details going to the log. `wait`:
    seconds to wait for the warehouse's run lease while another run holds it (default:
    the profile's `run_lease.wait_seconds`). `reload`/`force`: targets to load again from
    their export (`plan.build_plan`). `stop_request`: lets the caller stop the run as the
    first Ctrl-C does (a notebook, a test: `StopRequest.request()` from any thread).
    `metrics`: where the run's Prometheus metrics go (`run.metrics_export`): served while
    the run holds the lease, written to a file after each `--follow` poll and at the end,
    pushed at the end. Returns the exit code: 0, 1 (errors), 130 (interrupted)."""
    from ticdc_sync.core.interrupts import Interrupts
    from ticdc_sync.run.loop import LoopResult, StopRequest
    from ticdc_sync.spark.runtime.progress import RunProgress
    from ticdc_sync.warehouse.lease import RunLease
    from ticdc_sync.warehouse.locations import warehouse_path

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
    partial = LoopResult()  # what the run has done so far, for an interrupted run
    stop_request = stop_request or StopRequest()
    t0 = time.monotonic()
    watch = _Metrics.of(project, follow, lease, metrics, console or out)

    def first(signum: int) -> None:
        stop_request.request()
        if follow:
            out(
                f"warning: received signal {signum}: no more staging; the targets being "
                "applied finish their current step, then the run stops (a second signal "
                "stops at once)"
            )
        else:
            (console or out)(
                "warning: interrupted: stopping after the current step "
                "(press Ctrl-C again to stop at once)"
            )

    def abort() -> None:
        write_results(project, _failed(project, KeyboardInterrupt(), partial, t0))
        lease.release()
        if console is not None:
            console.final(
                "interrupted: stopped at once; what was committed stays (run again to go on)"
            )

    # A plain run started outside the CLI keeps Python's Ctrl-C (KeyboardInterrupt).
    handled = follow or console is not None
    stop = Interrupts(first, abort, term=follow) if handled else None
    # The lease first: a second run is refused before it spends time starting a JVM.
    with (
        watch.exported(partial) if watch is not None else nullcontext(),
        lease,
        watch.served() if watch is not None else nullcontext(),
        stop if stop is not None else nullcontext(),
    ):
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
                    stop_request=stop_request,
                    reloading=reloading,
                    metrics=watch,
                    lease=lease,
                ),
                spark,
            )
        finally:
            if console is not None:
                console.progress_off()


def _check_saved_plan(project: Project, text: str, where: str, **reloading) -> dict:
    """The saved plan, if a plan made now (before anything is staged) is that plan."""
    from ticdc_sync.plan import build_plan, check_saved, load_saved
    from ticdc_sync.warehouse import read as warehouse

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
    partial: LoopResult  # what the run has done so far, for an interrupted run
    stop_request: StopRequest  # fed by the first Ctrl-C / SIGTERM (`stop`)
    reloading: dict  # reload= and force= (`_Replan`)
    metrics: _Metrics | None = None  # where the run's metrics go
    lease: RunLease | None = None  # the run lease this run holds


class _Metrics:
    """A run's metrics (`run.metrics.RunMetrics`) and where they go (`run.metrics_export`):
    served while the run holds its lease, written or pushed once it ends."""

    def __init__(self, project: Project, follow: bool, lease, options, say: Out) -> None:
        from ticdc_sync.run.metrics import RunMetrics

        self.project = project
        self.follow = follow
        self.options = options
        self.say = say
        self.metrics = RunMetrics(project.name, follow=follow, lease_held=lease.held)
        self.acquired = False

    @classmethod
    def of(cls, project: Project, follow: bool, lease, options, say: Out) -> _Metrics | None:
        return cls(project, follow, lease, options, say) if options and options.wanted else None

    @contextmanager
    def served(self) -> Iterator[None]:
        """Inside the lease: serve the metrics (if asked) until the run ends."""
        from ticdc_sync.run.metrics_export import MetricsServer

        if self.options.port is None:
            self.acquired = True
            yield
            return
        # A port taken is an error before the run does anything (and exports nothing).
        server = MetricsServer(self.metrics.registry, self.options)
        self.acquired = True
        self.say(f"metrics: {server.url}")
        try:
            yield
        finally:
            server.stop()

    @contextmanager
    def exported(self, result: LoopResult) -> Iterator[None]:
        """Around the lease: once the run ends (and its lease is released), its metrics
        to the file and the Pushgateway asked for. Not for a run that never took the
        lease: it did nothing, and its file would replace the running one's."""
        from ticdc_sync.run.metrics_export import export

        try:
            yield
        finally:
            if self.acquired:
                self.metrics.ended(result)
                export(self.metrics.registry, self.options, self.grouping(), self.say)

    def polled(self, summary, result: LoopResult) -> None:
        from ticdc_sync.run.metrics_export import export

        self.metrics.polled(summary, result)
        if self.follow and self.options.file is not None:
            # The textfile collector reads the newest poll (a push waits for the end).
            export(self.metrics.registry, replace(self.options, push=None), {}, self.say)

    def grouping(self) -> dict[str, str]:
        """The Pushgateway group: one per project and profile target."""
        return {"project": self.project.name, "profile_target": self.project.output.name}


def _run_locked(r: _Run, spark) -> int:
    """The run loop (`loop.run_loop`) over a Spark engine: plain runs stage once and apply
    everything resolved; `--follow` polls until stopped."""
    t0 = time.monotonic()
    built = spark is None
    if spark is None:
        with r.progress.phase("starting Spark"):
            spark = _start_session(r)
        if r.stop is not None:
            r.stop.reinstall()
    try:
        return _run_with(r, spark, t0)
    finally:
        if built:
            _end_session(spark)


def _start_session(r: _Run):
    """The run's session. Over Spark Connect its id comes from the lease's token, and what
    a killed run that held the lease before left running on the server is stopped first
    (`remote.stop_orphans`): it may still commit, and this run must read the state after."""
    remote = r.project.output.spark_remote
    if not remote or r.lease is None:
        return run_session(r.project, r.console.jvm_line if r.console is not None else None)
    from ticdc_sync.spark.runtime import remote as connect

    spark = run_session(r.project, session_id=connect.session_id(r.lease.token))
    if r.lease.taken_over is not None:
        connect.stop_orphans(remote, r.lease.taken_over.token, r.out)
    return spark


def _end_session(spark) -> None:
    """A Spark Connect session (and the ones beside it, `fanout`) is released on the server
    at the end of the run: what it holds there would otherwise stay until it times out. A
    classic session ends with the process."""
    from ticdc_sync.spark.runtime import fanout
    from ticdc_sync.spark.runtime.remote import is_connect

    if is_connect(spark):
        fanout.release_all(spark)
        spark.stop()


def _run_with(r: _Run, spark, t0: float) -> int:
    """The loop over the session `spark`."""
    from ticdc_sync.core.interrupts import EXIT_INTERRUPTED
    from ticdc_sync.plan.project_parts import output_dict
    from ticdc_sync.run.loop import Settings, run_loop
    from ticdc_sync.spark.apply.executor import selected
    from ticdc_sync.spark.engine import SparkEngine
    from ticdc_sync.spark.runtime import labels
    from ticdc_sync.spark.staging.state import State

    r.progress.attach(spark)
    with labels.phase(spark, "open state"), r.progress.phase("open state", groups=["open state"]):
        state = State(spark, r.warehouse)
    # The plan decides how many targets are applied at once (`plan.workers.apply_workers`).
    workers = int(output_dict(r.project)["apply_workers"])
    replan = _Replan(r)
    engine = SparkEngine(
        r.project,
        spark,
        state,
        out=r.out,
        progress=r.progress,
        follow=r.follow,
        side_by_side=workers > 1,
        on_step=r.progress.step,
        on_first_apply=replan.applying,
        trace=r.console.trace if r.console is not None else None,
    )
    settings = Settings(
        sources=r.project.sources,
        workers=workers,
        follow=r.follow,
        poll_seconds=r.poll_seconds,
        max_polls=r.max_batches,
        trim_every_seconds=TRIM_EVERY_POLLS * r.poll_seconds,
        retention_ms=r.project.staging_retention_ms,
        sync_every_ms=r.project.sync_every_ms,
        selected=lambda name: selected(name, r.select, r.exclude),
    )

    def on_poll(summary, res) -> None:
        body = _results(r.project, res, t0, "ok" if res.code == 0 else "blocked or failed")
        body["phases"] = r.progress.seconds()
        write_results(r.project, body)
        if r.metrics is not None:
            r.metrics.polled(summary, res)
        if r.follow and r.console is not None:
            r.console.result(summary.line())
        elif r.follow:
            r.out(summary.line())

    try:
        res = run_loop(
            engine,
            replan,
            settings,
            stop=r.stop_request,
            out=r.out,
            on_poll=on_poll,
            result=r.partial,
            on_stage=r.metrics.metrics.staged if r.metrics is not None else None,
            on_apply=r.metrics.metrics.applied if r.metrics is not None else None,
        )
    except BaseException as e:
        write_results(r.project, _failed(r.project, e, r.partial, t0))
        if isinstance(e, KeyboardInterrupt) and r.stop_request.level:
            _interrupted(r.console, r.out)
            return EXIT_INTERRUPTED
        raise
    finally:
        replan.done()
        engine.close(at_once=r.stop_request.level >= 2)
    interrupted = res.interrupted and not r.follow
    outcome = "interrupted" if interrupted else "blocked or failed" if res.code else "ok"
    body = _results(r.project, res, t0, outcome)
    body["phases"] = r.progress.seconds()
    write_results(r.project, body)
    if not r.follow:
        r.out(
            f"done: {len(body['targets'])} target(s), {len(body['errors'])} error(s) "
            f"in {body['seconds']:.1f}s"
        )
    if interrupted:
        _interrupted(r.console, r.out)
        return EXIT_INTERRUPTED
    return res.code


class _Replan:
    """`loop`'s re-planner for this run: `plan.build_plan` over the loop's state (a
    `plan.Planner`, which plans again only what each fold changed), with what this run was
    asked (`--reload` until those targets are loaded, the saved plan's DDL held back,
    `--select` checked), printing each note of the plan once."""

    def __init__(self, r: _Run) -> None:
        self.r = r
        self.first = True
        self.reload = tuple(r.reloading.get("reload", ()))
        self.force = bool(r.reloading.get("force", False))
        self.reload_from: dict[str, int | None] = {}  # reloaded target -> its version before
        self.printed: set[str] = set()
        # Each target's plan whose notes were printed: an unchanged one (the planner keeps
        # the plan of a target an apply did not touch) is not looked at again.
        self.noted: dict[str, object] = {}
        self.chosen: list[str] = []
        self.picked: dict[str, bool] = {}  # target -> whether --select/--exclude take it
        self.held: dict = {}  # `hold_unreviewed`'s memo over this run's plans
        self.apply_phase = None
        from ticdc_sync.plan import Planner

        self.planner = Planner(r.project)

    def __call__(self, ws):
        from ticdc_sync.plan.saved import hold_unreviewed
        from ticdc_sync.spark.apply.executor import selected

        r = self.r
        if not self.first:
            # A target reloaded by this run has committed since the first plan (its load):
            # later plans take it as it now stands.
            self.reload = tuple(
                n for n in self.reload if ws.target(n).version == self.reload_from.get(n)
            )
            self.force = self.force and bool(self.reload)
        if self.first:
            # The first plan reads every target's schema history: a phase a user waits on.
            with r.progress.phase("plan"):
                plan = self.planner.plan(ws, reload=self.reload, force=self.force)
        else:
            plan = self.planner.plan(ws, reload=self.reload, force=self.force)
        if r.saved is not None:
            plan = hold_unreviewed(plan, r.saved, self.held)
        if self.first:
            self.first = False
            names = [t.name for t in plan.targets]
            if r.select and not any(selected(n, r.select) for n in names):
                raise UserError(
                    f"--select {' '.join(r.select)} matches no target (targets: "
                    f"{', '.join(names) or 'none'}) (hint: `ticdc-sync plan` lists them; globs "
                    "like 'canal_*' work)"
                )
            # The patterns become the targets they reload, each until its reload commits.
            self.reload = tuple(t.name for t in plan.targets if t.load and t.load.reload)
            self.reload_from = {n: ws.target(n).version for n in self.reload}
            self.force = self.force and bool(self.reload)
        for t in plan.targets:
            if t.name not in self.picked:
                self.picked[t.name] = selected(t.name, r.select, r.exclude)
        self.chosen = [t.name for t in plan.targets if self.picked[t.name]]
        self._notes(plan)
        return plan

    def _notes(self, plan) -> None:
        out = self.r.out
        lines = []
        for sp in plan.sources:
            if sp.skipped:
                lines.append(
                    f"  {sp.source.name}: skipped {sum(n for *_, n in sp.skipped)} row "
                    "change(s) of unrouted tables "
                    + ", ".join(f"{db}.{t}" for db, t, _ in sp.skipped)
                )
            if sp.resolved_ts is not None:
                lines.append(
                    f"  {sp.source.name}: resolved ts {sp.resolved_ts} over {sp.partitions} "
                    "partition(s)"
                )
            lines += [f"  {sp.source.name}: {note}" for note in sp.notes]
        chosen = set(self.chosen)
        for t in plan.targets:
            if t.name in chosen and self.noted.get(t.name) is not t:
                self.noted[t.name] = t
                lines += [f"  {t.name}: {note}" for note in t.notes]
        for line in lines:
            if line not in self.printed:
                self.printed.add(line)
                out(line)

    def applying(self) -> None:
        """The first apply of the run begins: a plain run's progress shows the apply phase."""
        if self.apply_phase is None and not self.r.follow:
            self.apply_phase = self.r.progress.begin(
                "apply",
                groups=[f"apply {n}" for n in self.chosen],
                targets_total=len(self.chosen),
            )

    def done(self) -> None:
        if self.apply_phase is not None:
            self.r.progress.end(self.apply_phase)
            self.apply_phase = None


def _results(project: Project, res, t0: float, outcome: str) -> dict:
    """The run_results body of the loop's results so far."""
    return {
        "project": project.name,
        "outcome": outcome,
        **res.as_results(),
        "seconds": round(time.monotonic() - t0, 3),
    }


def _interrupted(console: Console | None, out: Out) -> None:
    line = (
        "interrupted: stopped after the current step; what was committed stays (run again to go on)"
    )
    (console.error if console is not None else out)(line)


def _failed(project: Project, e: BaseException, res, t0: float) -> dict:
    """The run_results of a run that ended with `e` (interrupted, or an error), with what
    the loop had done (`res`)."""
    outcome = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
    body = _results(project, res, t0, outcome)
    body["errors"] = [
        *body["errors"],
        _first_line(e) if isinstance(e, Exception) else "interrupted",
    ]
    return body


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


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
