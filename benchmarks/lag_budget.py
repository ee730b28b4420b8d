"""The lag-budget rows under `ticdc-sync run --follow`: staging freshness, target freshness with
`target_lag`, and the largest table count that holds that lag, against a live producer.

Each step is a fresh `freshness.Follower` (a local broker, a producer of Canal-JSON with
wall-clock commit_ts and a watermark per partition each second, `run --follow -v` as a
subprocess, `local[2]`) over N tables, on a project whose `ticdc_sync.yml` sets
`defaults.target_lag` (60 s: the rows' `1m`). Its phases:
  start     the JVM starts and every target is created (seeded schemas: due at once,
            each with an apply of nothing); watermarks only. Timed, not counted.
  settle    `settle` seconds (default: the lag) of events at `rate`, not counted: the first
            lag cycle, in which every target comes due at the same moment.
  measured  `seconds` at `rate`: every change made is measured.
  tail      events at `rate` until every measured change is visible (at most twice the
            limit below: a change later than that fails the step anyway); the load goes
            on while the last changes are awaited.

**Staging freshness** of a change = when it became readable through
`spark.as_of.as_of(spark, project, "latest")` minus its commit time (the commit_ts's
physical part). A read as of `latest` is at the lowest resolved TSO of the sources involved
(`as_of.resolve`), which `snapshot` takes from `warehouse.read_state`: the tallies the
staging table's newest commit carries, which count that commit's own events
(`staged.Carried`). The resolved TSO is the lowest partition watermark in those tallies
(`plan.build.resolved_ts`, called here), and every change at or below it is read (the
target's version plus the staged changes after it). So a change becomes readable at the
first staging commit (its `commitInfo.timestamp`) whose tallies resolve it. (A commit of an
earlier version carried the tallies from before its own batch; the model reads those as
readable from the next commit.) Each step checks the model once: `snapshot(project,
"latest")`, called while the follower runs, must return a TSO between what the model says
was readable just before and just after.
This is also the "committed upstream to visible through `as_of='latest'`" figure.

**Target freshness** of a change: as `freshness.py` measures it, the `commitInfo.timestamp`
of its target's first commit whose marker has `applied_ts >=` its commit_ts, minus its
commit time. A count **holds** the lag when every measured change became visible within
the tail, p99 <= lag + 10 s (the limit), and the lag did not grow over the step
(`freshness._kept_up`'s idea, on the sawtooth a lag makes): each target commit's *peak*
(the lag of the oldest change it made visible: lag + the wait for a worker + the apply)
is grouped by that change's commit time, and the median peak of the step's last third is
at most 1.1x its middle third's + 2 s.

With `created` (`--budget-created`), the tables are not seeded under `schema/`: they arrive
as CREATE TABLEs in the stream once the follower runs (each at its own commit_ts, to every
partition, as TiCDC sends DDL), as a changefeed started before its tables brings them; the
start phase then waits for the targets those DDLs create.

`measure_budget` runs the table counts in order and stops at the first that does not hold;
if no step ran at `staging_tables`, one more follower runs there for the staging figure
only: it starts measuring once staging is up (its first resolved TSO), a short settle
later, without waiting for the targets' creation (the apply workers creating N targets
keep them as busy as N tables do at a 1-minute lag that 2 cores cannot hold), and has no
target tail. Reads the warehouse only (Delta logs, `snapshot` through
delta-rs): never writes it and never imports pyspark. Needs confluent-kafka (the `bench`
extra). Not part of the test suite.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import freshness as F
import workload as W

SOURCE = "src"  # the source `freshness._project` writes
START_LIMIT_S = 600.0  # start: the JVM and staging; and 5 s more per target to create
STAGING_SETTLE_S = 5.0  # a staging-only step: events before the measured ones
GROWTH_FACTOR, GROWTH_SLACK_S = 1.1, 2.0  # last third's median peak <= mid's * 1.1 + 2 s

# The line `run --follow` prints per poll (`loop_results.PollSummary.line`).
POLL_LINE = re.compile(r"poll \d+: (\d+) event\(s\) staged, (\d+) applied, (\d+) behind")
# The line a trim's DELETE that ended prints (`run.engine.TrimOutcome.lines`).
TRIM_LINE = re.compile(r"(\d+) applied event\(s\) older than the retention deleted")


def _resolved(text: str | None, source) -> tuple[int, bool]:
    """The source's resolved TSO in the tallies a staging commit's userMetadata carries, as
    the plan computes it (-1: none), and whether they count the commit's own events."""
    from ticdc_sync.core.staged import read_carried
    from ticdc_sync.plan.build import resolved_ts
    from ticdc_sync.warehouse.state import SourceState

    carried = read_carried(text)
    tally = carried.sources.get(SOURCE) if carried is not None else None
    if tally is None:
        return -1, True
    r = resolved_ts(source, SourceState(SOURCE, tally=tally))
    return (-1 if r is None else r), carried.complete


