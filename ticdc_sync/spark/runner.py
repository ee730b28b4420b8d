"""`ticdc-sync run` and `status`: read, decode, stage, then apply every resolved target.

Phases of a run, per source: read the records after the staged positions (capture files
or Kafka), decode them in Spark, append them to the staging table in one commit; then
compute the resolved TSO (min over partitions of the highest watermark, capped before any
open bad record) and bring each routed target up to it (`apply.TargetApplier`). A table
blocked by a DDL policy or a bad value stops alone; the run exits 1 naming it. The run
writes `target/run_results.json` and `target/state.json` (read by `plan`). Each phase's
Spark jobs carry its name (`labels.phase`: `open state`, `stage <source>`,
`resolve <source>`, `apply <target>`), in the Spark UI and in the event log.
"""

from __future__ import annotations

import fnmatch
import json
import signal
import time
from collections.abc import Callable

from ticdc_sync.errors import BlockedError, UserError
from ticdc_sync.model import BadMessagePolicy, Project, TransportKind

Out = Callable[[str], None]


def _session(project: Project):
    from ticdc_sync.spark.session import build_session

    spark = build_session(
        project.output, kafka=project.output.transport.kind is TransportKind.KAFKA
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(
    project: Project,
    *,
    select: tuple[str, ...] = (),
    follow: bool = False,
    out: Out = print,
    spark=None,
    poll_seconds: float = 2.0,
    max_batches: int | None = None,
) -> int:
    """Consume what is available, apply what is resolved, exit (or keep going with follow)."""
    from ticdc_sync.locations import warehouse_path
    from ticdc_sync.spark import labels
    from ticdc_sync.spark.lock import RunLock
    from ticdc_sync.spark.state import State

    spark = spark or _session(project)
    wh = warehouse_path(project)
    stop = {"now": False}
    if follow:

        def _stop(signum, _frame):
            out(f"received signal {signum}: finishing the current batch, then stopping")
            stop["now"] = True

        old = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with RunLock(wh):
            with labels.phase(spark, "open state"):
                state = State(spark, wh)
            batches = 0
            code, failures = 0, 0
            while True:
                try:
                    code, result = run_once(project, spark, state, select=select, out=out)
                except Exception as e:
                    # --follow outlives a Kafka outage: a batch that failed reading Kafka
                    # staged nothing (staging is one commit), so it is simply read again.
                    if not follow or stop["now"] or not _kafka_unavailable(project, e):
                        raise
                    failures += 1
                    wait = min(FOLLOW_MAX_BACKOFF_S, poll_seconds * 2**failures)
                    out(
                        f"warning: Kafka unavailable ({_first_line(e)}); nothing was staged "
                        f"from this batch; retrying in {wait:.0f}s (attempt {failures})"
                    )
                    _sleep_unless(stop, wait)
                    if stop["now"]:
                        return code
                    continue
                failures = 0
                write_results(project, result)
                batches += 1
                if (
                    not follow
                    or stop["now"]
                    or (max_batches is not None and batches >= max_batches)
                ):
                    return code
                _sleep_unless(stop, poll_seconds)
                if stop["now"]:
                    return code
    finally:
        if follow:
            for s, h in old.items():
                signal.signal(s, h)


FOLLOW_MAX_BACKOFF_S = 60.0


def _sleep_unless(stop: dict, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop["now"]:
        time.sleep(0.2)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def _kafka_unavailable(project: Project, e: Exception) -> bool:
    if project.output.transport.kind is not TransportKind.KAFKA:
        return False
    from ticdc_sync.spark.kafka import is_unavailable

    return is_unavailable(project.output.transport, e)


def run_once(project: Project, spark, state, *, select: tuple[str, ...], out: Out):
    from ticdc_sync.spark import labels
    from ticdc_sync.spark import sources as sources_mod
    from ticdc_sync.spark.apply import SchemaBook, TargetApplier
    from ticdc_sync.spark.decode import decode_records

    t0 = time.monotonic()
    result: dict = {"project": project.name, "sources": {}, "targets": {}, "errors": []}
    exit_code = 0
    with labels.phase(spark, "open state"):
        schemas = SchemaBook(state.history.schema_versions(), dict(project.seed_schemas))
    for source in project.sources:
        s_res: dict = {}
        result["sources"][source.name] = s_res
        with labels.phase(spark, f"stage {source.name}"):
            # Read + decode + stage.
            t = time.monotonic()
            tally = state.staging.tally(source.name)
            consumed = tally.consumed()
            # Sources without commit_ts keep their approximate order rising across batches.
            floors = {
                k: p.progress_ts for k, p in tally.partitions.items() if p.progress_ts is not None
            }
            records = sources_mod.read_records(spark, project, source, consumed)
            decoded = decode_records(records, source, floors, seeded=project.seed_schemas)
            # Overlapping capture files may hold a record twice; Kafka never repeats an offset.
            may_repeat = project.output.transport.kind is TransportKind.FILES
            try:
                with sources_mod.balanced_splits(spark, project, source):
                    staged = state.staging.stage(source.name, decoded, may_repeat=may_repeat)
            except Exception as e:  # noqa: BLE001 - a bad capture line, raised inside the job
                raise sources_mod.read_failure(spark, project, source, e) from None
            s_res["staged_events"] = staged
            out(
                f"read+decode {source.name}: {staged} new event(s) staged ({time.monotonic() - t:.1f}s)"
            )

        # Bad records, the resolved TSO, routes and target markers.
        with labels.phase(spark, f"resolve {source.name}"):
            # Bad records.
            if project.defaults.on_bad_message is BadMessagePolicy.QUARANTINE:
                n = state.quarantine.quarantine_open_bad(source.name)
                if n:
                    out(f"  {source.name}: {n} undecodable record(s) quarantined")
                s_res["quarantined"] = n
            bad = state.quarantine.open_bad_records(source.name)
            for b in bad:
                msg = (
                    f"{b['topic']}/{b['partition']}/{b['offset']}: {b['error']} (hint: fix the "
                    "producer, or set `on_bad_message: quarantine` in ticdc_sync.yml defaults)"
                )
                result["errors"].append(msg)
                out(f"error: {msg}")
                exit_code = 1

            # Resolved TSO.
            open_bad = (
                state.quarantine.first_open(source.name)
                if state.staging.tally(source.name).bad
                else {}
            )
            parts = state.staging.partitions(source.name, open_bad)
            if not parts:
                s_res["resolved_ts"] = None
                continue
            wms = [state.staging.capped_watermark(source.name, p) for p in parts]
            if source.has_commit_ts:
                resolved = -1 if any(w is None for w in wms) else min(wms)  # type: ignore[type-var]
            else:
                # No watermarks exist (codec facts 4.5): everything staged counts as resolved.
                known = [w for w in wms if w is not None]
                resolved = max(known) if known else -1
            s_res["resolved_ts"] = resolved
            s_res["partitions"] = {f"{p.topic}/{p.partition}": p.last_offset for p in parts}
            out(f"  {source.name}: resolved ts {resolved} over {len(parts)} partition(s)")

            # Routes.
            targets: dict[str, tuple] = {}
            skipped: dict[str, int] = {}
            for r in state.staging.upstream_tables(source.name):
                db, tbl = r["db"] or "", r["tbl"] or ""
                if not tbl:
                    continue  # schema-level DDL (CREATE DATABASE ...): nothing to route
                entry = project.route(source.name, db, tbl)
                if entry is None:
                    skipped[f"{db}.{tbl}"] = int(r["rows"])
                    continue
                name = entry.target_name(db, tbl)
                targets.setdefault(name, (entry, []))[1].append((db, tbl))
            for db, tbl in project.seed_schemas:
                entry = project.route(source.name, db, tbl)
                if entry is not None:
                    name = entry.target_name(db, tbl)
                    ups = targets.setdefault(name, (entry, []))[1]
                    if (db, tbl) not in ups:
                        ups.append((db, tbl))
            if skipped:
                s_res["skipped_tables"] = skipped
                out(
                    f"  {source.name}: skipped {sum(skipped.values())} row change(s) of unrouted tables "
                    + ", ".join(sorted(skipped))
                )
            if resolved < 0:
                out(f"  {source.name}: no watermark on every partition yet; nothing is resolved")
                continue
            from ticdc_sync.window import dedupe_ddl

            all_ddls = dedupe_ddl(state.staging.ddl_events(source.name, 2**63 - 1))
            ddls = [d for d in all_ddls if d.commit_ts <= resolved]
            result.setdefault("waiting_ddl", []).extend(
                waiting_ddl(
                    project, source.name, schemas, [d for d in all_ddls if d.commit_ts > resolved]
                )
            )
            appliers = []
            for name in sorted(targets):
                if select and not any(fnmatch.fnmatchcase(name, pat) for pat in select):
                    continue
                entry, ups = targets[name]
                applier = TargetApplier(
                    spark, state, project, source, entry, name, ups, schemas, out
                )
                applier.load_marker()
                appliers.append(applier)
        if apply_targets(spark, appliers, resolved, ddls, out, result):
            exit_code = 1
    result["seconds"] = round(time.monotonic() - t0, 3)
    out(
        f"done: {len(result['targets'])} target(s), {len(result['errors'])} error(s) "
        f"in {result['seconds']:.1f}s"
    )
    return exit_code, result


def apply_targets(spark, appliers: list, resolved: int, ddls: list, out: Out, result: dict) -> bool:
    """Bring every target up to `resolved`, side by side unless a DDL of the window may
    move rows between targets (`fanout`). Fills result["targets"] and result["errors"] in
    target order; True if a target is blocked or failed. An unexpected error is raised
    after every other target has finished."""
    from functools import partial

    from ticdc_sync.spark import fanout

    floor = min((a.marker.applied_ts for a in appliers), default=-1)
    side_by_side = len(appliers) > 1 and not fanout.may_cross_targets(ddls, floor)
    for applier in appliers if side_by_side else []:
        applier.rebind(fanout.target_session(spark), fanout.GroupedOut(out))
    tasks = [partial(_apply_target, a, resolved, ddls) for a in appliers]
    outcomes = fanout.run_all(tasks, side_by_side)
    failed = False
    crash: BaseException | None = None
    for applier, outcome in zip(appliers, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            crash = crash or outcome
            continue
        summary, errors = outcome
        result["targets"][applier.target] = summary
        result["errors"].extend(errors)
        failed = failed or bool(errors)
    if crash is not None:
        raise crash
    return failed


def _apply_target(applier, resolved: int, ddls: list) -> tuple[dict, list[str]]:
    """One target's apply: its run_results entry and its errors (blocked, or a user error)."""
    from ticdc_sync.spark import fanout, labels

    name, ups, out = applier.target, applier.upstreams, applier.out
    errors: list[str] = []
    t = time.monotonic()
    try:
        try:
            with labels.phase(applier.spark, f"apply {name}"):
                res = applier.run(resolved, ddls)
        except BlockedError as e:
            res = applier.result
            res.blocked = {"message": str(e), "pending": getattr(e, "pending", [])}
            errors.append(str(e))
            out(f"error: {e}")
        except UserError as e:
            res = applier.result
            res.error = str(e)
            errors.append(f"target {name}: {e}")
            out(f"error: target {name}: {e}")
        seconds = time.monotonic() - t
        out(
            f"apply {name}: +{res.inserted} ~{res.updated} -{res.deleted} in {res.merges} "
            f"merge(s), {len(res.ddl_applied)} DDL, applied ts {res.applied_ts} "
            f"({seconds:.1f}s)"
        )
    finally:
        if isinstance(out, fanout.GroupedOut):
            out.flush()
    summary = {
        "source": applier.source.name,
        "upstream": sorted(f"{d}.{t_}" for d, t_ in ups),
        "applied_ts": res.applied_ts,
        "inserted": res.inserted,
        "updated": res.updated,
        "deleted": res.deleted,
        "merges": res.merges,
        "ddl": res.ddl_applied,
        "blocked": res.blocked,
        "error": res.error,
        "quarantined": res.quarantined,
        "seconds": round(seconds, 3),
    }
    return summary, errors


def write_results(project: Project, result: dict) -> None:
    folder = project.root / "target"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_results.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    # plan.PlanState entries (upstream, kind, sql, commit_ts, ...), from spark/ddl_apply.
    pending = [
        p
        for _, t in sorted(result["targets"].items())
        for p in (t.get("blocked") or {}).get("pending", [])
    ]
    # DDL received but beyond the resolved TSO: the next runs will apply it.
    pending += sorted(result.get("waiting_ddl", []), key=lambda p: (p["commit_ts"], p["upstream"]))
    state = {
        "applied": {n: t["applied_ts"] for n, t in sorted(result["targets"].items())},
        "pending_ddl": pending,
    }
    (folder / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def waiting_ddl(project: Project, source: str, schemas, events) -> list[dict]:
    """plan.PlanState entries for DDL staged beyond the resolved TSO, classified by what
    it would do to Delta (additive / destructive / unsupported / no-change)."""
    from ticdc_sync import ddl as ddl_mod
    from ticdc_sync.spark.ddl_apply import statement_table

    out = []
    for e in events:
        entry = project.route(source, e.db, e.tbl) if e.tbl else None
        if entry is None:
            continue
        changes = []
        reason = None
        try:
            for stmt in ddl_mod.parse_ddl(e.sql, e.db or None, e.hint):
                db, tbl = statement_table(stmt, (e.db, e.tbl))
                _, ch = ddl_mod.apply_statement(schemas.at(db, tbl, e.commit_ts - 1), stmt)
                changes.extend(ch)
        except Exception as err:  # noqa: BLE001 - reported, never fatal for plan output
            reason = f"cannot classify yet: {err}"
        effects = {c.effect for c in changes}
        cls = next(
            (k for k in ("unsupported", "destructive", "additive") if k in effects), "no-change"
        )
        item = {
            "upstream": f"{e.db}.{e.tbl}",
            "target": entry.target_name(e.db, e.tbl),
            "kind": changes[0].kind.value if changes else "other",
            "sql": e.sql.strip(),
            "commit_ts": e.commit_ts,
            "classification": cls,
            "delta": "; ".join(c.describe() for c in changes) or "none",
        }
        if reason:
            item["reason"] = reason
        out.append(item)
    return out


def tso_wall_time(ts: int) -> str:
    """A TSO's physical part (ms since epoch, codec facts 1.1 `es`) as UTC text."""
    import datetime as dt

    if ts is None or ts < 0:
        return "-"
    return (
        dt.datetime.fromtimestamp((ts >> 18) / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[
            :-3
        ]
        + "Z"
    )


def status(project: Project, *, out: Out = print, spark=None, show: int = 0) -> int:
    """Per target: applied TSO and its wall time, pending events, blocked DDL, quarantine."""
    from pyspark.sql import functions as F

    from ticdc_sync.locations import target_location, warehouse_path
    from ticdc_sync.spark.delta_log import table_exists, target_marker
    from ticdc_sync.spark.state import State

    spark = spark or _session(project)
    wh = warehouse_path(project)
    state = State(spark, wh)
    last = {}
    results = project.root / "target" / "run_results.json"
    if results.exists():
        last = json.loads(results.read_text()).get("targets", {})
    ev = state.staging.events()
    q = state.quarantine.table()
    out(
        f"{'target':<28} {'applied ts':>20} {'applied at (UTC)':<24} {'pending':>8} {'quarantined':>11}  blocked"
    )
    names = sorted(set(last) | set(_known_targets(project)))
    for name in names:
        loc = target_location(wh, name)
        marker = target_marker(spark, loc) if table_exists(spark, loc) else None
        applied = marker.applied_ts if marker else -1
        info = last.get(name, {})
        ups = info.get("upstream", [])
        src = info.get("source")
        pending = 0
        quarantined = 0
        if ups and src:
            cond = F.lit(False)
            for u in ups:
                d, t = u.split(".", 1)
                cond = cond | ((F.col("db") == d) & (F.col("tbl") == t))
            pending = ev.where(
                (F.col("source") == src)
                & cond
                & (F.col("kind").isin("row", "ddl"))
                & (F.col("commit_ts") > applied)
            ).count()
            quarantined = q.where((F.col("source") == src) & cond).count()
        blocked = (info.get("blocked") or {}).get("message", "") if info else ""
        out(
            f"{name:<28} {applied:>20} {tso_wall_time(applied):<24} {pending:>8} {quarantined:>11}  {blocked}"
        )
    total_q = q.count()
    out(f"quarantined records in total: {total_q}")
    for name in names if show else []:
        loc = target_location(wh, name)
        if not table_exists(spark, loc):
            continue
        df = spark.read.format("delta").load(loc)
        out(f"\n{name} ({df.count()} rows; first {show}):")
        out(format_rows(df.columns, [list(r) for r in df.limit(show).collect()]))
    return 0


def format_rows(columns: list[str], rows: list[list]) -> str:
    """A plain text table (for `status --show`)."""
    cells = [[str(c) for c in columns]] + [
        ["NULL" if v is None else str(v) for v in r] for r in rows
    ]
    widths = [min(40, max(len(r[i]) for r in cells)) for i in range(len(columns))]
    lines = []
    for j, r in enumerate(cells):
        lines.append(" | ".join(v[:40].ljust(widths[i]) for i, v in enumerate(r)))
        if j == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _known_targets(project: Project) -> list[str]:
    names = []
    for db, tbl in project.seed_schemas:
        for s in project.sources:
            e = project.route(s.name, db, tbl)
            if e is not None:
                names.append(e.target_name(db, tbl))
    return names
