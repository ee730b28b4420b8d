"""Build the SparkSession for a profile output: master, conf, Delta, and connector jars.

The only place that decides which JVM jars a run uses. By default they come from Maven
Central through Spark's own Ivy resolution (`spark.jars.packages`, cached in ~/.ivy2.5.2),
so a fresh machine needs nothing installed by hand. A profile `spark.jars_dir` or the
environment variable TICDC_SYNC_JARS_DIR points at a folder of jars instead, for
air-gapped clusters (`python -m ticdc_sync.spark --fetch DIR` fills one).
A session whose jars cannot be downloaded is retried once, then reported as a UserError
naming the artifacts; while jars are still to download, one process at a time resolves
them. With a local master, Python workers run the driver's interpreter.
This module must not contain sync logic.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ticdc_sync.core import spark_stack
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import EMBEDDED_METASTORE, Output
from ticdc_sync.spark.runtime import storage

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: resolutions are not serialized
    fcntl = None  # type: ignore[assignment]

# The versions and Maven coordinates (`core.spark_stack`, shared with a Spark Connect
# server's launch and what `validate` says a server needs).
SCALA = spark_stack.SCALA
SPARK_VERSION = spark_stack.SPARK_VERSION
DELTA_PACKAGE = spark_stack.DELTA_PACKAGE
KAFKA_PACKAGE = spark_stack.KAFKA_PACKAGE
# spark-sql-kafka 4.2.0 depends on spark-token-provider-kafka 4.2.0, which Maven Central
# does not carry; 4.0.0 is the newest published and is API-compatible for what the Kafka
# source uses (delegation-token helpers). It is excluded from Ivy resolution and fetched
# directly, checked against Maven Central's SHA-1.
TOKEN_PROVIDER = ("org.apache.spark", f"spark-token-provider-kafka-0-10_{SCALA}", "4.0.0")
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
# Spark 4's default Ivy home when `spark.jars.ivy` is not set; resolved jars are copied
# into its `jars/` folder as `<group>_<artifact>-<version>.jar`.
DEFAULT_IVY_HOME = "~/.ivy2.5.2"

DEFAULT_CONF: dict[str, str] = {
    **spark_stack.DELTA_SERVER_CONF,
    # Values are decoded and compared in UTC; source time zones are applied explicitly.
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    # Delta rebuilds a table's file list (state reconstruction) in 50 partitions by default,
    # sized for logs of millions of files. A run rebuilds it for the staging table and for
    # every target, each a few thousand actions, where one partition per rebuild measured
    # faster than several (benchmarks/README.md).
    # A profile's `spark.conf` can raise it for huge tables.
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "false",
    "spark.ui.showConsoleProgress": "false",
    # Staging and applying run at once (`loop`): jobs go to the FAIR scheduler's pools
    # (`labels.pool`, `fairscheduler.xml` beside this module), staging weighted above applies.
    "spark.scheduler.mode": "FAIR",
    "spark.scheduler.allocation.file": str(Path(__file__).with_name("fairscheduler.xml")),
    "spark.sql.ansi.enabled": "false",
}

# The driver's JVM compiles code later than HotSpot's default (each compile threshold times
# 4): every target's queries have shapes of their own, so a run over many tables kept the
# JIT compilers busy with code that ran a few times (a quarter of the JVM's CPU over 100
# new targets), while the loops that decode and write rows still get compiled. Measured
# 0.91x the wall time of the default over 1M events into 2 tables and 0.92x over 200,000
# into 100 (benchmarks/README.md); C1 alone was 0.80x on the second but 1.17x on the first.
# JIT options an operator gives win, in a profile's `spark.driver.extraJavaOptions` or in
# SPARK_SUBMIT_OPTS (`jit_options`).
DRIVER_JIT_OPTIONS = "-XX:CompileThresholdScaling=4"
JIT_FLAGS = ("CompileThreshold", "TieredStopAtLevel", "TieredCompilation", "-Xint", "-Xcomp")


def jit_options(conf: dict[str, str], submit_opts: str) -> dict[str, str]:
    """`conf`'s driver JVM options with `DRIVER_JIT_OPTIONS` added (after a profile's own),
    or nothing to change: when those, or `submit_opts` (SPARK_SUBMIT_OPTS, which the JVM
    also starts with), set a JIT option of their own."""
    theirs = conf.get("spark.driver.extraJavaOptions", "")
    if any(f in theirs or f in submit_opts for f in JIT_FLAGS):
        return {}
    return {"spark.driver.extraJavaOptions": f"{theirs} {DRIVER_JIT_OPTIONS}".strip()}


# The driver's JVM runs in UTC whatever the machine's zone. Delta keeps a small table's file
# list in its `.crc` file and, when the JVM's default zone (or the session's) is not UTC,
# verifies that list with a state reconstruction at every commit: an INSERT measured 3 Spark
# jobs instead of 1 under TZ=Asia/Shanghai (benchmarks/README.md). ticdc-sync decodes and
# compares values in the session's zone (UTC, `DEFAULT_CONF`), never the JVM's, so the
# JVM's default changes no value. A zone an operator gives the JVM wins (`time_zone_options`).
DRIVER_TIME_ZONE = "-Duser.timezone=UTC"


def time_zone_options(conf: dict[str, str], submit_opts: str) -> dict[str, str]:
    """`conf`'s driver JVM options with `DRIVER_TIME_ZONE` added (after the others), or
    nothing to change when those or `submit_opts` (SPARK_SUBMIT_OPTS) set `user.timezone`."""
    theirs = conf.get("spark.driver.extraJavaOptions", "")
    if "user.timezone" in theirs or "user.timezone" in submit_opts:
        return {}
    return {"spark.driver.extraJavaOptions": f"{theirs} {DRIVER_TIME_ZONE}".strip()}


def cache_dir() -> Path:
    base = os.environ.get("TICDC_SYNC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ticdc-sync"
    )
    return Path(base)


def _maven_path(group: str, artifact: str, version: str) -> str:
    return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


def fetch_jar(group: str, artifact: str, version: str, dest: Path) -> Path:
    """Download one jar from Maven Central into `dest` once, verifying its SHA-1."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / f"{artifact}-{version}.jar"
    if target.exists():
        return target
    url = f"{MAVEN_CENTRAL}/{_maven_path(group, artifact, version)}"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as r:
            want = r.read().decode().split()[0].strip()
    except OSError as e:
        raise UserError(
            f"cannot download {url}: {e} (hint: check network access to Maven Central, "
            "or set TICDC_SYNC_JARS_DIR / spark.jars_dir to a folder of jars)"
        ) from e
    got = hashlib.sha1(data).hexdigest()
    if got != want:
        raise UserError(f"checksum mismatch for {url}: got {got}, Maven Central says {want}")
    tmp = target.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target