def staging_commits(wh: Path, source) -> list[tuple[int, int, int]]:
    """Each staging commit: (version, commitInfo.timestamp ms, the resolved TSO readable
    from that moment on: its own tallies', or an earlier version's commit's at the next)."""
    from ticdc_sync.warehouse.locations import state_location

    out: list[tuple[int, int, int]] = []
    held = -1  # an earlier version's commit: its tallies, readable from the next commit
    log = Path(state_location(str(wh), "events")) / "_delta_log"
    for f in sorted(log.glob("*.json")):
        for line in f.read_text().splitlines():
            if line.startswith('{"commitInfo"'):
                info = json.loads(line)["commitInfo"]
                r, complete = _resolved(info.get("userMetadata"), source)
                out.append((int(f.stem), int(info["timestamp"]), r if complete else held))
                held = -1 if complete else r
    return out


def staged_resolved(wh: Path, source) -> int:
    """The resolved TSO a read as of `latest` gets now (-1: none)."""
    return max((r for _, _, r in staging_commits(wh, source)), default=-1)


def readable(commits):
    """When each resolved TSO became readable as of `latest`: (times ms ascending, the
    resolved TSO readable from each), from the staging commits."""
    import numpy as np

    pts = sorted((t, r) for _, t, r in commits)
    times = np.array([p[0] for p in pts], dtype=np.int64)
    tso = np.maximum.accumulate(np.array([p[1] for p in pts], dtype=np.int64))
    return times, tso


def readable_at(times, tso, t_ms: int) -> int:
    """The resolved TSO a read as of `latest` gets at wall time `t_ms` (-1: none)."""
    import numpy as np

    i = int(np.searchsorted(times, t_ms, side="right")) - 1
    return int(tso[i]) if i >= 0 else -1


def staging_lags(prod: F.Producer, lo: int, hi: int, times, tso):
    """Staging lag (ms) of changes [lo, hi): readable as of `latest` minus commit time; -1
    for a change never resolved."""
    import numpy as np

    ts = np.frombuffer(prod.ts_of, dtype=np.int64)[lo:hi]
    i = np.searchsorted(tso, ts, side="left")
    ok = i < len(tso)
    lag = np.full(len(ts), -1, dtype=np.int64)
    lag[ok] = times[i[ok]] - (ts[ok] >> 18)
    return lag


def trim_gaps(wh: Path, t0_ms: int, t1_ms: int) -> dict:
    """Gaps (s) between consecutive polls' staging commits (WRITEs) in [t0_ms, t1_ms]: the
    longest of those with a trim's commit (a DELETE) between them, and of the others. A trim
    run between two polls lengthens the gap around it by its own length; one run beside
    them does not."""
    from ticdc_sync.warehouse.locations import state_location

    log = Path(state_location(str(wh), "events")) / "_delta_log"
    ops: list[tuple[int, str]] = []
    for f in sorted(log.glob("*.json")):
        for line in f.read_text().splitlines():
            if line.startswith('{"commitInfo"'):
                info = json.loads(line)["commitInfo"]
                ops.append((int(info["timestamp"]), info.get("operation", "")))
    ops = [o for o in sorted(ops) if t0_ms <= o[0] <= t1_ms]
    with_trim: list[float] = []
    other: list[float] = []
    last: int | None = None
    trimmed = False
    for t, op in ops:
        if op == "DELETE":
            trimmed = True
        elif op == "WRITE":
            if last is not None:
                (with_trim if trimmed else other).append((t - last) / 1000)
            last, trimmed = t, False
    return {
        "gap_trim_s_max": max(with_trim, default=None),
        "gap_trim_n": len(with_trim),
        "gap_other_s_max": max(other, default=None),
    }


def _staging_detail(commits, t0_ms: int, t1_ms: int) -> dict:
    """The staging commits in [t0_ms, t1_ms]: how many, and their mean and longest gap."""
    import numpy as np

    at = [t for _, t, _ in commits if t0_ms <= t <= t1_ms]
    gaps = np.diff(np.array(at, dtype=np.int64)) / 1000 if len(at) > 1 else np.array([])
    return {
        "commits": len(at),
        "gap_s": float(gaps.mean()) if len(gaps) else None,
        "gap_s_max": float(gaps.max()) if len(gaps) else None,
    }


