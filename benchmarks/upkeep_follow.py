"""Targets' maintenance under `ticdc-sync run --follow`: disk, files, apply cost and reads of
a follower left running, and staging freshness with maintenance against without.

    python benchmarks/upkeep_follow.py [--minutes 30] [--rate 2000] [--tables 20]
        [--retain 1h] [--pair-minutes 5] [--rewrite-below 0] [--deletion-vectors]

The broker, producer and follower of `freshness.py` (`freshness.Follower`: a local KRaft
broker, Canal-JSON over `tables` tables at a steady rate with wall-clock commit_ts and a
watermark per partition each second, `run --follow -v` as a subprocess, `local[2]`), on a
project with `defaults.target_lag` `--lag` (1m, the default) and `defaults.maintenance` set
per phase (the long follower's `defaults` may also set `rewrite_below` and
`table_features.deletion_vectors`: copy-on-write against merge-on-read). Two phases, each
a fresh follower:

  follow  `--minutes` of events at `--rate` with `maintenance: {retain: R}` (`--retain`,
          and `--vacuum-every` if given; the rest the defaults). Once the targets are created
          (seeded schemas: not counted), a thread samples every `--sample` seconds (60):
          per target its bytes on disk (every file under its folder, `_delta_log` with
          them), its live bytes and files (the newest version's `add` actions, through
          delta-rs: `LakeTable.data_files`), its `.parquet` files on disk; the follower's
          apply lines (`apply T: +i ~u -d in ... (Xs)`) and maintenance lines printed since
          the last sample. At the sample after `--read-at` minutes (2) and after the last,
          once some target has rows, a **full read** of the busiest target (the most live
          bytes at the first read): `spark.read` of the Delta table and one aggregate over
          every row (count and the sum of `xxhash64` of every column) at its newest version
          then, in this process's own Spark session (`local[1]`, started before the
          follower); beside it the same read of those rows written once to a fresh Delta
          table, the two in turn, best of 3 each after an untimed one: their ratio says what
          the target's layout (files, log) costs a reader, apart from its rows' growth.
  pair    two followers of `--pair-minutes` each at the same rate and tables: maintenance
          `{enabled: false}` and `{retain: --pair-retain, vacuum_every: --pair-vacuum-every}`
          (0 and 1m: every target looked at and VACUUMed every minute, each VACUUM
          deleting every removed file, much more often than the defaults, whose first look
          comes after 5 minutes; a retention under an hour is kept as an hour, since
          Delta's VACUUM counts whole hours). Each: start (targets
          created), `--pair-settle` seconds of events (60, not counted), then the measured
          span, then events until every measured change is readable as of `latest`.
          **Staging freshness** of a change as `lag_budget.py` defines it: when it became
          readable through `as_of(..., "latest")` (the first staging commit whose tallies
          resolve it) minus its commit time. `--pair-minutes 0`: no pair.

Figures: disk / live (all targets, and the busiest), files, the apply times of same-size
windows (applies of 0.75-1.25x the median row changes after minute 2: their median seconds,
and seconds per 1,000 changes) early (printed in minutes `--early`, 2-7) against late (the
last 5), the full read's ratios, staging p99 of the pair, and what each retention keeps:
the bytes the targets' commits removed per minute over the last 10 (from their
`_delta_log`), over the live bytes, times (retention + vacuum_every) minutes. Reads the
warehouse and never writes it. Needs confluent-kafka (the `bench` extra). Not part of the
test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import freshness as F
import lag_budget as L
import workload as W

# The line a target's apply ends with (`spark.apply.executor.summary_line`).
APPLY_LINE = re.compile(r"apply (\S+): \+(\d+) ~(\d+) -(\d+) in .*\(([\d.]+)s\)")
# A look at a target that did something, or failed (`run.engine.TargetMaintained.lines`).
UPKEEP_LINE = re.compile(r"^\s+(\S+): (compacted|vacuumed|compacted and vacuumed) \(")
UPKEEP_FAIL = re.compile(r"(\S+): not maintained \((.*)\)")


class UpkeepFollower(F.Follower):
    """`freshness.Follower` with `defaults.maintenance` set in the project it writes."""

    def __init__(
        self, tmp: Path, tables: int, lag: str, keep: Path, maintenance: dict, extra: str = ""
    ):
        super().__init__(tmp, tables, lag, keep)
        self.maintenance = maintenance
        self.extra = extra  # more `defaults` keys, as YAML lines indented by two

    def _spawn(self) -> None:
        yml = self.root / "ticdc_sync.yml"
        block = "".join(f"    {k}: {v}\n" for k, v in self.maintenance.items()) + self.extra
        text = yml.read_text().replace("defaults:\n", f"defaults:\n  maintenance:\n{block}", 1)
        yml.write_text(text)
        super()._spawn()


def _walk(folder: Path) -> tuple[int, int]:
    """(bytes of every file under `folder`, `.parquet` files among them)."""
    total = parquet = 0
    for d, _dirs, names in os.walk(folder):
        for n in names:
            try:
                total += os.lstat(os.path.join(d, n)).st_size
            except OSError:  # removed while walking (a VACUUM's)
                continue
            parquet += n.endswith(".parquet")
    return total, parquet


def _live(location: str) -> tuple[int | None, int]:
    """(live data files or None, live bytes) of the table's newest version."""
    from ticdc_sync.core.lake import LakeTable

    t = LakeTable(location)
    found = t.data_files()
    return found if found is not None else (None, LakeTable(location).data_bytes())