def maven_jar_conf(kafka: bool, output: Output | None = None) -> dict[str, str]:
    """The `spark.jars*` settings that resolve Delta (and Kafka, and the object-store
    connector `output`'s warehouse needs) from Maven Central."""
    packages = [DELTA_PACKAGE, *storage.packages(output)]
    conf: dict[str, str] = {}
    if kafka:
        packages.append(KAFKA_PACKAGE)
        token = fetch_jar(*TOKEN_PROVIDER, cache_dir() / "jars")
        conf["spark.jars.excludes"] = f"{TOKEN_PROVIDER[0]}:{TOKEN_PROVIDER[1]}"
        conf["spark.jars"] = str(token)
    conf["spark.jars.packages"] = ",".join(packages)
    return conf


def jar_conf(output: Output | None, kafka: bool) -> dict[str, str]:
    """The `spark.jars*` settings: a local jar folder, or Maven coordinates plus the fix-up jar."""
    jars_dir = os.environ.get("TICDC_SYNC_JARS_DIR") or (output.jars_dir if output else None)
    if jars_dir:
        folder = Path(jars_dir)
        jars = sorted(str(p) for p in folder.glob("*.jar"))
        if not jars:
            raise UserError(
                f"jar folder {folder} has no *.jar files (hint: fill it with "
                f"`python -m ticdc_sync.spark --fetch {folder}` on a connected machine)"
            )
        storage.check_jar_folder(output, jars)
        return {"spark.jars": ",".join(jars)}
    return maven_jar_conf(kafka, output)


