"""One `run` per warehouse at a time, wherever the runs are: a lease kept in a Delta table.

The lease is the one row of `<warehouse>/_ticdc_sync/run_lease`: who holds it (host, pid,
a random token), when it was acquired and last renewed, when it expires, and whether it
was released. Every change is a Delta commit made with delta-rs at exactly the version
after the one it read (`max_commit_retries=0`: no rebasing onto a newer version), so of two
runs that read version V and both commit V+1, one commit lands and the other fails. That
is what makes the lease exclusive across machines: on a local file system the commit file
is created atomically (create-if-absent); on S3 delta-rs writes it with a conditional
PutObject (`If-None-Match: *`, which AWS S3 and S3-compatible servers such as MinIO and
S3Proxy honour); Azure and GCS have their own create-if-absent.

A run takes the lease before it starts Spark (`RunLease.__enter__`), renews it from a
background thread every `ttl/6` seconds while it works, checks it before each Delta commit
(`check`, through `check_active`) and releases it at the end. A lease whose holder stopped
renewing expires `ttl` seconds after its last renewal and the next run takes it over; on
the same machine a holder whose process is gone (killed) is taken over at once. A run that
finds its lease lost, or that could not renew it for `ttl/2` seconds, stops before its next
commit with `LeaseLost`. What a lease cannot do: stop a commit already in flight in a
holder that was paused (or cut off from the warehouse) for longer than the ttl; see
docs/operations.md "One run at a time". Expiry compares the holder's clock with the taker's, so the
machines' clocks must agree to well within the ttl.

Pure core: imports no pyspark and touches nothing but the lease table.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from ticdc_sync.core import crash_points
from ticdc_sync.core.errors import Fatal, UserError
from ticdc_sync.core.lake import storage_options, table_uri
from ticdc_sync.warehouse.locations import state_location

Out = Callable[[str], None]

LEASE_TABLE = "run_lease"
DEFAULT_TTL_SECONDS = 120.0  # as model.Output.run_lease_ttl
MIN_TTL_SECONDS = 1.0
HELD, RELEASED = "held", "released"
# Renew six times per ttl: two renewals may fail in a row and the holder still has half
# the ttl left when it stops (`check`).
RENEWALS_PER_TTL = 6
# How often a waiting run looks at the lease again (at most).
WAIT_POLL_SECONDS = 2.0
# Old lease rows are removed by VACUUM once this old; the log is cleaned up at checkpoints.
TABLE_PROPERTIES = {
    "delta.deletedFileRetentionDuration": "interval 1 hours",
    "delta.logRetentionDuration": "interval 1 days",
}
VACUUM_EVERY = 180  # renewals (an hour at the default ttl)

SCHEMA = pa.schema(
    [
        pa.field("holder", pa.string()),
        pa.field("host", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("token", pa.string()),
        pa.field("process", pa.string()),
        pa.field("state", pa.string()),
        pa.field("acquired_at", pa.timestamp("us", tz="UTC")),
        pa.field("renewed_at", pa.timestamp("us", tz="UTC")),
        pa.field("expires_at", pa.timestamp("us", tz="UTC")),
        pa.field("ttl_seconds", pa.float64()),
    ]
)


class LeaseHeld(UserError):
    """Another run holds the warehouse's run lease."""


class LeaseLost(UserError, Fatal):
    """This run no longer holds the warehouse's run lease: it must not commit (the whole
    run stops: `errors.Fatal`)."""


@dataclass(frozen=True)
class Lease:
    """One lease row."""

    holder: str
    host: str
    pid: int
    token: str
    process: str | None
    state: str
    acquired_at: dt.datetime
    renewed_at: dt.datetime
    expires_at: dt.datetime
    ttl_seconds: float

    def expired(self, now: dt.datetime) -> bool:
        return now >= self.expires_at

    def describe(self) -> str:
        return (
            f"{self.holder}, holding it since {_text(self.acquired_at)} (renewed "
            f"{_text(self.renewed_at)}, expires {_text(self.expires_at)})"
        )

    def state_at(self, now: dt.datetime) -> str:
        """`held`, `expired` (its holder stopped renewing it) or `released`."""
        if self.state == RELEASED:
            return RELEASED
        return "expired" if self.expired(now) else HELD

    def summary(self, now: dt.datetime) -> str:
        """One line for `status`."""
        state = self.state_at(now)
        if state == HELD:
            return f"held by {self.describe()}"
        if state == RELEASED:
            return f"free (last held by {self.holder}, released {_text(self.renewed_at)})"
        return (
            f"expired: {self.holder} stopped renewing it at {_text(self.renewed_at)} "
            "(the next run takes it over)"
        )

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist(
            [{f.name: getattr(self, f.name) for f in SCHEMA}], schema=SCHEMA
        )

    @staticmethod
    def from_row(row: Mapping) -> Lease:
        return Lease(**{f.name: row[f.name] for f in SCHEMA})


