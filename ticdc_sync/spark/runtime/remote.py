"""Spark Connect: a session that is a client of a server (`spark.remote`, `SPARK_REMOTE`),
what the server must have, and the few facts a classic session reads from its JVM.

`connect` opens a session to `sc://host:port` (first checking that this Python has the
`connect` extra: `spark_stack.connect_extra_error`), checks the server (its Spark version, Delta
configured, the Delta and Kafka jars where it names them) and fails with a UserError naming
what to change; it sets the run's SQL settings on the session (a server's static settings
cannot be set from a client: also a UserError), and uploads ticdc_sync itself as a Python
artifact of the session, so that the server's Python workers (the Open Protocol decoder)
run this client's code whatever the server has installed. `is_connect` is the one switch
between a classic session and a Connect one; `default_parallelism` and `num_partitions`
answer for both. (How to start a server for ticdc-sync: `session.server_args`.)

A client killed with SIGKILL leaves its operations running on the server, which may still
commit. Its session ids are derived from the run lease's token (`session_id`), so the run
that takes the lease over finds that client's sessions and stops what they still run
before it reads any state (`stop_orphans`).

Must not: decide anything a run does, or import pyspark at module level.
"""

from __future__ import annotations

import io
import os
import re
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ticdc_sync.core import spark_stack
from ticdc_sync.core.errors import UserError

CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
# Session ids are UUIDs (Spark Connect requires it): version 5 of the lease token.
_NAMESPACE = uuid.UUID("6f0e6b8e-5b55-4c1b-9d4e-7c1c0d2a9a61")
# How long `stop_orphans` waits for a dead client's operations to end once interrupted.
ORPHAN_WAIT_SECONDS = 600.0
# Sessions a run opens beside its own (`fanout`): looked for up to this many.
MAX_SLOTS = 64


