"""Freshness under `ticdc-sync run --follow`: a live producer into a real Kafka broker.

A local KRaft broker (scripts/kafka.py) gets a topic of 6 partitions. A producer thread
of this process writes TiCDC Canal-JSON (TiDB extension) at a steady rate: the
benchmark's stream (workload.BenchGenerator, no DDL) spread over `tables` tables, with
each transaction's commit_ts taken from the wall clock (its physical part is the time
the producer made it), and a TIDB_WATERMARK to every partition once per second, as
TiCDC sends its resolved ts. `ticdc-sync run --follow` runs as users run it: a
subprocess with its own JVM (ticdc-sync's session defaults, local[2]), on a project with
`target_lag: 0` (every target applied at every poll: what the rows below were defined
for; `lag_budget.py` measures the lag budget, on the same `Follower`).

Lag of a change = when its row became visible in Delta minus its TiDB commit time. A
row is visible from the first commit of its target whose ticdc-sync marker says
`applied_ts >= commit_ts` (window.Marker: every change up to it is in the table); its
time is that commit's `commitInfo.timestamp`, read from the target's `_delta_log`.
Phases, one follower throughout:
  warm-up   a few seconds of events, applied in full: creates the targets (not counted)
  steady    `seconds` at `rate` events/s: p50/p99/max lag over every change
  ramp      each of `ramp` rates for `ramp_seconds`, the follower drained between steps:
            the consumer kept up at a rate if the lag did not grow over the step (the
            median lag of the changes made in its last third is at most 1.5x that of its
            middle third plus 2 s) and its last change became visible within
            DRAIN_LIMIT_S of the step's end.
The producer shares the 2 cores with the broker and the follower, as the README says.
Needs confluent-kafka (the `bench` extra). Not part of the test suite; it only reads the
warehouse the follower writes, and leaves no broker or follower behind (`Follower`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from array import array
from pathlib import Path

import workload as W

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PARTITIONS = 6
DRAIN_LIMIT_S = 240.0
WARMUP_S = 5.0


# What the live producer needs beyond ticdc-sync's own dependencies: its `bench` extra.
BENCH_EXTRA = "pip install -e '.[bench]'"


def producer_missing() -> str | None:
    """None when the Python Kafka producer (confluent-kafka, of the `bench` extra) imports
    here; else why not, in one line. Asked before anything starts (a broker, a follower)."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return (
            "the live producer needs confluent-kafka, of ticdc-sync's `bench` extra, which is "
            "not installed in this Python"
        )
    return None


def _broker_module():
    sys.path.insert(0, str(REPO))
    from tests.kafka.helpers import broker_module

    return broker_module()


class LiveGenerator(W.BenchGenerator):
    """The benchmark stream with TiDB commit timestamps from the wall clock."""

    def _tso(self) -> int:
        from testkit.encode import make_tso

        now = int(time.time() * 1000)
        if now > self.ms:
            self.ms, self.logical = now, 0
        else:  # same millisecond: the logical part keeps TSOs strictly increasing
            self.logical += 1
            if self.logical >= 1 << 18:
                self.ms, self.logical = self.ms + 1, 0
        return make_tso(self.ms, self.logical)