def _text(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def read_lease(warehouse: str, env: Mapping[str, str] | None = None) -> Lease | None:
    """The warehouse's lease row as it is now; None where no run has taken it yet. Reads
    only (for `status`)."""
    return RunLease(warehouse, out=lambda s: None, env=env)._safe_read()[1]


def utc_now() -> dt.datetime:
    return _now()


# --- is a holder on this machine still alive? ---------------------------------------------


def _boot_and_namespace() -> str | None:
    """This kernel's boot id and this process's pid namespace (Linux), or None.

    Two processes see each other's pids only in the same pid namespace of the same running
    kernel; the boot id differs between machines (and reboots), so a holder elsewhere is
    never judged by a pid that means nothing here."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{ns}"


def _start_ticks(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22), so
    that a pid reused by a new process is not mistaken for the holder."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def process_identity(pid: int | None = None) -> str | None:
    """`<boot id>/<pid namespace>/<pid>/<start ticks>` of a process here, or None."""
    pid = os.getpid() if pid is None else pid
    where, start = _boot_and_namespace(), _start_ticks(pid)
    if where is None or start is None:
        return None
    return f"{where}/{pid}/{start}"


def gone_here(lease: Lease) -> bool:
    """Whether the lease's holder ran on this machine (same kernel boot, same pid
    namespace) and that process no longer exists. False wherever that cannot be known."""
    if not lease.process:
        return False
    where = _boot_and_namespace()
    head, _, rest = lease.process.rpartition("/")
    where_pid, _, pid = head.rpartition("/")
    if where is None or where_pid != where:
        return False
    try:
        return _start_ticks(int(pid)) != rest
    except ValueError:
        return False


# --- the lease ----------------------------------------------------------------------------


class RunLease:
    """The run lease of one warehouse, as taken by this process.

    `with RunLease(warehouse) as lease:` takes it (or raises `LeaseHeld`), renews it in a
    background thread, and releases it at the end. `check()` raises `LeaseLost` once this
    run may no longer commit."""

    def __init__(
        self,
        warehouse: str,
        *,
        ttl: float = DEFAULT_TTL_SECONDS,
        wait: float = 0.0,
        out: Out = print,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if ttl < MIN_TTL_SECONDS:
            raise ValueError(f"ttl must be at least {MIN_TTL_SECONDS}s")
        self.warehouse = warehouse
        self.location = state_location(warehouse, LEASE_TABLE)
        self.uri = table_uri(self.location)
        self.options = storage_options(self.uri, env)
        if self.uri.startswith("s3://"):
            # Commits must be create-if-absent (If-None-Match); delta-rs sets this for S3
            # itself, said here so that a change of its default cannot undo it.
            self.options["conditional_put"] = "etag"
        self.ttl = float(ttl)
        self.wait = float(wait)
        self.out = out
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.token = secrets.token_hex(8)
        self.holder = f"{self.host} pid {self.pid}"
        self._lock = threading.RLock()
        self._table: DeltaTable | None = None
        self._mine: Lease | None = None  # the row of our newest commit
        self._renewed_mono = 0.0  # monotonic time at which our newest renewal was started
        self._lost: str | None = None
        # The lease this run took over from a holder that died or stopped renewing (its
        # work may live on elsewhere: a Spark Connect server's sessions), else None.
        self.taken_over: Lease | None = None
        self._last_error: str | None = None
        self._renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- reading -------------------------------------------------------------------------

    def read(self) -> tuple[DeltaTable | None, Lease | None]:
        """The lease table as it is now and its row (None, None where there is none)."""
        try:
            table = DeltaTable(self.uri, storage_options=self.options)
        except TableNotFoundError:
            return None, None
        # DataFusion (QueryBuilder), not `to_pyarrow_table`: a process that read through
        # pyarrow's dataset scanner sometimes aborts at exit ("terminate called without an
        # active exception"), which would turn a refused run's exit code 1 into SIGABRT.
        reader = QueryBuilder().register("lease", table).execute("SELECT * FROM lease")
        rows = pa.RecordBatchReader.from_stream(reader).read_all().to_pylist()
        # One row always; anything else was written by hand and counts as no lease (the
        # next commit still has to land at the version after this one).
        return table, Lease.from_row(rows[0]) if len(rows) == 1 else None

    # --- taking, renewing, releasing ---------------------------------------------------------

    def acquire(self) -> RunLease:
        """Take the lease, waiting up to `wait` seconds for its holder; else `LeaseHeld`."""
        deadline = time.monotonic() + self.wait
        announced = False
        while True:
            table, current = self._safe_read()
            now = _now()
            if current is None or current.state == RELEASED or current.expired(now):
                why = None
                if current is not None and current.state == HELD:
                    why = f"its lease expired at {_text(current.expires_at)}"
            elif gone_here(current) or crash_points.abandoned(current.token):
                # (abandoned: left by a run a test stopped at a crash point in this process,
                # which stands for a process that is gone)
                why = "its process is gone"
            else:
                if time.monotonic() < deadline:
                    if not announced:
                        self.out(f"waiting for the run lease: held by {current.describe()}")
                        announced = True
                    time.sleep(min(WAIT_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
                    continue
                raise LeaseHeld(
                    f"warehouse {self.warehouse} is in use by another `ticdc-sync run`: "
                    f"{current.describe()} (lease table {self.location}) (hint: wait for "
                    "that run to finish, or use `run --wait SECONDS`; a run that died "
                    f"releases nothing, its lease expires {current.ttl_seconds:.0f}s after "
                    "its last renewal and the next run takes it over then)"
                )
            crash_points.reach("lease.acquire")
            if self._commit(table, self._row(now, acquired=now), "acquire"):
                if why is not None and current is not None:
                    self.taken_over = current
                    self.out(f"took over the run lease of {current.holder}: {why}")
                self._tidy()
                return self

    def renew(self) -> None:
        """One renewal commit; `LeaseLost` if another run committed to the lease since."""
        with self._lock:
            if self._lost is not None:
                raise self._lost_error()
            assert self._mine is not None
            crash_points.reach("lease.renew")
            started = time.monotonic()
            row = self._row(_now(), acquired=self._mine.acquired_at)
            if not self._commit(self._table, row, "renew", started=started):
                self._confirm()
                if self._lost is not None:
                    raise self._lost_error()
                # The commit had landed after all (its answer was lost): ours is newest.
                self._renewed_mono = started
            self._renewals += 1
            if self._renewals % VACUUM_EVERY == 0:
                self._tidy()

    def release(self) -> None:
        """Give the lease back (a released row), unless it was lost."""
        self._stop_renewing()
        with self._lock:
            if self._mine is None or self._lost is not None:
                return
            try:
                crash_points.reach("lease.release")
            except crash_points.SimulatedCrash:
                # Stopped at a crash point: the lease stays held, as a killed run leaves it.
                crash_points.abandon(self.token)
                self._mine = None
                raise
            now = _now()
            row = dataclasses.replace(self._mine, state=RELEASED, renewed_at=now, expires_at=now)
            try:
                self._commit(self._table, row, "release")
            except (DeltaError, OSError) as e:
                self.out(
                    f"warning: could not release the run lease ({_first_line(e)}); it "
                    f"expires {self.ttl:.0f}s after its last renewal"
                )
            self._mine = None

    def check(self) -> None:
        """Raise `LeaseLost` unless this run may still commit: it holds the lease and has
        renewed it within the last `ttl/2` seconds, so that the rest of the ttl covers a
        commit already under way."""
        if self._lost is not None:
            raise self._lost_error()
        if self._mine is None:
            raise LeaseLost(f"this run does not hold the run lease {self.location}")
        silent = time.monotonic() - self._renewed_mono
        if silent > self.ttl / 2:
            self._lost = (
                f"it could not be renewed for {silent:.0f}s "
                f"({self._last_error or 'the renewals did not run'})"
            )
            raise self._lost_error()

    def held(self) -> bool:
        """Whether this run holds the lease and may commit now (`check`, without raising):
        what a run's metrics report."""
        try:
            self.check()
        except LeaseLost:
            return False
        return True

    # --- context manager -------------------------------------------------------------------

    def __enter__(self) -> RunLease:
        self.acquire()
        global _ACTIVE
        _ACTIVE = self
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._renew_loop, name="ticdc-sync run lease", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None
        self.release()

    # --- internals ---------------------------------------------------------------------------

    def _row(self, now: dt.datetime, *, acquired: dt.datetime) -> Lease:
        return Lease(
            holder=self.holder,
            host=self.host,
            pid=self.pid,
            token=self.token,
            process=process_identity(),
            state=HELD,
            acquired_at=acquired,
            renewed_at=now,
            expires_at=now + dt.timedelta(seconds=self.ttl),
            ttl_seconds=self.ttl,
        )

    def _safe_read(self) -> tuple[DeltaTable | None, Lease | None]:
        try:
            return self.read()
        except (DeltaError, OSError) as e:
            raise UserError(
                f"{self.location}: cannot read the run lease: {_first_line(e)} (hint: check "
                "that the warehouse is reachable and writable; object-store credentials "
                "come from the environment)"
            ) from e

    def _commit(
        self, table: DeltaTable | None, row: Lease, what: str, *, started: float | None = None
    ) -> bool:
        """Commit `row` as the version after `table`'s (a new table if None); False if
        another commit got there first."""
        started = time.monotonic() if started is None else started
        props = CommitProperties(max_commit_retries=0, custom_metadata={"userMetadata": what})
        try:
            if table is None:
                write_deltalake(
                    self.uri,
                    row.to_arrow(),
                    mode="error",
                    name="ticdc-sync run lease",
                    description="One ticdc-sync run at a time per warehouse (ticdc_sync/warehouse/lease.py)",
                    configuration=TABLE_PROPERTIES,
                    storage_options=self.options,
                    commit_properties=props,
                )
                table = DeltaTable(self.uri, storage_options=self.options)
            else:
                write_deltalake(table, row.to_arrow(), mode="overwrite", commit_properties=props)
        except CommitFailedError:
            return False
        except DeltaError as e:
            # Two runs creating the table: the loser finds it there.
            if table is None and "already exists" in str(e):
                return False
            raise
        self._table, self._mine, self._renewed_mono = table, row, started
        return True

    def _confirm(self) -> None:
        """After a commit that did not land: read the lease; lost unless the row is ours."""
        table, current = self.read()
        if current is not None and current.token == self.token and current.state == HELD:
            self._table, self._mine = table, current
            return
        who = current.describe() if current is not None else "nobody (the row is gone)"
        self._lost = f"another run committed to it: it is now held by {who}"

    def _tidy(self) -> None:
        """Remove old lease rows (VACUUM commits twice), then make sure the lease is ours."""
        with self._lock:
            assert self._table is not None
            try:
                self._table.vacuum(dry_run=False)
            except (DeltaError, OSError) as e:
                self.out(f"warning: could not vacuum the run lease table ({_first_line(e)})")
            self._confirm()
            if self._lost is not None:
                raise self._lost_error()

    def _renew_loop(self) -> None:
        interval = self.ttl / RENEWALS_PER_TTL
        while not self._stop.wait(interval):
            try:
                self.renew()
                self._last_error = None
            except (LeaseLost, crash_points.SimulatedCrash):
                return  # (a run stopped at a crash point renews nothing more, as a dead one)
            except Exception as e:  # noqa: BLE001 - kept for check(); retried next round
                self._last_error = _first_line(e)
                self.out(f"warning: could not renew the run lease ({self._last_error})")

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def _lost_error(self) -> LeaseLost:
        return LeaseLost(
            f"this run lost the run lease of warehouse {self.warehouse}: {self._lost}; it "
            "stopped before its next commit, so what it committed stands and the next run "
            "continues from there (hint: a run loses its lease only when it could not renew "
            f"it for {self.ttl / 2:.0f}s, e.g. paused or cut off from the warehouse; check "
            "access to the warehouse, or raise `run_lease.ttl_seconds` in the profile)"
        )


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0].strip()[:300]


# The lease of the run in progress in this process, if any: Delta commits check it.
_ACTIVE: RunLease | None = None


def check_active() -> None:
    """Before a Delta commit: `LeaseLost` if this process runs under a lease it lost. A
    no-op without a lease (tests, notebooks calling the engine directly)."""
    lease = _ACTIVE
    if lease is not None:
        lease.check()