def is_connect(obj: Any) -> bool:
    """Whether `obj` (a SparkSession or DataFrame) is a Spark Connect one."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


# --- a session ----------------------------------------------------------------------------


def session_id(token: str, slot: int | None = None) -> str:
    """The session id of a run whose lease token is `token` (`slot`: of its `slot`-th
    session beside it, `fanout`)."""
    base = uuid.uuid5(_NAMESPACE, token)
    return str(base if slot is None else uuid.uuid5(base, f"slot-{slot}"))


def slot_id(base_session_id: str, slot: int) -> str:
    """The id of the `slot`-th session beside the session `base_session_id`."""
    return str(uuid.uuid5(uuid.UUID(base_session_id), f"slot-{slot}"))


def _with_session(remote: str, sid: str | None) -> str:
    """`remote` with `session_id=` among its parameters (`sc://h:p/;k=v;...`)."""
    if sid is None:
        return remote
    base, _, params = remote.partition("/;")
    kept = [p for p in params.split(";") if p and not p.startswith("session_id=")]
    return f"{base.rstrip('/')}/;" + ";".join([*kept, f"session_id={sid}"])


def open_session(remote: str, sid: str | None = None):
    """A new Spark Connect session on `remote` (with the session id `sid`), unchecked."""
    from pyspark.sql.connect.session import SparkSession

    # `pyspark.sql.functions` and friends build Spark Connect expressions only while this
    # is set (what pyspark's own builder sets for a remote session): for this process.
    os.environ[CONNECT_MODE_ENV] = "1"
    try:
        return SparkSession.builder.remote(_with_session(remote, sid)).create()
    except Exception as e:
        raise unreachable(remote, e) from e


def unreachable(remote: str, e: BaseException) -> UserError:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    return UserError(
        f"cannot use the Spark Connect server {remote}: {first} (hint: check that the server "
        "is running and reachable, and the address in the profile's spark.remote or "
        "$SPARK_REMOTE; docs/operations.md, Spark Connect)"
    )


# Spark Connect's default port, when an `sc://` address names none.
DEFAULT_PORT = 15002
REACH_TIMEOUT_S = 10.0


def check_reachable(remote: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """A UserError at once when nothing accepts a connection at `remote`'s host and port:
    the client would otherwise retry for minutes before it says anything."""
    import socket
    import urllib.parse

    url = urllib.parse.urlparse("http" + remote.removeprefix("sc").split("/;")[0])
    host, port = url.hostname or "localhost", url.port or DEFAULT_PORT
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as e:
        raise unreachable(remote, e) from e


def connect(
    remote: str,
    *,
    conf: dict[str, str],
    kafka: bool,
    sid: str | None = None,
    upload: bool = True,
):
    """A checked session on the server `remote` with the SQL settings `conf`."""
    missing = spark_stack.connect_extra_error(remote, kafka)
    if missing is not None:
        raise UserError(missing)  # before pyspark's own check raises an ImportError
    check_reachable(remote)
    spark = open_session(remote, sid)
    try:
        check_server(spark, remote, kafka)
        set_conf(spark, conf, remote)
        if upload:
            upload_package(spark)
    except UserError:
        spark.stop()
        raise
    except Exception as e:
        spark.stop()
        raise unreachable(remote, e) from e
    return spark


def _get(spark, key: str) -> str:
    try:
        return str(spark.conf.get(key, "") or "")
    except Exception:  # noqa: BLE001 - a setting the server does not show
        return ""


_DELTA_JAR = re.compile(r"delta-spark_(\d+\.\d+)_[\d.]+[-:](\d+\.\d+(?:\.\d+)?)")


def check_server(spark, remote: str, kafka: bool) -> None:
    """The server runs Spark 4.2 with Delta configured, and (where its settings name
    its jars) the Delta 4.4 and Kafka connector jars; else a UserError saying what to
    change on the server."""
    needs = spark_stack.remote_needs(kafka)
    version = str(spark.version)
    if spark_stack.minor(version) != spark_stack.minor(spark_stack.SPARK_VERSION):
        raise UserError(
            f"the Spark Connect server {remote} runs Spark {version}; ticdc-sync needs "
            f"Spark {spark_stack.minor(spark_stack.SPARK_VERSION)} (hint: {needs})"
        )
    missing = [
        f"{k}={v}"
        for k, v in spark_stack.DELTA_SERVER_CONF.items()
        if v not in _get(spark, k).split(",")
    ]
    if missing:
        raise UserError(
            f"the Spark Connect server {remote} is not set up for Delta Lake: it lacks "
            f"{', '.join(missing)} (hint: {needs})"
        )
    jars = f"{_get(spark, 'spark.jars.packages')},{_get(spark, 'spark.jars')}"
    found = _DELTA_JAR.search(jars)
    if found is not None:
        want = spark_stack.minor(spark_stack.DELTA_VERSION)
        built_for, delta = found.group(1), spark_stack.minor(found.group(2))
        if delta != want or built_for != spark_stack.minor(spark_stack.SPARK_VERSION):
            raise UserError(
                f"the Spark Connect server {remote} has Delta Lake {found.group(2)} built for "
                f"Spark {built_for}; ticdc-sync needs Delta Lake {want} for Spark "
                f"{spark_stack.minor(spark_stack.SPARK_VERSION)} (hint: {needs})"
            )
        if kafka and "spark-sql-kafka" not in jars:
            raise UserError(
                f"the Spark Connect server {remote} has no Kafka connector among its jars "
                f"({spark_stack.KAFKA_PACKAGE}) and the profile's transport is Kafka "
                f"(hint: {needs})"
            )


def set_conf(spark, conf: dict[str, str], remote: str) -> None:
    """Set each of `conf` on the session; one a client cannot set is a UserError."""
    refused = []
    for key, value in sorted(conf.items()):
        try:
            if _get(spark, key) != value:
                spark.conf.set(key, value)
        except Exception as e:  # noqa: BLE001 - the server's refusal, reported below
            refused.append((key, (str(e).strip().splitlines() or [""])[0][:160]))
    if refused:
        raise UserError(
            f"the Spark Connect server {remote} does not let a client set "
            + "; ".join(f"{k} ({why})" for k, why in refused)
            + " (hint: these are server settings: set them where the server is started, "
            "and remove them from the profile's spark.conf)"
        )


# --- ticdc_sync on the server's Python workers ---------------------------------------------


def package_zip() -> bytes:
    """The ticdc_sync package's Python files as a zip (what `upload_package` sends)."""
    import ticdc_sync

    root = Path(ticdc_sync.__file__).resolve().parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                # A fixed date: the same code gives the same bytes (and artifact).
                info = zipfile.ZipInfo(
                    f"ticdc_sync/{path.relative_to(root).as_posix()}", (2020, 1, 1, 0, 0, 0)
                )
                zf.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def upload_package(spark, folder: Path | None = None) -> None:
    """Add ticdc_sync (this client's code) to the session's Python path on the server."""
    import hashlib
    import tempfile

    data = package_zip()
    # Named by content: a session gets one artifact per code version.
    name = f"ticdc_sync-{hashlib.sha1(data).hexdigest()[:12]}.zip"
    with tempfile.TemporaryDirectory(prefix="ticdc-sync-artifact-", dir=folder) as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        spark.addArtifacts(str(path), pyfile=True)


# --- what a classic session reads from its JVM ------------------------------------------------

_parallelism: dict[str, int] = {}