class Producer:
    """Paced Canal-JSON producer; records each row change's (table, commit_ts)."""

    def __init__(self, bootstrap: str, tables: int) -> None:
        from confluent_kafka import Producer as KProducer

        self.k = KProducer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        p = W.Params(
            events=10**12, ddl_count=0, watermark_every=10**12, tables=tables, partitions=6
        )
        self.gen = LiveGenerator(p)
        self.fast = W.CanalFastWriter(self.gen)
        self.table_of: array = array("H")
        self.ts_of: array = array("q")
        self._lock = threading.Lock()
        self.last_watermark = 0

    def watermark(self) -> None:
        """TIDB_WATERMARK to every partition: every change so far has a smaller commit_ts."""
        with self._lock:
            ts = self.gen._tso()
            m = self.fast.enc.encode_watermark(ts)
            assert m is not None
            for part in range(PARTITIONS):
                self.k.produce(W.TOPIC, value=m.value, key=m.key, partition=part)
            self.last_watermark = ts
        self.k.poll(0)

    def rows(self, n: int) -> None:
        tables, fast, produce = self.gen.tables, self.fast, self.k.produce
        with self._lock:
            for it in self.gen.stream(n):
                if not isinstance(it, W.Txn):
                    continue  # the stream's closing watermark: ours go out once a second
                for t, op, before, after in it.changes:
                    s = tables[t]
                    part = W.partition_of(s.db, s.table, (after or before)[0], PARTITIONS)
                    v = fast.row_value(t, op, before, after, it.ts).encode()
                    while True:
                        try:
                            produce(W.TOPIC, value=v, partition=part)
                            break
                        except BufferError:
                            self.k.poll(0.05)
                    self.table_of.append(t)
                    self.ts_of.append(it.ts)
        self.k.poll(0)

    def run_for(self, rate: float, seconds: float) -> tuple[int, int, float]:
        """`rate` row events/s for `seconds`, a watermark each second. Returns the index
        range of the changes made and the rate achieved."""
        first, last, achieved, _ = self._paced(rate, seconds, None, 0.0)
        return first, last, achieved

    def run_until(self, rate: float, cond, limit: float, every: float = 2.0) -> float | None:
        """`rate` row events/s, a watermark each second, until `cond()` (asked every
        `every` seconds): the seconds it took, or None after `limit`. The load goes on
        while the changes made before are waited for."""
        return self._paced(rate, limit, cond, every)[3]

    def _paced(
        self, rate: float, seconds: float, cond, every: float
    ) -> tuple[int, int, float, float | None]:
        first = len(self.ts_of)
        t0 = time.monotonic()
        next_wm = t0 + 1.0
        next_check = t0
        made = 0
        took = None
        while True:
            now = time.monotonic()
            if now >= t0 + seconds:
                break
            if cond is not None and now >= next_check:
                if cond():
                    took = time.monotonic() - t0
                    break
                next_check = time.monotonic() + every
            due = int(rate * (now - t0)) - made
            if due > 0:
                before = len(self.ts_of)
                self.rows(due)
                made += len(self.ts_of) - before
            if now >= next_wm:
                self.watermark()
                next_wm += 1.0
            time.sleep(0.005)
        self.watermark()
        self.k.flush(60)
        return first, len(self.ts_of), made / max(time.monotonic() - t0, 1e-9), took

    def close(self) -> None:
        """Deliver what is queued (briefly) and drop the client, before its broker goes:
        librdkafka would otherwise keep reconnecting to it."""
        k, self.k = self.k, None
        if k is not None:
            k.flush(10)

    def idle_until(self, cond, limit: float) -> float | None:
        """Watermarks once a second (as TiCDC sends them with no writes) until `cond()`;
        the seconds it took, or None after `limit`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if cond():
                return time.monotonic() - t0
            self.watermark()
            time.sleep(1.0)
        return None


def _project(
    root: Path,
    bootstrap: str,
    tables: int,
    target_lag: str,
    retention: str | None = None,
    rewrite_below: str | None = None,
) -> Path:
    import yaml

    root.mkdir(parents=True)
    staging = f"staging:\n  retention: {retention}\n" if retention else ""
    below = f"  rewrite_below: {rewrite_below}\n" if rewrite_below is not None else ""
    (root / "ticdc_sync.yml").write_text(
        f"name: bench\nprofile: bench\ndefaults:\n  target_lag: {target_lag}\n{below}{staging}"
    )
    profile = {
        "bench": {
            "target": "dev",
            "outputs": {
                "dev": {
                    "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
                    "warehouse": "warehouse",
                    "transport": {"type": "kafka", "bootstrap_servers": bootstrap},
                }
            },
        }
    }
    (root / "profiles.yml").write_text(yaml.safe_dump(profile, sort_keys=True))
    (root / "sources").mkdir()
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: src\n    protocol: canal-json\n    topics: [{W.TOPIC}]\n"
        "    options:\n      enable-tidb-extension: true\n"
    )
    (root / "tables").mkdir()
    (root / "tables" / "t.yml").write_text(
        f'tables:\n  - upstream: "{W.DB}.*"\n    name: "{{table}}"\n'
    )
    (root / "schema").mkdir()
    (root / "schema" / "bench.sql").write_text(
        "".join(W.schema_sql(s) for s in W.bench_tables(tables))
    )
    return root


def _latest_applied(wh: Path, name: str) -> int:
    """`applied_ts` of the newest ticdc-sync commit of target `name` (-1 if none yet),
    from its `_delta_log` files, newest first."""
    from ticdc_sync.core.window import Marker
    from ticdc_sync.warehouse.locations import target_location

    log = Path(target_location(str(wh), name)) / "_delta_log"
    for f in sorted(log.glob("*.json"), reverse=True):
        for line in f.read_text().splitlines():
            if line.startswith('{"commitInfo"'):
                m = Marker.from_user_metadata(json.loads(line)["commitInfo"].get("userMetadata"))
                if m is not None and m.applied_ts >= 0:
                    return m.applied_ts
    return -1


def _all_visible(root: Path, prod: Producer, upto: int, names: list[str]):
    """A check: is every change before index `upto` in its target (by the Delta logs)?"""
    last: dict[int, int] = {}
    for i in range(upto - 1, -1, -1):
        t = prod.table_of[i]
        if t not in last:
            last[t] = prod.ts_of[i]
            if len(last) == len(names):
                break

    def cond() -> bool:
        wh = root / "warehouse"
        return all(_latest_applied(wh, names[t]) >= ts for t, ts in last.items())

    return cond


def visibility(wh: Path, names: list[str]) -> dict[str, tuple[list[int], list[int]]]:
    """Per target: its ticdc-sync commits' (applied_ts, commit time in ms), in version order."""
    from ticdc_sync.core.window import Marker
    from ticdc_sync.warehouse.locations import target_location

    out = {}
    for name in names:
        log = Path(target_location(str(wh), name)) / "_delta_log"
        ats, tms = [], []
        for f in sorted(log.glob("*.json")):
            for line in f.read_text().splitlines():
                if not line.startswith('{"commitInfo"'):
                    continue
                info = json.loads(line)["commitInfo"]
                m = Marker.from_user_metadata(info.get("userMetadata"))
                if m is not None and m.applied_ts >= 0:
                    ats.append(m.applied_ts)
                    tms.append(int(info["timestamp"]))
        out[name] = (ats, tms)
    return out


