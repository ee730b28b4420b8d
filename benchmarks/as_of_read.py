"""The fresh-read benchmark (`run.py --only asof`): reading one target as of `latest`
(`ticdc_sync.spark.as_of`) against reading the target alone, with 1, 10 and 60 s of a
2,000 ev/s stream staged but not applied (issue 39, item 5).

ticdc-sync builds the case itself, from one generated Canal-JSON capture (`workload.py`: 20
tables, 6 partitions, no DDL, a watermark to every partition each ~300 row events):
- pass 1: about `rows` live rows, inserted into the first 3 tables only (`accounts_000`,
  `orders_001`, `events_002`; with the stream's updates and deletes, about 2.5 row events
  per live row); a plain `runner.run` applies it.
- passes 2, 3, 4: the next 2,000 × (1, 9, 50) row events over all 20 tables, so that
  1, 10 and 60 s of the stream are pending, each staged by `runner.run(follow=True)`
  stopped once a poll has been summarized. Every target has `target_lag: 36500d`: a lag
  counts from a change's commit time, and the generator's clock is in November 2023, so
  only a lag longer than the time since then holds its changes back (pending: staged,
  resolved by the watermarks, not applied).

At each level the measured target (`accounts_000`, the widest shape, 8 columns) is read
both ways, alternating (the order flips each round), best of `repeat`:
- fresh: `as_of(spark, root, "latest", [target])` (the project by its folder, as a notebook
  calls it), then the action on its frame;
- plain: `spark.read.format("delta").load(target)`, then the same action.
The action is one aggregate over every row and column: the row count, and the sum of
`xxhash64` of all columns (as DECIMAL(38,0), so it cannot overflow). Per read also: its
Spark jobs (a job group), and the files and rows its scans of the staging table produced
(their metrics in the executed plan: what is left after Delta's file statistics and
Parquet's page index skipped the rest). Goal (issue 58): a fresh read at 60 s pending at
most 1.5x the target alone.

Checks (a failed one ends the benchmark, never a row): the staging runs applied nothing
and the plain read holds pass 1's rows; the fresh read merged pending changes and counts
the generator's live rows after the level's pass. After the last level a plain
`runner.run` applies everything: the target's count and checksum then equal the last
fresh read's. Runs in the benchmark's shared SparkSession. Not part of the test suite.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import workload as W

TABLES = 20
POPULATED = 3  # pass 1 inserts into the first this many tables
RATE = 2_000  # row events per second of the stream
LEVELS = (1, 10, 60)  # seconds of the stream pending at each level
# Live rows per row event of the generator's mix (50% inserts, 10% deletes).
LIVE_PER_EVENT = 0.4
# Longer than the time since the generator's clock (2023-11): nothing is due by its lag.
LAG = "36500d"
# The goal of a fresh read at the last level against the target alone (issue 58, item 2).
GOAL = 1.5


def capture(rows: int) -> W.Capture:
    """Pass 1 (about `rows` live rows in 3 tables), then one pass per level (the events that
    bring the pending stream to that level's seconds)."""
    pending = [RATE * s for s in LEVELS]
    steps = [b - a for a, b in itertools.pairwise([0, *pending])]
    return W.ensure_captures(
        W.Params(
            pass_events=(int(rows / LIVE_PER_EVENT), *steps),
            tables=TABLES,
            first_pass_tables=POPULATED,
            ddl_count=0,
        )
    )


def _checksum(df):
    """((rows, sum of xxhash64 of every column) of `df`, the query that computed it): one
    aggregate over every row and column."""
    from pyspark.sql import functions as F

    cols = [F.col(f"`{c}`") for c in df.columns]
    q = df.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).alias("h"),
    )
    # `collect` on the query itself (not `first`, a new query), so its plan holds the
    # metrics of what it ran.
    (r,) = q.collect()
    return (int(r["n"]), r["h"]), q


def staging_scans(q) -> tuple[int, int]:
    """(files, rows) the scans of the staging table produced in the executed query `q`:
    what the read read of the staged events, after Delta's file statistics and Parquet's
    page index skipped what they could."""
    files = rows = 0

    def walk(node) -> None:
        nonlocal files, rows
        name = node.nodeName()
        if "AdaptiveSparkPlan" in name:
            return walk(node.executedPlan())
        if "QueryStage" in name:
            return walk(node.plan())
        if name.startswith("Scan") and "_ticdc_sync/events" in str(
            node.relation().location().toString()
        ):
            m = node.metrics()
            files += int(m.apply("numFiles").value())
            rows += int(m.apply("numOutputRows").value())
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(q._jdf.queryExecution().executedPlan())
    return files, rows