def default_parallelism(spark) -> int:
    """The session's default parallelism (the cores of its executors): a classic session's
    SparkContext knows it; a Connect server is asked once (a range of rows without a set
    number of partitions gets that many) and remembered per server."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    key = str(spark.client._builder.endpoint)
    if key not in _parallelism:
        from pyspark.sql import functions as F

        ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
        row = ids.agg(F.max("p").alias("p")).first()
        _parallelism[key] = max(1, int(row["p"]) + 1)
    return _parallelism[key]


def num_partitions(df) -> int | None:
    """The partitions of `df` where known without a job (a classic session's copied
    frame); None over Spark Connect, which does not tell."""
    if is_connect(df):
        return None
    return int(df._jdf.rdd().getNumPartitions())


def local_checkpoint(df, storage_level):
    """`df.localCheckpoint(eager=True, storageLevel=storage_level)`, read in `df`'s own
    session, its observations filled by the copy's job (as in a classic session).

    Spark Connect's client (pyspark 4.2) does neither by itself: it gives the copy to the
    thread's active session, the run's, which does not hold it when `df` is of another
    session (`fanout`), and it sends the checkpoint without `df`'s observations. So the
    command is sent here as `localCheckpoint` sends it, with both."""
    if not is_connect(df):
        return df.localCheckpoint(eager=True, storageLevel=storage_level)
    from pyspark.sql.connect import plan
    from pyspark.sql.connect.session import SparkSession

    session = df.sparkSession
    client = session.client
    command = plan.Checkpoint(child=df._plan, local=True, eager=True, storage_level=storage_level)
    local = SparkSession._active_session
    before = getattr(local, "session", None)
    local.session = session  # whose the copy is (`conversion.proto_to_remote_cached_dataframe`)
    try:
        _, properties, _ = client.execute_command(command.command(client), df._plan.observations)
    finally:
        local.session = before
    return properties["checkpoint_command_result"]


def observed(observation) -> dict | None:
    """What `observation` counted, or None where no job filled it (Spark replaced a frame
    it knew to be empty by an empty relation, observing node and all): a classic session
    raises then, a Spark Connect one answers an empty dict."""
    try:
        return dict(observation.get) or None
    except Exception:  # noqa: BLE001 - never filled
        return None


def release_copy(df) -> None:
    """Free a `localCheckpoint` copy on the server now rather than when it is collected:
    a classic session unpersists its RDD (what Delta does with its own copies); a Connect
    session releases the cached relation the server holds for it."""
    if not is_connect(df):
        df._jdf.queryExecution().analyzed().rdd().unpersist(False)
        return
    plan = getattr(df, "_plan", None)
    if plan is not None and getattr(plan, "_relation_id", None) is not None:
        plan.__del__()  # what the client does when the frame is collected
        plan._relation_id = None


# --- a dead client's sessions ---------------------------------------------------------------


def _state(spark) -> list[tuple[str, str]]:
    """(operation id, state name) of every operation the server knows of in the session."""
    from pyspark.sql.connect.proto import base_pb2 as pb2

    resp = spark.client._get_operation_statuses()  # all operations
    names = pb2.GetStatusResponse.OperationStatus.OperationState
    return [(s.operation_id, names.Name(s.state)) for s in resp.operation_statuses]


def _runs(state: str) -> bool:
    """Whether an operation in `state` may still do work. TERMINATING ones have ended
    (finished, failed or cancelled) and wait only for their client to release them, which a
    killed client never does: the server drops them after its detached timeout."""
    return state == "OPERATION_STATE_RUNNING"


def stop_orphans(
    remote: str,
    token: str,
    out: Callable[[str], None],
    *,
    wait: float = ORPHAN_WAIT_SECONDS,
) -> int:
    """Stop what the run whose lease token was `token` left running on the server (it was
    killed: its sessions live on, their operations may still commit), and wait until it has
    ended, so that this run reads the state after its last commit. Returns how many
    operations were still running."""
    stopped = 0
    for sid in _ids(token):
        found = _stop_one(remote, sid, out, wait)
        if found is None:
            if sid != session_id(token):
                break  # no more slots
            continue
        stopped += found
    if stopped:
        out(f"stopped {stopped} operation(s) a killed run left on the Spark Connect server")
    return stopped


def _ids(token: str) -> Iterable[str]:
    yield session_id(token)
    for slot in range(MAX_SLOTS):
        yield session_id(token, slot)


def _stop_one(remote: str, sid: str, out: Callable[[str], None], wait: float) -> int | None:
    """Interrupt the session `sid`'s running operations, wait for them, release it; None
    where the server has no such session (never opened, or released at a clean end)."""
    spark = open_session(remote, sid)
    # Not `stop()` at the end unless the session existed: a release of an id the server
    # never saw would create it first.
    spark.release_session_on_close = False
    try:
        try:
            states = _state(spark)
        except Exception as e:  # noqa: BLE001 - not found, or closed: nothing runs there
            if "SESSION_NOT_FOUND" in str(e) or "SESSION_CLOSED" in str(e):
                return None
            raise unreachable(remote, e) from e
        running = [op for op, st in states if _runs(st)]
        if running:
            spark.interruptAll()
            deadline = time.monotonic() + wait
            while any(_runs(st) for _, st in _state(spark)):
                if time.monotonic() > deadline:
                    raise UserError(
                        f"the Spark Connect server {remote} still runs {len(running)} "
                        f"operation(s) of a killed run (session {sid}) {wait:.0f}s after "
                        "they were interrupted (hint: stop them in the server's UI, or "
                        "restart the server, then run again)"
                    )
                time.sleep(0.5)
        spark.release_session_on_close = True
        return len(running)
    finally:
        spark.stop()