def catalog_dir() -> Path:
    """Where Spark's built-in catalog keeps its `default` database (`spark.sql.warehouse.dir`).

    Spark creates that folder as soon as the catalog is first used, and its default is
    `spark-warehouse` in the working directory, so every run left one wherever it was
    started. ticdc-sync only reads and writes Delta tables by path and never creates a
    named table, so the folder stays empty: it goes to the user's ticdc-sync cache,
    out of the project and the working directory. A profile's `spark.conf` can set it.
    """
    return cache_dir() / "spark-warehouse"


def catalog_conf(output: Output | None, warehouse: str) -> dict[str, str]:
    """The session conf of the output's catalog (`catalog.metastore`): Spark's session
    catalog on a Hive metastore, over thrift or embedded (Derby, in the warehouse's
    `_ticdc_sync/metastore`). A key the profile's `spark.conf` sets is left to it."""
    cat = output.catalog if output is not None else None
    if cat is None or cat.metastore is None:
        return {}
    conf = {"spark.sql.catalogImplementation": "hive"}
    if cat.metastore == EMBEDDED_METASTORE:
        if "://" in warehouse and not warehouse.startswith("file:"):
            raise UserError(
                f"catalog.metastore: embedded keeps its Derby database in the warehouse, "
                f"which must be a local folder (not {warehouse}) (hint: point `metastore` at "
                "a thrift://host:port metastore)"
            )
        folder = warehouse.removeprefix("file://").removeprefix("file:").rstrip("/")
        conf.update(
            {
                "spark.hadoop.javax.jdo.option.ConnectionURL": (
                    f"jdbc:derby:;databaseName={folder}/_ticdc_sync/metastore;create=true"
                ),
                "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
                "spark.hadoop.hive.metastore.schema.verification": "false",
            }
        )
    else:
        conf["spark.hadoop.hive.metastore.uris"] = cat.metastore
    return {k: v for k, v in conf.items() if k not in output.spark_conf}


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[N,F]`, `local[*]`, `local-cluster[...]`: workers on this host."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


@contextmanager
def _worker_python(python: str | None) -> Iterator[None]:
    """Set PYSPARK_PYTHON to `python` while the session starts (None: leave it alone).

    PySpark reads it once, when the SparkContext starts, for the Python workers its jobs
    launch; the JVM started then inherits it too. It is restored afterwards so that a
    later session (another master) decides afresh.
    """
    if python is None:
        yield
        return
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = before


def worker_python(master: str, conf: dict[str, str]) -> str | None:
    """The interpreter Python workers must run, or None to leave PySpark's choice alone.

    PySpark starts workers with $PYSPARK_PYTHON, else `python3` from PATH. Run from a
    virtualenv that is not activated (pipx, `venv/bin/ticdc-sync`), that `python3` lacks
    ticdc_sync and every Python job dies in its workers. With a local master the workers
    run on this host, so the driver's own interpreter is the right one; on a cluster it
    may not exist, and the user sets PYSPARK_PYTHON. `spark.pyspark.python` (a profile's
    `spark.conf`) wins over both, as in Spark; PySpark started from a plain `python`
    reads only the environment, so it is passed on through PYSPARK_PYTHON.
    """
    if conf.get("spark.pyspark.python"):
        return conf["spark.pyspark.python"]
    if os.environ.get("PYSPARK_PYTHON") or not is_local_master(master) or not sys.executable:
        return None
    return sys.executable


def ivy_home(conf: dict[str, str]) -> Path:
    return Path(conf.get("spark.jars.ivy") or DEFAULT_IVY_HOME).expanduser()


def unresolved_packages(conf: dict[str, str]) -> list[str]:
    """The `spark.jars.packages` coordinates whose jar Ivy has not put in `<ivy home>/jars`.

    Spark copies resolved jars there only after the whole resolution succeeded, so a
    package missing from it after the JVM failed to start is one Ivy could not get.
    """
    jars = ivy_home(conf) / "jars"
    missing = []
    for coord in filter(None, conf.get("spark.jars.packages", "").split(",")):
        group, artifact, version = coord.strip().split(":")[:3]
        if not (jars / f"{group}_{artifact}-{version}.jar").exists():
            missing.append(coord.strip())
    return missing


# Spark's Ivy resolution is not safe across processes: JVMs that download into one Ivy home
# at once read each other's half-written files, and all but one fail ("Downloaded file size
# (0) doesn't match expected Content Length", a missing `ivy-*.xml.original`), then fail
# their retry the same way. Seen on a fresh machine: of three sessions started together, two
# ended with "jars are not downloaded". So while a package is missing from the Ivy home,
# sessions start one at a time, under a lock file there (released by the OS if its holder
# dies); once all are there, the lock is not taken and sessions start side by side.
RESOLVE_LOCK = ".ticdc-sync-resolve.lock"
RESOLVE_WAIT_SECONDS = 1800.0


@contextmanager
def one_resolver(conf: dict[str, str], wait: float = RESOLVE_WAIT_SECONDS) -> Iterator[None]:
    """Hold the Ivy home's resolve lock while the block runs if `conf` has packages still to
    download (`unresolved_packages`); waits for another process's download at most `wait`
    seconds, saying so once on stderr."""
    if fcntl is None or not unresolved_packages(conf):
        yield
        return
    home = ivy_home(conf)
    home.mkdir(parents=True, exist_ok=True)
    lock = home / RESOLVE_LOCK
    with lock.open("a+b") as f:
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UserError(
                        f"another process has been downloading Spark's jars into {home} "
                        f"for over {wait:.0f}s (lock {lock}) (hint: let it finish, or stop "
                        "it and run again)"
                    ) from None
                if not told:
                    print(
                        f"waiting for another process to download Spark's jars into {home}",
                        file=sys.stderr,
                        flush=True,
                    )
                    told = True
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _gateway_exited(e: Exception) -> bool:
    """Spark's JVM exited before the session started (how a failed Ivy resolution ends)."""
    condition = getattr(e, "getCondition", None)
    return callable(condition) and condition() == "JAVA_GATEWAY_EXITED"


def _jars_unavailable(missing: list[str], conf: dict[str, str], logged: bool) -> UserError:
    where = "in the log file" if logged else "above"
    return UserError(
        f"Spark did not start, and jars it needs are not downloaded: {', '.join(missing)} "
        f"(tried twice; Spark's messages {where} say why; Ivy home {ivy_home(conf)}) "
        "(hint: when they report a failed download, check network "
        "access to Maven Central, or to the repositories of your Ivy settings; to run "
        "without downloads, fill a folder once with `python -m ticdc_sync.spark --fetch DIR` "
        "on a connected machine and point `spark.jars_dir` in profiles.yml, "
        "or TICDC_SYNC_JARS_DIR, at it)"
    )


# Jar lists a profile extends rather than replaces (a cloud storage connector, say): without
# ticdc-sync's own entries the session would lack Delta.
JAR_LIST_KEYS = ("spark.jars.packages", "spark.jars")


def with_profile_conf(conf: dict[str, str], profile: dict[str, str]) -> dict[str, str]:
    """`conf` updated with the profile's `spark.conf`; the jar lists (`JAR_LIST_KEYS`) get
    the profile's entries added to the ones already there."""
    out = dict(conf)
    for key, value in profile.items():
        if key in JAR_LIST_KEYS and out.get(key):
            have = [x for x in out[key].split(",") if x]
            more = [x.strip() for x in value.split(",") if x.strip() and x.strip() not in have]
            out[key] = ",".join(have + more)
        else:
            out[key] = value
    return out


def build_session(
    output: Output | None = None,
    *,
    app_name: str = "ticdc-sync",
    kafka: bool = True,
    extra_conf: dict[str, str] | None = None,
    jars: dict[str, str] | None = None,
    jvm_output: Callable[[str], None] | None = None,
    session_id: str | None = None,
):  # -> pyspark.sql.SparkSession (pyspark imported lazily)
    """Create (or return the active) SparkSession configured for `output`; a Spark Connect
    session when the output names a server (`remote_session`; `session_id` is its id).

    Precedence: DEFAULT_CONF < jar settings < storage settings (S3 warehouse, from the
    environment) < the profile's `spark.conf` (whose jar lists add to the jar settings,
    `with_profile_conf`) < `extra_conf`; then the driver's JIT options, unless those or
    SPARK_SUBMIT_OPTS set JIT options (`jit_options`), and its time zone, UTC, unless they
    set one (`time_zone_options`). The jar settings are `jars`
    if given, else `jar_conf`'s. Under `spark-submit` the master from the command line
    wins over the profile's. `jvm_output`: where the lines the JVM prints go (Ivy,
    log4j, the JVM), when this call starts the JVM (`jvm_output.launch`); else the
    terminal's stderr, as PySpark does.
    """
    if output is not None and output.spark_remote:
        return remote_session(output, kafka=kafka, extra_conf=extra_conf, session_id=session_id)
    from pyspark.sql import SparkSession

    conf = dict(DEFAULT_CONF)
    conf["spark.sql.warehouse.dir"] = catalog_dir().absolute().as_uri()
    conf.update(jar_conf(output, kafka) if jars is None else jars)
    conf.update(storage.spark_conf(output))
    if output is not None:
        conf = with_profile_conf(conf, output.spark_conf)
    if extra_conf:
        conf.update(extra_conf)
    conf.update(jit_options(conf, os.environ.get("SPARK_SUBMIT_OPTS", "")))
    conf.update(time_zone_options(conf, os.environ.get("SPARK_SUBMIT_OPTS", "")))
    builder = SparkSession.builder.appName(app_name)
    submitted = "spark.master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or os.environ.get(
        "SPARK_SUBMIT_MASTER"
    )
    master = conf.pop("spark.master", None) or (output.spark_master if output else "local[*]")
    if not submitted:
        builder = builder.master(master)
    for k, v in sorted(conf.items()):
        builder = builder.config(k, v)
    launch_conf = {**conf, "spark.app.name": app_name}
    if not submitted:
        launch_conf["spark.master"] = master

    def start():
        from ticdc_sync.spark.runtime import jvm_output as jvm

        if jvm_output is not None and not jvm.gateway_running():
            jvm.launch(launch_conf, jvm_output)
        return builder.getOrCreate()

    with (
        _worker_python(None if submitted else worker_python(master, conf)),
        one_resolver(conf),
    ):
        try:
            return start()
        except Exception as e:
            # A Maven repository that answers badly (an empty or cut-off download) fails
            # Ivy's resolution and the JVM exits; such faults are often transient.
            if not _gateway_exited(e) or not (missing := unresolved_packages(conf)):
                raise
            print(
                f"warning: Spark could not download {', '.join(missing)}; retrying once",
                file=sys.stderr,
                flush=True,
            )
        try:
            return start()
        except Exception as e:
            if not _gateway_exited(e) or not (missing := unresolved_packages(conf)):
                raise
            raise _jars_unavailable(missing, conf, jvm_output is not None) from e


# DEFAULT_CONF's settings that belong to a Spark Connect server (static, or not SQL): a
# client's session does not set them (`remote_session`).
SERVER_ONLY = (
    "spark.sql.extensions",
    "spark.sql.catalog.",
    "spark.sql.warehouse.dir",
    "spark.scheduler.",
    "spark.ui.",
    "spark.jars",
    "spark.driver.",
    "spark.hadoop.",
)


def remote_session(
    output: Output,
    *,
    kafka: bool,
    extra_conf: dict[str, str] | None = None,
    session_id: str | None = None,
):
    """A Spark Connect session on the output's server (`remote.connect`, which checks the
    server), with DEFAULT_CONF's SQL settings (the rest are the server's, `SERVER_ONLY`),
    then the profile's `spark.conf` and `extra_conf`, all of which it must accept."""
    from ticdc_sync.spark.runtime import remote

    conf = {k: v for k, v in DEFAULT_CONF.items() if not k.startswith(SERVER_ONLY)}
    conf.update(output.spark_conf)
    conf.update(extra_conf or {})
    assert output.spark_remote is not None
    return remote.connect(output.spark_remote, conf=conf, kafka=kafka, sid=session_id)


SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def server_args(conf: dict[str, str] | None = None) -> list[str]:
    """`spark-submit` arguments (after `--class SERVER_CLASS`) that give a Spark Connect
    server what ticdc-sync needs: the Delta and Kafka connector jars (the coordinates a
    local session resolves), Delta's extension and catalog, the driver in UTC; `conf` last."""
    token = fetch_jar(*TOKEN_PROVIDER, cache_dir() / "jars")
    settings = {
        **spark_stack.DELTA_SERVER_CONF,
        "spark.jars.excludes": f"{TOKEN_PROVIDER[0]}:{TOKEN_PROVIDER[1]}",
        "spark.driver.extraJavaOptions": DRIVER_TIME_ZONE,
        **(conf or {}),
    }
    args = ["--packages", f"{DELTA_PACKAGE},{KAFKA_PACKAGE}", "--jars", str(token)]
    for key, value in sorted(settings.items()):
        args += ["--conf", f"{key}={value}"]
    return args


def run_jars(spark) -> list[Path]:
    """The local jar files the running session loaded: `spark.jars` plus resolved packages.

    `spark-submit` lists Ivy's resolved packages, with `spark.jars`, in
    `spark.repl.local.jars`; `spark.jars` alone holds only the jars given by path.
    """
    got = spark.sparkContext.getConf()
    seen: dict[str, Path] = {}
    for key in ("spark.repl.local.jars", "spark.jars"):
        for j in (got.get(key) or "").split(","):
            if j:
                p = Path(j.removeprefix("file://").removeprefix("file:"))
                seen.setdefault(p.name, p)
    return [seen[n] for n in sorted(seen)]


def fetch_all(dest: Path, s3: bool = False) -> list[Path]:
    """Resolve every jar a run needs and copy them into `dest` (for air-gapped clusters);
    with `s3`, also the S3A connector an `s3a://` warehouse needs.

    Always resolves from Maven, whatever TICDC_SYNC_JARS_DIR says: filling a jar folder
    is what this is for.
    """
    output = Output("fetch", warehouse="s3a://fetch/") if s3 else None
    spark = build_session(
        output,
        app_name="ticdc-sync-fetch",
        kafka=True,
        extra_conf={"spark.ui.enabled": "false"},
        jars=maven_jar_conf(kafka=True, output=output),
    )
    try:
        jars = run_jars(spark)
    finally:
        spark.stop()
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for src in jars:
        target = dest / src.name
        target.write_bytes(src.read_bytes())
        out.append(target)
    return out