def lags_ms(prod: Producer, lo: int, hi: int, vis, names: list[str]):
    """Lag (ms) of changes [lo, hi): visible time minus commit_ts's physical part; -1
    for a change not visible yet. Also each change's commit time (ms)."""
    lag, commit_ms, _, _ = visible_at(prod, lo, hi, vis, names)
    return lag, commit_ms


def visible_at(prod: Producer, lo: int, hi: int, vis, names: list[str]):
    """`lags_ms`, and per change its table's index and the index (in `vis[name]`) of the
    target commit that made it visible (-1: none yet)."""
    import numpy as np

    ts = np.frombuffer(prod.ts_of, dtype=np.int64)[lo:hi]
    tb = np.frombuffer(prod.table_of, dtype=np.uint16)[lo:hi]
    commit_ms = ts >> 18
    lag = np.full(len(ts), -1, dtype=np.int64)
    at = np.full(len(ts), -1, dtype=np.int64)
    for t, name in enumerate(names):
        sel = tb == t
        if not sel.any():
            continue
        ats, tms = vis[name]
        a = np.maximum.accumulate(np.array(ats, dtype=np.int64)) if ats else np.array([])
        idx = np.searchsorted(a, ts[sel], side="left")
        ok = idx < len(a)
        tm = np.array(tms, dtype=np.int64)
        got = np.full(int(sel.sum()), -1, dtype=np.int64)
        got[ok] = tm[idx[ok]] - commit_ms[sel][ok]
        lag[sel] = got
        at[sel] = np.where(ok, idx, -1)
    return lag, commit_ms, tb, at