def latest_check(root: Path, name: str) -> tuple[int, int | str, int]:
    """`snapshot(project, "latest")`'s TSO (or why it refused) and the wall times (ms)
    just before and after the call."""
    from ticdc_sync.project import load_project
    from ticdc_sync.read.snapshot import snapshot

    project = load_project(root)
    before = int(time.time() * 1000)
    try:
        found: int | str = snapshot(project, "latest", [name]).at.tso
    except Exception as e:  # noqa: BLE001 - a refusal or a failed read: the check says so
        found = f"{type(e).__name__}: {str(e)[:300]}"
    return before, found, int(time.time() * 1000)


def _held(lag, commit_ms, tb, at, drained: float | None, limit_s: float) -> dict:
    """The step's verdict: see the module docstring (holds)."""
    import numpy as np

    st = F._stats(lag)
    vis = at >= 0
    out: dict = {"drain": drained, "mid": None, "last": None, "peaks": 0}
    if vis.any():
        key = (tb[vis].astype(np.int64) << 40) | at[vis]
        uniq, inv = np.unique(key, return_inverse=True)
        peak = np.zeros(len(uniq), dtype=np.int64)
        np.maximum.at(peak, inv, lag[vis])
        first = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, inv, commit_ms[vis])
        t0, t1 = int(commit_ms.min()), int(commit_ms.max())
        third = (t1 - t0) / 3
        mid = peak[(first >= t0 + third) & (first < t0 + 2 * third)]
        last = peak[first >= t0 + 2 * third]
        out["peaks"] = len(uniq)
        if len(mid) and len(last):
            out["mid"] = float(np.median(mid)) / 1000
            out["last"] = float(np.median(last)) / 1000
    out["ok"] = bool(
        drained is not None
        and "p99" in st
        and not st["missing"]
        and st["p99"] <= limit_s
        and out["mid"] is not None
        and out["last"] <= GROWTH_FACTOR * out["mid"] + GROWTH_SLACK_S
    )
    return out


class CreatedFollower(F.Follower):
    """A `freshness.Follower` whose tables come as CREATE TABLEs in the stream after the
    follower starts, not from seeded schemas."""

    def _spawn(self) -> None:
        (self.root / "schema" / "bench.sql").unlink()
        super()._spawn()
        create_tables(self.prod, self.tables)


def create_tables(prod: F.Producer, tables: int) -> None:
    """A CREATE TABLE for each of the producer's tables, each at its own commit_ts, to every
    partition (TiCDC sends a DDL to each), then a watermark past them."""
    from testkit.encode import DdlChange

    with prod._lock:
        for schema in W.bench_tables(tables):
            change = DdlChange(
                schema.db, schema.table, W.schema_sql(schema), 3, prod.gen._tso(), schema
            )
            m = prod.fast.enc.encode_ddl(change)
            for part in range(F.PARTITIONS):
                prod.k.produce(W.TOPIC, value=m.value, key=m.key, partition=part)
    prod.watermark()
    prod.k.flush()


def _created(wh: Path, names: list[str]) -> bool:
    from ticdc_sync.warehouse.locations import target_location

    return all(
        (Path(target_location(str(wh), n)) / "_delta_log" / f"{0:020d}.json").exists()
        for n in names
    )


def _polls(log: Path) -> list[tuple[int, int, int]]:
    """(staged, applied, behind) of each poll line the follower printed so far."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [
        (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        for m in (POLL_LINE.search(x) for x in text.splitlines())
        if m
    ]


def _trims(log: Path) -> list[int]:
    """The events each trim's DELETE deleted, as the follower reported them so far."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [int(m.group(1)) for m in (TRIM_LINE.search(x) for x in text.splitlines()) if m]


