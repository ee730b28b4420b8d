"""`ticdc-sync run --follow` killed with SIGKILL in the middle of the staging table's maintenance:
during a compaction, during a trim's DELETE, during a target's compaction and VACUUM
(`maintenance:` makes both due at each look), and during a poll staged beside either. After each
kill, a read as of TSOs up to the resolved one equals the upstream at them (or is refused as
trimmed, never wrong); a plain run then stages the rest and applies everything, the targets
equal the upstream, and what the killed trims left below their bound is gone.

A real broker, records produced while the followers run, the staging
retention at one second of TiDB time so that trims delete as the stream moves, and the
follower's maintenance made frequent (`tests.follow_maintenance_child`: a trim at every poll,
a compaction every few files), which prints when each maintenance step and each staging
commit begins and ends: the kill is sent only while the step it aims at is running.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from testkit.history import HistoryConfig, encode, generate
from tests.kafka.helpers import broker_module, kafka_project, produce_records
from tests.kafka.test_e2e_protocols import check_targets
from tests.processes import kill_tree
from tests.spark.engine_harness import collect_each, load
from tests.spark.truth import assert_table_equals, schema_sql
from ticdc_sync.core.errors import UserError
from ticdc_sync.read import snapshot as snap
from ticdc_sync.spark import runner
from ticdc_sync.spark.as_of import as_of
from ticdc_sync.spark.staging.table import Staging
from ticdc_sync.warehouse.locations import warehouse_path

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "maint"
# What a read may answer instead of rows: the TSO's staged changes were trimmed, or the
# killed run had not created the targets yet, or none of their versions is that old.
REFUSALS = ("were trimmed", "has no Delta table yet", "older than every readable version")


class Follower:
    """`tests.follow_maintenance_child` on `root`, its lines collected as they come."""

    def __init__(self, root: Path, log: Path) -> None:
        env = {**os.environ, "TZ": "UTC", "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"}
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.follow_maintenance_child", str(root)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.seen = threading.Condition()
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log, "a") as fh:
            for line in self.proc.stdout:
                fh.write(line)
                with self.seen:
                    self.lines.append(line.rstrip("\n"))
                    self.seen.notify_all()

    def last(self, *names: str) -> str | None:
        """The newest marker line of one of `names` (`STAGE`, `TRIM`, `COMPACT`)."""
        with self.seen:
            return next((x for x in reversed(self.lines) if x.split(" ")[0] in names), None)

    def count(self, line: str) -> int:
        with self.seen:
            return sum(1 for x in self.lines if x == line)

    def running(self, *names: str) -> bool:
        """Whether one of `names` has begun and not ended yet."""
        found = self.last(*names)
        return found is not None and found.endswith(" start")

    def wait(self, cond: Callable[[], bool], seconds: float) -> bool:
        """Wait for `cond` (asked as each line comes, and each second)."""
        deadline = time.monotonic() + seconds
        with self.seen:
            while not cond():
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return cond()
                self.seen.wait(min(1.0, left))
        return True

    def kill(self) -> None:
        kill_tree(self.proc.pid)
        self.proc.wait(timeout=60)
        self.reader.join(timeout=10)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])


def check_reads(spark, root: Path, history, resolved: list[int], rng, what: str) -> int:
    """Reads as of the resolved TSO and up to 3 earlier resolved TSOs: each equals the
    upstream there, or is refused for one of `REFUSALS`; how many were read. The newest
    is never refused once the targets exist."""
    project = load(root)
    try:
        latest = snap.snapshot(project, "latest").at.tso
    except Exception:  # noqa: BLE001 - killed before anything was resolved
        return 0
    below = [t for t in resolved if t < latest]
    tsos = sorted({latest, *rng.sample(below, min(3, len(below)))})
    checks = []
    for tso in tsos:
        try:
            read = as_of(spark, project, tso)
        except UserError as e:
            assert any(r in str(e) for r in REFUSALS), f"{what}: as of {tso}: {e}"
            assert tso != latest or "has no Delta table yet" in str(e), f"{what}: {e}"
            continue
        truth, schemas = history.truth(tso)
        for qualified, rows in truth.items():
            schema = schemas[qualified]
            frame = read.frames[schema.table]
            checks.append((f"{what}: {qualified} as of {tso}", rows, schema, frame))
    got = collect_each([frame for *_, frame in checks])
    for (text, rows, schema, _), read_rows in zip(checks, got, strict=True):
        assert_table_equals(read_rows, rows, schema, text)
    return len(checks)


def test_sigkill_in_maintenance_and_in_a_poll_beside_it_loses_nothing(spark, tmp_path):
    # A broker of its own (as `test_follow`): not the session's, whose tests run on one
    # worker of a parallel run, one after the other.
    broker = broker_module().KafkaBroker(tmp_path / "kafka", die_with_parent=True)
    try:
        _run(spark, broker, tmp_path)
    finally:
        broker.close()


def _run(spark, broker, tmp_path) -> None:
    bootstrap = broker.start()
    history = generate(
        HistoryConfig(seed=23, transactions=120, partitions=3, dispatch="index-value", ddl_count=0)
    )
    enc = encode(history, "canal-json", TOPIC)
    pieces = enc.chunks(16)
    broker.create_topic(TOPIC, partitions=3)
    sql = "".join(schema_sql(s) for s in history.initial.values())
    root = kafka_project(
        tmp_path / "p",
        bootstrap,
        protocol="canal-json",
        topic=TOPIC,
        schema_sql=sql,
        master="local[2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    # Every target applied at each poll, and what they applied trimmed once the stream is
    # half a second (TiDB time) past it: the history spans about two and a half.
    (root / "ticdc_sync.yml").write_text(
        "name: test\nprofile: test\ndefaults:\n  target_lag: 0s\n  maintenance:\n"
        "    compact_small_files: 2\n    vacuum_every: 0\n    retain: 1h\n"
        "staging:\n  retention: 500ms\n"
    )
    # Every TSO a read as of `latest` could have been at: each rise of the resolved TSO.
    resolved = sorted({s.commit_ts for s in history.steps if s.kind == "watermark"})
    rng = random.Random(58)
    log = tmp_path / "followers.log"
    produced = 0

    def produce_next(upto: int = len(pieces)) -> None:
        nonlocal produced
        if produced < min(upto, len(pieces)):
            produce_records(spark, bootstrap, TOPIC, pieces[produced])
            produced += 1

    produce_next()
    reads = 0
    # Each follower is killed once the step named runs (`aim`), a moment into it. The
    # first two leave pieces of the stream for the poll the third is killed in.
    aims: list[tuple[str, Callable[[Follower], bool], int]] = [
        ("a compaction", lambda f: f.running("COMPACT"), 6),
        ("a trim", lambda f: f.running("TRIM"), 11),
        ("a target's compaction or VACUUM", lambda f: f.running("MAINTAIN"), 14),
        (
            "a poll beside a trim or a compaction",
            lambda f: f.running("TRIM", "COMPACT") and f.running("STAGE"),
            len(pieces),
        ),
    ]
    for what, aim, upto in aims:
        f = Follower(root, log)
        try:
            hit = False
            deadline = time.monotonic() + 300
            polls = 0
            while not hit and time.monotonic() < deadline:
                # A piece of the stream for each poll keeps the polls staging, the
                # targets applying, the staging files adding up and the trims' bounds
                # rising.
                if not f.wait(lambda f=f, aim=aim: aim(f), 2.0):
                    assert f.proc.poll() is None, f"follower exited:\n{f.tail()}"
                    if f.count("STAGE end") > polls:
                        polls = f.count("STAGE end")
                        produce_next(upto)
                    continue
                time.sleep(rng.uniform(0.05, 0.4))
                # Killed only if the step is still running (else wait for the next one).
                if aim(f):
                    f.kill()
                    hit = True
            assert hit, f"no {what} to kill within the time:\n{f.tail()}"
        finally:
            if f.proc.poll() is None:
                f.kill()
        reads += check_reads(spark, root, history, resolved, rng, f"killed in {what}")

    # What the kills left, taken up by a plain run (it stages the rest, applies it, and
    # trims at its end, waiting for the DELETEs: also those the kills cut short).
    produce_next()
    while produced < len(pieces):
        produce_next()
    project = load(root)
    lines: list[str] = []
    assert runner.run(project, spark=spark, out=lines.append) == 0, "\n".join(lines)
    check_targets(spark, project, enc.truth, enc.schemas, "after the kills")
    reads += check_reads(spark, root, history, resolved, rng, "at the end")
    assert reads > 0
    text = log.read_text()
    assert "TRIM end" in text or "older than the retention deleted" in "\n".join(lines)

    # Trimmed to its bound (nothing the kills left below it stays), and no position
    # staged twice by the runs the kills cut short.
    staging = Staging(spark, warehouse_path(project))
    bound = staging.tally("src").trimmed
    assert bound is not None and bound > 0
    events = staging.events()
    below = events.where(f"kind IN ('row', 'watermark', 'empty') AND commit_ts <= {bound}")
    assert below.count() == 0
    twice = events.groupBy("topic", "partition", "offset", "idx").count().where(F.col("count") > 1)
    assert twice.limit(5).collect() == []