def sample(wh: Path, names: list[str]) -> dict:
    """Per target: disk bytes, .parquet files on disk, live files and bytes."""
    from ticdc_sync.warehouse.locations import target_location

    out: dict = {}
    for n in names:
        loc = target_location(str(wh), n)
        disk, on_disk = _walk(Path(loc))
        for _ in range(3):  # a VACUUM or commit between listing and reading: read again
            try:
                files, live = _live(loc)
                break
            except Exception:  # noqa: BLE001 - the next try sees a settled log
                time.sleep(0.5)
        else:
            files, live = None, 0
        out[n] = {"disk": disk, "parquet": on_disk, "files": files, "live": live}
    return out


def _lines(log: Path, start: int) -> tuple[list[str], int]:
    """Whole lines the follower printed after byte `start`, and the offset after them."""
    with open(log, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    return data[:end].decode(errors="replace").splitlines(), start + end


def _parse(lines: list[str]) -> dict:
    applies = []
    upkeep: dict = {"compacted": 0, "vacuumed": 0, "failed": []}
    for x in lines:
        m = APPLY_LINE.search(x)
        if m:
            changes = int(m.group(2)) + int(m.group(3)) + int(m.group(4))
            applies.append((m.group(1), changes, float(m.group(5))))
            continue
        m = UPKEEP_LINE.search(x)
        if m:
            upkeep["compacted"] += "compacted" in m.group(2)
            upkeep["vacuumed"] += "vacuumed" in m.group(2)
            continue
        m = UPKEEP_FAIL.search(x)
        if m:
            upkeep["failed"].append(x.strip()[:300])
    return {"applies": applies, "upkeep": upkeep}


def _read_once(spark, location: str, version: int | None) -> tuple[float, int]:
    """Seconds of one aggregate over every row and column of the Delta table (at `version`),
    and its rows."""
    from pyspark.sql import functions as Fn

    t0 = time.perf_counter()
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(location)
    cols = [Fn.col(f"`{c}`") for c in df.columns]
    r = df.agg(Fn.count("*"), Fn.sum(Fn.xxhash64(*cols).cast("decimal(38,0)"))).collect()
    return time.perf_counter() - t0, int(r[0][0])


def read_pair(spark, location: str, copy: Path, reps: int = 3) -> dict:
    """The full read of the target (at its newest version now: the follower goes on
    committing) and of its rows there written once to a fresh table, in turn, best of
    `reps` each (after one untimed read of each)."""
    from ticdc_sync.core.lake import LakeTable

    v = LakeTable(location).version()
    spark.read.format("delta").option("versionAsOf", v).load(location).write.format("delta").save(
        str(copy)
    )
    best = {"target": (float("inf"), 0), "fresh": (float("inf"), 0)}
    for i in range(reps + 1):
        for name, loc, at in (("target", location, v), ("fresh", str(copy), None)):
            s, rows = _read_once(spark, loc, at)
            if i:
                best[name] = min(best[name], (s, rows))
    shutil.rmtree(copy, ignore_errors=True)
    out: dict = {k: {"seconds": b[0], "rows": b[1]} for k, b in best.items()}
    out["version"] = v
    out["over_fresh"] = best["target"][0] / best["fresh"][0]
    return out


class Sampler(threading.Thread):
    """Samples the warehouse every `every` seconds while the producer runs (see the module)."""

    def __init__(self, f: UpkeepFollower, spark, every: float, read_at: float, tmp: Path):
        super().__init__(daemon=True)
        self.f, self.spark, self.every, self.read_at, self.tmp = f, spark, every, read_at, tmp
        self.samples: list[dict] = []
        self.reads: list[dict] = []
        self.busiest: str | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.t0 = time.monotonic()
        self.offset = f.log.stat().st_size

    def take(self) -> dict:
        at = time.monotonic() - self.t0
        lines, self.offset = _lines(self.f.log, self.offset)
        s = {"minute": at / 60, "tables": sample(self.f.wh, self.f.names), **_parse(lines)}
        self.samples.append(s)
        tot = _totals(s)
        print(
            f"  {at / 60:5.1f} min: disk {tot['disk'] / 2**20:.1f} MiB / live "
            f"{tot['live'] / 2**20:.1f} MiB = {tot['disk'] / max(tot['live'], 1):.1f}x, "
            f"files {tot['files']} live / {tot['parquet']} on disk, "
            f"{len(s['applies'])} applies, upkeep {s['upkeep']['compacted']} compacted "
            f"{s['upkeep']['vacuumed']} vacuumed {len(s['upkeep']['failed'])} failed",
            flush=True,
        )
        return s

    def read(self, s: dict) -> None:
        from ticdc_sync.warehouse.locations import target_location

        if self.busiest is None:
            self.busiest = max(s["tables"], key=lambda n: s["tables"][n]["live"])
        loc = target_location(str(self.f.wh), self.busiest)
        r = read_pair(self.spark, loc, self.tmp / f"fresh-{len(self.reads)}")
        r.update(minute=s["minute"], name=self.busiest, **s["tables"][self.busiest])
        self.reads.append(r)
        print(f"  full read of {self.busiest} at {s['minute']:.1f} min: {r}", flush=True)

    def run(self) -> None:
        try:
            n = 1
            while not self.done.wait(self.t0 + n * self.every - time.monotonic()):
                s = self.take()
                rows = any(x["live"] for x in s["tables"].values())
                if not self.reads and s["minute"] >= self.read_at and rows:
                    self.read(s)
                n += 1
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.error = e

    def finish(self) -> None:
        """Stop sampling; the last sample and the last read."""
        self.done.set()
        self.join()
        if self.error is not None:
            raise self.error
        last = self.samples[-1] if self.samples else None
        fresh = last is not None and time.monotonic() - self.t0 - last["minute"] * 60 < 5
        self.read(last if fresh else self.take())


def _totals(s: dict) -> dict:
    t = s["tables"].values()
    return {
        "disk": sum(x["disk"] for x in t),
        "live": sum(x["live"] for x in t),
        "files": sum(x["files"] or 0 for x in t),
        "files_max": max((x["files"] or 0 for x in t), default=0),
        "parquet": sum(x["parquet"] for x in t),
    }


def _apply_cost(samples: list[dict], lo: float, hi: float, band: tuple[float, float]) -> dict:
    """Applies printed in samples whose minute is in (lo, hi] and whose row changes are in
    `band` (same-size windows): how many, their median seconds and changes, and seconds
    per 1,000 changes (sum over sum)."""
    a = [
        x
        for s in samples
        if lo < s["minute"] <= hi
        for x in s["applies"]
        if band[0] <= x[1] <= band[1]
    ]
    if not a:
        return {"applies": 0}
    ch = sum(x[1] for x in a)
    sec = sum(x[2] for x in a)
    return {
        "applies": len(a),
        "median_s": statistics.median(x[2] for x in a),
        "median_changes": statistics.median(x[1] for x in a),
        "s_per_1k": 1000 * sec / ch if ch else None,
    }


def _band(samples: list[dict], lo: float) -> tuple[float, float]:
    """0.75-1.25 times the median row changes of the applies printed after minute `lo`."""
    ch = [x[1] for s in samples if s["minute"] > lo for x in s["applies"] if x[1]]
    m = statistics.median(ch) if ch else 0
    return 0.75 * m, 1.25 * m


def removed_per_min(wh: Path, names: list[str], t0_ms: int, t1_ms: int) -> dict:
    """Bytes the targets' commits in [t0_ms, t1_ms] removed from their tables (`remove`
    actions, from the `_delta_log` JSON), per minute: what a retention of R minutes keeps
    on disk past the live rows, R times this (plus what waits for the next VACUUM)."""
    from ticdc_sync.warehouse.locations import target_location

    total = 0
    for n in names:
        for f in (Path(target_location(str(wh), n)) / "_delta_log").glob("*.json"):
            at, size = None, 0
            for line in f.read_text().splitlines():
                a = json.loads(line)
                if "commitInfo" in a:
                    at = int(a["commitInfo"]["timestamp"])
                elif "remove" in a:
                    size += int(a["remove"].get("size") or 0)
            if at is not None and t0_ms <= at <= t1_ms:
                total += size
    return {"bytes": total, "minutes": (t1_ms - t0_ms) / 60_000}


def follow(args, spark, tmp: Path) -> dict:
    maint = {"retain": args.retain}
    if args.vacuum_every:
        maint["vacuum_every"] = args.vacuum_every
    keep = W.OUT / "upkeep-follow.log"
    res: dict = {"tables": args.tables, "rate": args.rate, "minutes": args.minutes}
    res["maintenance"] = maint
    extra = ""
    if args.rewrite_below is not None:
        extra += f"  rewrite_below: {args.rewrite_below}\n"
    if args.deletion_vectors:
        extra += "  table_features:\n    deletion_vectors: true\n"
    res["defaults"] = extra
    with UpkeepFollower(tmp / "follow", args.tables, args.lag, keep, maint, extra) as f:
        source = _source(f)
        t0 = time.monotonic()
        took = f.prod.idle_until(lambda: (f.alive(), L._created(f.wh, f.names))[1], 900)
        if took is None:
            raise SystemExit(f"targets not created within 900s:\n{F._tail(f.log)}")
        print(f"  follower up ({time.monotonic() - t0:.0f}s incl. JVM start)", flush=True)
        sampler = Sampler(f, spark, args.sample, args.read_at, tmp)
        start_ms = int(time.time() * 1000)
        sampler.start()
        try:
            lo, hi, achieved = f.prod.run_for(args.rate, args.minutes * 60)
        finally:
            sampler.done.set()
        f.alive()
        sampler.finish()
        end_ms = int(time.time() * 1000)
        span = min(10.0, args.minutes / 2) * 60_000
        rm = removed_per_min(f.wh, f.names, max(start_ms, int(end_ms - span)), end_ms)
        last_ts = f.prod.ts_of[hi - 1]
        f.prod.run_until(args.rate, lambda: L.staged_resolved(f.wh, source) >= last_ts, 120)
        f.stop(wait=120)
        commits = L.staging_commits(f.wh, source)
        times, tso = L.readable(commits)
        res["staging"] = F._stats(L.staging_lags(f.prod, lo, hi, times, tso))
        res["achieved"] = achieved
    res["samples"] = [
        {"minute": s["minute"], **_totals(s), "applies": len(s["applies"]), **s["upkeep"]}
        for s in sampler.samples
    ]
    res["reads"] = sampler.reads
    last = sampler.samples[-1]
    end = last["minute"]
    band = _band(sampler.samples, args.early[0])
    res["band"] = band
    res["early"] = _apply_cost(sampler.samples, args.early[0], args.early[1], band)
    res["late"] = _apply_cost(sampler.samples, end - 5, end, band)
    res["end"] = _totals(last)
    res["removed"] = rm
    res["removed_per_min"] = rm["bytes"] / rm["minutes"] / max(res["end"]["live"], 1)
    res["busiest_end"] = last["tables"].get(sampler.busiest)
    return res


def _source(f: F.Follower):
    from ticdc_sync.project import load_project

    return load_project(f.root).sources[0]


def leg(name: str, maint: dict, args, tmp: Path) -> dict:
    """One follower of the pair: staging freshness over `--pair-minutes`."""
    keep = W.OUT / f"upkeep-pair-{name}-follow.log"
    with UpkeepFollower(tmp / name, args.tables, args.lag, keep, maint) as f:
        source = _source(f)
        took = f.prod.idle_until(lambda: (f.alive(), L._created(f.wh, f.names))[1], 900)
        if took is None:
            raise SystemExit(f"{name}: targets not created within 900s:\n{F._tail(f.log)}")
        f.prod.run_for(args.rate, args.pair_settle)
        start = f.log.stat().st_size
        lo, hi, achieved = f.prod.run_for(args.rate, args.pair_minutes * 60)
        last_ts = f.prod.ts_of[hi - 1]
        f.prod.run_until(args.rate, lambda: L.staged_resolved(f.wh, source) >= last_ts, 120)
        f.alive()
        lines, _ = _lines(f.log, start)
        f.stop(wait=120)
        times, tso = L.readable(L.staging_commits(f.wh, source))
        p = _parse(lines)
        res = {
            "maintenance": maint,
            **F._stats(L.staging_lags(f.prod, lo, hi, times, tso)),
            "achieved": achieved,
            "applies": len(p["applies"]),
            **p["upkeep"],
        }
    print(f"  pair {name}: {res}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description="targets' maintenance under run --follow")
    ap.add_argument("--minutes", type=float, default=30.0, help="the long follower (0: none)")
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--lag", default="60s", help="defaults.target_lag")
    ap.add_argument("--retain", default="1h", help="maintenance.retain of the long follower")
    ap.add_argument("--vacuum-every", default=None, help="its maintenance.vacuum_every")
    ap.add_argument("--rewrite-below", default=None, help="its defaults.rewrite_below (0: MERGE)")
    ap.add_argument(
        "--deletion-vectors",
        action="store_true",
        help="its table_features.deletion_vectors: true (merge-on-read)",
    )
    ap.add_argument("--sample", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--read-at", type=float, default=2.0, help="minute of the first full read")
    ap.add_argument("--early", type=float, nargs=2, default=(2.0, 7.0), metavar=("FROM", "TO"))
    ap.add_argument("--pair-minutes", type=float, default=5.0)
    ap.add_argument("--pair-settle", type=float, default=60.0)
    ap.add_argument("--pair-retain", default="0")
    ap.add_argument("--pair-vacuum-every", default="1m")
    args = ap.parse_args()
    missing = F.producer_missing()
    if missing is not None:
        raise SystemExit(f"{missing} (hint: {F.BENCH_EXTRA})")
    tmp = Path(tempfile.mkdtemp(prefix="upkeep-follow-"))
    out: dict = {"args": vars(args)}
    try:
        if args.minutes > 0:
            from run import session

            spark = session({"spark.master": "local[1]", "spark.ui.enabled": "false"})
            out["follow"] = follow(args, spark, tmp)
            spark.stop()
            print(json.dumps(out["follow"]), flush=True)
        if args.pair_minutes > 0:
            on = {"retain": args.pair_retain, "vacuum_every": args.pair_vacuum_every}
            out["pair"] = {
                "off": leg("off", {"enabled": "false"}, args, tmp),
                "on": leg("on", on, args, tmp),
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    W.OUT.mkdir(parents=True, exist_ok=True)
    (W.OUT / "upkeep_follow.json").write_text(json.dumps(out, indent=1))
    report(out)


def report(out: dict) -> None:
    fo = out.get("follow")
    if fo:
        e, b = fo["end"], fo["busiest_end"] or {}
        print(
            f"follow {fo['minutes']:.0f} min at {fo['rate']:,.0f} ev/s over {fo['tables']} "
            f"tables, maintenance {fo['maintenance']}:"
        )
        print(
            f"  disk / live: all targets {e['disk'] / 2**20:.1f} / {e['live'] / 2**20:.1f} MiB"
            f" = {e['disk'] / max(e['live'], 1):.2f}x; busiest "
            f"{b.get('disk', 0) / max(b.get('live', 1), 1):.2f}x; live files {e['files']} "
            f"(max {e['files_max']} a target), .parquet on disk {e['parquet']}"
        )
        k = fo["removed_per_min"]
        print(
            f"  bytes removed per minute over the last {fo['removed']['minutes']:.1f} min / live "
            f"bytes: {k:.3f} (a retention of R minutes keeps at most about 1 + {k:.3f} * (R + "
            f"vacuum_every) times the live rows: 1h+1h {1 + k * 120:.0f}x, 7d+1h "
            f"{1 + k * (7 * 1440 + 60):,.0f}x)"
        )
        ea, la = fo["early"], fo["late"]
        if ea.get("s_per_1k") and la.get("s_per_1k"):
            print(
                f"  apply late / early ({la['applies']} / {ea['applies']} applies of "
                f"{fo['band'][0]:.0f}-{fo['band'][1]:.0f} changes): median "
                f"{la['median_s']:.2f} / {ea['median_s']:.2f} s "
                f"= {la['median_s'] / ea['median_s']:.2f}x (median changes {la['median_changes']}"
                f" / {ea['median_changes']}); per 1k changes {la['s_per_1k']:.3f} / "
                f"{ea['s_per_1k']:.3f} s = {la['s_per_1k'] / ea['s_per_1k']:.2f}x"
            )
        if len(fo["reads"]) >= 2:
            r0, r1 = fo["reads"][0], fo["reads"][-1]
            print(
                f"  full read of {r0['name']}: {r1['target']['seconds']:.2f} s "
                f"({r1['target']['rows']} rows, {r1['minute']:.1f} min) / "
                f"{r0['target']['seconds']:.2f} s ({r0['target']['rows']} rows, "
                f"{r0['minute']:.1f} min) = {r1['target']['seconds'] / r0['target']['seconds']:.2f}x;"
                f" over its rows written once: {r1['over_fresh']:.2f}x / {r0['over_fresh']:.2f}x"
                f" = {r1['over_fresh'] / r0['over_fresh']:.2f}x"
            )
        print(f"  staging freshness: {fo['staging']}")
    pr = out.get("pair")
    if pr:
        off, on = pr["off"], pr["on"]
        if "p99" in off and "p99" in on:
            print(
                f"pair: staging p99 with maintenance {on['p99']:.2f} s / without "
                f"{off['p99']:.2f} s = {on['p99'] / off['p99']:.2f}x (p50 {on['p50']:.2f} / "
                f"{off['p50']:.2f} s; maintenance on: {on['vacuumed']} VACUUMs, "
                f"{on['compacted']} compactions, {len(on['failed'])} failed)"
            )


if __name__ == "__main__":
    main()