def follow_step(
    tables: int,
    rate: float,
    lag_s: int,
    settle_s: float,
    seconds: float,
    tmp: Path,
    *,
    targets: bool = True,
    retention: str | None = None,
    rewrite_below: str | None = None,
    created: bool = False,
) -> dict:
    """One fresh follower over `tables` tables: staging freshness, and (`targets`) target
    freshness and whether the count holds the lag. `retention`: the project's
    `staging.retention` (None: the default, 7d, under which a run this short trims
    nothing). `rewrite_below`: the project's `defaults.rewrite_below` (None: the default).
    `created`: the tables arrive as CREATE TABLEs in the stream (`CreatedFollower`)."""
    from ticdc_sync.project import load_project

    tmp.mkdir(parents=True)
    kind = ("" if targets else "-staging") + ("-created" if created else "")
    keep = W.OUT / f"lagbudget-{tables}{kind}-follow.log"
    res: dict = {
        "tables": tables,
        "rate": rate,
        "lag": lag_s,
        "seconds": seconds,
        "retention": retention,
        "rewrite_below": rewrite_below,
        "created": created,
    }
    follower = CreatedFollower if created else F.Follower
    with follower(tmp, tables, f"{lag_s}s", keep, retention, rewrite_below) as f:
        source = load_project(f.root).sources[0]
        prod, names = f.prod, f.names
        t0 = time.monotonic()
        if targets:
            limit = START_LIMIT_S + 5.0 * tables
            took = prod.idle_until(lambda: (f.alive(), _created(f.wh, names))[1], limit)
            up = f"{tables} targets created"
        else:
            limit = START_LIMIT_S
            took = prod.idle_until(
                lambda: (f.alive(), staged_resolved(f.wh, source) >= 0)[1], limit
            )
            up = "staging up"
        if took is None:
            raise SystemExit(f"{tables} tables: not {up} within {limit:.0f}s")
        res["start_s"] = time.monotonic() - t0
        print(
            f"  {tables} tables: follower up, {up} ({res['start_s']:.0f}s incl. JVM start)",
            flush=True,
        )
        prod.run_for(rate, settle_s)
        p0 = len(_polls(f.log))
        lo, hi, achieved = prod.run_for(rate, seconds)
        p1 = len(_polls(f.log))
        last_ts = prod.ts_of[hi - 1]
        if targets:
            cond = f.all_visible(hi)
        else:

            def cond() -> bool:
                f.alive()
                return staged_resolved(f.wh, source) >= last_ts

        drained = prod.run_until(rate, cond, 2.0 * (lag_s + 10))
        check = latest_check(f.root, names[0])
        f.stop(wait=60)
        polls = _polls(f.log)[p0:p1]
        trims = _trims(f.log)
        res["trims"] = {"n": len(trims), "events": sum(trims)}
        commits = staging_commits(f.wh, source)
        times, tso = readable(commits)
        cms = prod.ts_of[lo] >> 18, last_ts >> 18
        res["staging"] = {
            **F._stats(staging_lags(prod, lo, hi, times, tso)),
            **_staging_detail(commits, *cms),
            **trim_gaps(f.wh, *cms),
            "achieved": achieved,
        }
        a, found, b = check
        lo_ok, hi_ok = readable_at(times, tso, a), readable_at(times, tso, b)
        res["check"] = {
            "ok": isinstance(found, int) and lo_ok <= found <= hi_ok,
            "found": found,
            "before": lo_ok,
            "after": hi_ok,
        }
        res["polls"] = {
            "n": len(polls),
            "applied": sum(p[1] for p in polls),
            "behind_max": max((p[2] for p in polls), default=None),
        }
        if targets:
            vis = F.visibility(f.wh, names)
            lag, commit_ms, tb, at = F.visible_at(prod, lo, hi, vis, names)
            res["target"] = {**F._stats(lag), **_held(lag, commit_ms, tb, at, drained, lag_s + 10)}
    print(f"  {tables} tables: {res}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)  # a step's warehouse and broker data
    return res


def measure_budget(
    rate: float,
    lag_s: int,
    settle_s: float,
    seconds: float,
    counts: tuple[int, ...],
    staging_tables: int | None,
    staging_seconds: float,
    tmp: Path,
    retention: str | None = None,
    rewrite_below: str | None = None,
    created: bool = False,
) -> dict:
    """Steps over `counts` (stopping at the first that does not hold), then a staging-only
    step at `staging_tables` unless a step ran there; each with `staging.retention`
    `retention` and `defaults.rewrite_below` `rewrite_below` (None: the defaults); `created`:
    the tables arrive as CREATE TABLEs in the stream."""
    res: dict = {
        "rate": rate,
        "lag": lag_s,
        "limit": lag_s + 10,
        "steps": [],
        "staging_tables": staging_tables,
        "staging": None,
        "retention": retention,
        "rewrite_below": rewrite_below,
        "created": created,
    }
    for n in counts:
        step = follow_step(
            n,
            rate,
            lag_s,
            settle_s,
            seconds,
            tmp / f"tables-{n}",
            retention=retention,
            rewrite_below=rewrite_below,
            created=created,
        )
        res["steps"].append(step)
        if not step["target"]["ok"]:
            break
    if staging_tables and all(s["tables"] != staging_tables for s in res["steps"]):
        res["staging"] = follow_step(
            staging_tables,
            rate,
            lag_s,
            STAGING_SETTLE_S,
            staging_seconds,
            tmp / f"staging-{staging_tables}",
            targets=False,
            retention=retention,
            rewrite_below=rewrite_below,
            created=created,
        )
    return res