class Jobs:
    """The Spark jobs a block starts on this thread, counted through a job group."""

    def __init__(self, spark, name: str) -> None:
        self.sc, self.name = spark.sparkContext, name
        self.count = 0

    def __enter__(self) -> Jobs:
        self.sc.setJobGroup(self.name, self.name)
        return self

    def __exit__(self, *_exc) -> None:
        self.count = len(self.sc.statusTracker().getJobIdsForGroup(self.name))
        self.sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        self.sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


_reads = itertools.count()


def _fresh(spark, root: Path, target: str) -> dict:
    """The fresh read: seconds in all (`s`), of the `as_of` call (`as_of_s`), pending
    changes merged, its checksum (`sum`), Spark jobs, the staging scans' files and rows."""
    from ticdc_sync.spark.as_of import as_of

    with Jobs(spark, f"asof-fresh-{next(_reads)}") as jobs:
        t0 = time.perf_counter()
        read = as_of(spark, root, "latest", [target])
        t1 = time.perf_counter()
        got, q = _checksum(read.frames[target])
        dt = time.perf_counter() - t0
    files, rows = staging_scans(q)
    return {
        "s": dt,
        "as_of_s": t1 - t0,
        "pending": read.pending[target],
        "sum": got,
        "jobs": jobs.count,
        "staged_files": files,
        "staged_rows": rows,
    }


def _plain(spark, loc: str) -> tuple[float, tuple[int, object], int]:
    """The target alone: (seconds, its checksum, Spark jobs)."""
    with Jobs(spark, f"asof-plain-{next(_reads)}") as jobs:
        t0 = time.perf_counter()
        got, _ = _checksum(spark.read.format("delta").load(loc))
        dt = time.perf_counter() - t0
    return dt, got, jobs.count


def _stage(spark, root: Path, cap: W.Capture, n: int) -> tuple[float, int]:
    """Stage pass `n` with `runner.run(follow=True)`, stopped once a poll has been
    summarized (it stages all the capture holds; nothing is due by its lag): (seconds,
    events staged). Refused when anything was applied."""
    from bench_projects import point_captures

    from ticdc_sync.project import load_project
    from ticdc_sync.run.loop import StopRequest
    from ticdc_sync.spark import runner

    point_captures(root, cap, n)
    stop = StopRequest()
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if line.startswith("poll ") and stop.level == 0:
            stop.request()

    t0 = time.perf_counter()
    code = runner.run(
        load_project(root), spark=spark, follow=True, poll_seconds=0.5, out=out, stop_request=stop
    )
    dt = time.perf_counter() - t0
    polls = [ln for ln in lines if ln.startswith("poll ")]
    if code != 0 or not polls:
        raise SystemExit(f"asof: staging pass {n} failed (exit {code}):\n" + "\n".join(lines))
    staged = applied = 0
    for ln in polls:  # "poll 1: 2042 event(s) staged, 0 applied, ..."
        words = ln.split()
        staged += int(words[2])
        applied += int(words[5])
    if applied or not staged:
        raise SystemExit(
            f"asof: staging pass {n} staged {staged} and applied {applied} (want > 0 and 0):\n"
            + "\n".join(lines)
        )
    return dt, staged