def _stats(lag) -> dict:
    import numpy as np

    seen = lag[lag >= 0]
    if not len(seen):
        return {"n": len(lag), "missing": len(lag)}
    return {
        "n": int(len(lag)),
        "missing": int((lag < 0).sum()),
        "p50": float(np.percentile(seen, 50)) / 1000,
        "p99": float(np.percentile(seen, 99)) / 1000,
        "max": float(seen.max()) / 1000,
    }


def _kept_up(lag, commit_ms, drained: float | None) -> dict:
    """The ramp step's verdict: the lag did not grow from its middle third to its last."""
    import numpy as np

    t0, t1 = int(commit_ms.min()), int(commit_ms.max())
    third = (t1 - t0) / 3
    mid = lag[(commit_ms >= t0 + third) & (commit_ms < t0 + 2 * third)]
    last = lag[commit_ms >= t0 + 2 * third]
    if drained is None or (mid < 0).any() or (last < 0).any() or not len(mid) or not len(last):
        return {"ok": False, "mid": None, "last": None, "drain": drained}
    m, la = float(np.median(mid)) / 1000, float(np.median(last)) / 1000
    return {"ok": la <= 1.5 * m + 2.0, "mid": m, "last": la, "drain": drained}


class Follower:
    """One follower and what it follows: a local broker with the topic, a project over
    `tables` tables with `target_lag`, a `Producer`, and `ticdc-sync run --follow -v` as a
    subprocess of its own session. A context manager: on exit the follower is killed if
    it still runs, the broker closed, and the follower's log copied to `keep`."""

    def __init__(
        self,
        tmp: Path,
        tables: int,
        target_lag: str,
        keep: Path,
        retention: str | None = None,
        rewrite_below: str | None = None,
    ) -> None:
        self.tmp = tmp
        self.tables = tables
        self.target_lag = target_lag
        self.retention = retention  # `staging.retention` (None: ticdc-sync's default)
        self.rewrite_below = rewrite_below  # `defaults.rewrite_below` (None: the default)
        self.keep = keep
        self.names = [s.table for s in W.bench_tables(tables)]
        self.log = tmp / "follow.log"
        self.root = tmp / "follow"
        self.proc: subprocess.Popen | None = None
        self.broker = _broker_module().KafkaBroker(tmp / "kafka", die_with_parent=True)

    def __enter__(self) -> Follower:
        missing = producer_missing()
        if missing is not None:
            raise RuntimeError(f"{missing} (hint: {BENCH_EXTRA})")  # before the broker starts
        try:
            bootstrap = self.broker.start()
            self.broker.create_topic(W.TOPIC, partitions=PARTITIONS)
            _project(
                self.root,
                bootstrap,
                self.tables,
                self.target_lag,
                self.retention,
                self.rewrite_below,
            )
            self.prod = Producer(bootstrap, self.tables)
            self._spawn()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _spawn(self) -> None:
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ticdc_sync.commands.cli",
                    "run",
                    "--follow",
                    "-v",
                    "--project",
                    str(self.root),
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.root,
                start_new_session=True,
            )

    @property
    def wh(self) -> Path:
        return self.root / "warehouse"

    def alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise SystemExit(f"follower exited ({self.proc.returncode}):\n{_tail(self.log)}")

    def all_visible(self, upto: int):
        """A check: is every change before index `upto` in its target, follower alive?"""
        cond = _all_visible(self.root, self.prod, upto, self.names)
        return lambda: (self.alive(), cond())[1]

    def stop(self, wait: float = 180.0) -> None:
        """SIGTERM (staging ends, applies in flight finish their step); killed after `wait`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            print(f"  follower did not stop within {wait:.0f}s of SIGTERM; killed", flush=True)

    def __exit__(self, *_exc) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        finally:
            prod = getattr(self, "prod", None)
            if prod is not None:
                prod.close()
            self.broker.close()
            if self.log.exists():
                self.keep.parent.mkdir(parents=True, exist_ok=True)
                self.keep.write_bytes(self.log.read_bytes())


def measure_freshness(
    seconds: float,
    rate: float,
    ramp: tuple[float, ...],
    ramp_seconds: float,
    tables: int,
    tmp: Path,
) -> dict:
    res: dict = {"rate": rate, "seconds": seconds, "tables": tables, "ramp": []}
    with Follower(tmp, tables, "0", W.OUT / "freshness-follow.log") as f:
        root, prod, names, log = f.root, f.prod, f.names, f.log
        # Warm-up: the JVM starts, the targets are created; none of it is counted.
        t0 = time.monotonic()
        _, hi, _ = prod.run_for(rate, WARMUP_S)
        took = prod.idle_until(f.all_visible(hi), 600)
        if took is None:
            raise SystemExit(f"warm-up not applied within 600s:\n{_tail(log)}")
        print(f"  follower warm ({time.monotonic() - t0:.0f}s incl. JVM start)", flush=True)

        b0 = len(_batches(log))
        lo, hi, achieved = prod.run_for(rate, seconds)
        b1 = len(_batches(log))
        drained = prod.idle_until(f.all_visible(hi), DRAIN_LIMIT_S)
        vis = visibility(root / "warehouse", names)
        lag, _ = lags_ms(prod, lo, hi, vis, names)
        res["steady"] = {
            **_stats(lag),
            "achieved": achieved,
            "drain": drained,
            **_batch_summary(_batches(log)[b0:b1]),
        }
        print(f"  steady {rate:,.0f} ev/s for {seconds:.0f}s: {res['steady']}", flush=True)

        for r in ramp:
            b0 = len(_batches(log))
            lo, hi, achieved = prod.run_for(r, ramp_seconds)
            b1 = len(_batches(log))
            drained = prod.idle_until(f.all_visible(hi), DRAIN_LIMIT_S)
            vis = visibility(root / "warehouse", names)
            lag, cms = lags_ms(prod, lo, hi, vis, names)
            step = {
                "rate": r,
                "achieved": achieved,
                **_stats(lag),
                **_kept_up(lag, cms, drained),
                **_batch_summary(_batches(log)[b0:b1]),
            }
            res["ramp"].append(step)
            print(f"  ramp {r:,.0f} ev/s for {ramp_seconds:.0f}s: {step}", flush=True)
            if drained is None:
                break  # not drained: a higher rate will not be kept up either
        f.stop()
    return res


def _tail(log: Path, n: int = 40) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(lines[-n:])


# The line `run --follow -v` prints for each poll's staging commit (`spark/staging/batch.py`).
STAGE_LINE = re.compile(r"read\+decode \S+: (\d+) new event\(s\) staged \(([\d.]+)s\)")


def _batches(log: Path) -> list[tuple[int, float]]:
    """(events staged, seconds) of each staging commit the follower reported so far (one
    per poll; the whole log is kept in benchmarks/out/)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [
        (int(m.group(1)), float(m.group(2)))
        for m in (STAGE_LINE.search(x) for x in text.splitlines())
        if m
    ]


def _batch_summary(batches: list[tuple[int, float]]) -> dict:
    """How many staging commits a phase took, their mean length and size."""
    if not batches:
        return {"batches": 0}
    return {
        "batches": len(batches),
        "batch_s": sum(b[1] for b in batches) / len(batches),
        "batch_events": sum(b[0] for b in batches) / len(batches),
        "batch_s_max": max(b[1] for b in batches),
    }