def measure_asof(spark, rows: int, repeat: int, tmp: Path) -> dict:
    """Per level: best of `repeat` of the fresh read and of the plain read, alternating;
    with every run's time and the counts checked."""
    from bench_projects import make_project, point_captures

    from ticdc_sync.project import load_project
    from ticdc_sync.spark import runner
    from ticdc_sync.warehouse.locations import state_location, target_location

    cap = capture(rows)
    target = W.bench_tables(TABLES)[0].table
    root = make_project(tmp / "asof", cap)
    (root / "ticdc_sync.yml").write_text(
        f"name: bench\nprofile: bench\ndefaults:\n  target_lag: {LAG}\n"
    )
    wh = root / "warehouse"
    loc = target_location(str(wh), target)
    events = state_location(str(wh), "events")

    point_captures(root, cap, 1)
    lines: list[str] = []
    t0 = time.perf_counter()
    if runner.run(load_project(root), spark=spark, out=lines.append) != 0:
        raise SystemExit("asof: pass 1 failed:\n" + "\n".join(lines))
    populate = time.perf_counter() - t0
    live = [p["live_rows"] for p in cap.meta["passes"]]
    base = spark.read.format("delta").load(loc).count()
    if base != live[0][target]:
        raise SystemExit(
            f"asof: {target} holds {base:,} rows after pass 1, want {live[0][target]:,}"
        )
    populated = sum(live[0].values())
    print(
        f"  asof: pass 1, {cap.params.sizes()[0]:,} row events, {populated:,} live rows in "
        f"{POPULATED} tables ({target} {base:,}), applied in {populate:.1f}s",
        flush=True,
    )
    out: dict = {
        "target": target,
        "target_rows": base,
        "populated": populated,
        "populate_s": populate,
        "levels": [],
    }
    last = None
    for k, seconds in enumerate(LEVELS):
        n = k + 2
        stage_s, staged = _stage(spark, root, cap, n)
        staging_rows = spark.read.format("delta").load(events).count()
        want = live[n - 1][target]
        print(
            f"  asof {seconds}s pending: pass {n} staged ({staged:,} events) in {stage_s:.1f}s, "
            f"nothing applied; the staging table holds {staging_rows:,} events",
            flush=True,
        )
        runs: dict[str, list[float]] = {"fresh": [], "plain": []}
        level: dict = {
            "seconds": seconds,
            "events": RATE * seconds,
            "staged": staged,
            "staged_s": stage_s,
            "staging_rows": staging_rows,
            "runs": runs,
        }
        # Alternating, the order flipping each round, so the JVM's warm-up and the host's
        # load fall on both.
        for i in range(repeat):
            for name in ("fresh", "plain")[:: 1 if i % 2 == 0 else -1]:
                if name == "fresh":
                    r = _fresh(spark, root, target)
                    dt, got, pending = r["s"], r["sum"], r["pending"]
                    if got[0] != want or pending <= 0:
                        raise SystemExit(
                            f"asof: the fresh read of {target} at {seconds}s pending counts "
                            f"{got[0]:,} rows ({pending} pending merged); the generator has "
                            f"{want:,}"
                        )
                    if dt < level.get("fresh", float("inf")):
                        level.update(
                            fresh=dt,
                            as_of_s=r["as_of_s"],
                            pending=pending,
                            fresh_sum=got,
                            fresh_jobs=r["jobs"],
                            staged_files=r["staged_files"],
                            staged_rows=r["staged_rows"],
                        )
                else:
                    dt, got, jobs = _plain(spark, loc)
                    if got[0] != base:
                        raise SystemExit(
                            f"asof: {target} counts {got[0]:,} rows at {seconds}s pending, want "
                            f"{base:,}: something was applied"
                        )
                    if dt < level.get("plain", float("inf")):
                        level.update(plain=dt, plain_jobs=jobs)
                runs[name].append(dt)
                print(f"  asof {seconds}s pending, {name} read #{i + 1}: {dt:.2f}s", flush=True)
        level["rows"] = want
        last = level["fresh_sum"]
        out["levels"].append(level)
    # What an apply gives: the last level's fresh read, row for row by the checksum.
    lines = []
    if runner.run(load_project(root), spark=spark, out=lines.append) != 0:
        raise SystemExit("asof: the apply after the last level failed:\n" + "\n".join(lines))
    applied, _ = _checksum(spark.read.format("delta").load(loc))
    if applied != last:
        raise SystemExit(
            f"asof: {target} after the apply (rows, checksum) {applied}, the fresh read before "
            f"it {last}"
        )
    out["applied"] = applied
    return out


def table_rows(res: dict) -> list[tuple[str, str, str, str]]:
    """The table's rows (figure, value, target, met) of `measure_asof`'s result."""
    rows = [
        (
            f"fresh read as of latest ({res['target']}, {res['target_rows']:,} rows) vs the "
            "target alone: count + checksum of every column",
            f"pass 1: {res['populated']:,} live rows in {POPULATED} of {TABLES} tables",
            "",
            "",
        )
    ]
    for lv in res["levels"]:
        each = "; ".join(f"{k} " + ", ".join(f"{x:.2f}" for x in v) for k, v in lv["runs"].items())
        rows.append(
            (
                f"  {lv['seconds']}s pending ({lv['events']:,} events over {TABLES} tables, "
                f"{lv['pending']:,} for the target): fresh / alone",
                f"{lv['fresh']:.2f}s / {lv['plain']:.2f}s = {lv['fresh'] / lv['plain']:.2f}x "
                f"(as_of() {lv['as_of_s']:.2f}s of it; Spark jobs {lv['fresh_jobs']} / "
                f"{lv['plain_jobs']}; staged events read {lv['staged_rows']:,} in "
                f"{lv['staged_files']} file(s), of a staging table of "
                f"{lv['staging_rows']:,}; runs: {each})",
                f"<= {GOAL}x at {LEVELS[-1]}s" if lv["seconds"] == LEVELS[-1] else "",
                ("MET" if lv["fresh"] / lv["plain"] <= GOAL else "NOT MET")
                if lv["seconds"] == LEVELS[-1]
                else "",
            )
        )
    n, _ = res["applied"]
    rows.append(
        (
            f"  fresh read at {LEVELS[-1]}s pending == the target applied afterwards "
            "(rows, checksum)",
            f"{n:,} rows",
            "equal",
            "MET",
        )
    )
    return rows
