"""A class-data-sharing archive for the short-lived Spark drivers that tests start.

Every `ticdc-sync run` a test starts as a process of its own (and every Spark job of
tests/s3) starts a JVM that loads and verifies the same thousands of classes of Spark,
Hadoop and Delta. A dynamic class-data-sharing archive of them (JDK 13+:
`-XX:ArchiveClassesAtExit` writes it, `-XX:SharedArchiveFile` maps it) lets a later JVM map
them instead. What the JVM executes is unchanged; only its start is shorter.

The archive is made once per machine and environment (the java binary, Spark's jars and
the JVM options are its key) in ticdc-sync's cache folder (`test-jvm/`, beside the jars), by
one small `ticdc-sync run` in the background (`start`) while the first tests run; tests that
start after it exists hand it to their children (`options`). A JVM that cannot use it
(another class path, another JDK) runs as it would without it, silently (`-Xlog:cds*=off`).
One process makes it at a time (a lock file naming its pid). The session that started it
waits for it at its end (at most `WAIT_AT_END` seconds: the one session per environment
that makes it may end that much later), and stops it at once when interrupted; it stops
itself if the session's process dies.
Linux only (it follows the JVM through /proc and prctl); elsewhere the tests run without it.

Run as `python -m tests.jvm_archive DEST`, this module is that background process.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.processes import kill_tree

# How long a session that started the maker waits for it at its end before stopping it.
WAIT_AT_END = 120


def _cache() -> Path:
    """test-jvm/ in ticdc-sync's cache folder (as `ticdc_sync.spark.runtime.session.cache_dir`
    finds it, without importing pyspark)."""
    base = os.environ.get("TICDC_SYNC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ticdc-sync"
    )
    return Path(base) / "test-jvm"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _spark_jars() -> Path | None:
    if os.environ.get("SPARK_HOME"):
        jars = Path(os.environ["SPARK_HOME"]) / "jars"
    else:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            return None
        jars = Path(spec.origin).parent / "jars"
    return jars.resolve() if jars.is_dir() else None


def archive_path(jvm_options: str) -> Path | None:
    """Where the archive for this environment and `jvm_options` is (or goes); None when
    there is no java or no Spark to make one for, or not on Linux."""
    java, jars = _java(), _spark_jars()
    if java is None or jars is None or not Path("/proc/self/stat").exists():
        return None
    key = hashlib.sha256()
    st = java.stat()
    key.update(f"{java}|{st.st_size}|{st.st_mtime_ns}|{jars}|{jvm_options}\n".encode())
    for jar in sorted(jars.iterdir()):
        key.update(f"{jar.name}|{jar.stat().st_size}\n".encode())
    return _cache() / f"{key.hexdigest()[:16]}.jsa"


def options(path: Path) -> str:
    """The JVM options that map the archive at `path` (nothing printed when it cannot)."""
    return f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"


def _lock(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(path: Path, jvm_options: str, log: Path) -> subprocess.Popen | None:
    """Start making the archive at `path` in the background, unless it exists or another
    process is making it; the process (its own process group), or None."""
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(path)
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            holder = int(lock.read_text().strip() or 0)
            age = time.time() - lock.stat().st_mtime
        except (OSError, ValueError):
            return None
        if (holder and _alive(holder)) or (not holder and age < 60):
            return None  # being made (an empty lock: its maker is writing its pid)
        lock.unlink(missing_ok=True)  # its maker died: the next session makes it
        return None
    for stale in path.parent.glob(f"{path.name}.*.tmp"):  # left by a maker that died
        stale.unlink(missing_ok=True)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": jvm_options, "TZ": "UTC"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.jvm_archive", str(path)],
            cwd=Path(__file__).resolve().parents[1],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    os.write(fd, str(proc.pid).encode())
    os.close(fd)
    return proc


def stop(proc: subprocess.Popen | None, path: Path, wait: float = 0) -> None:
    """Stop the maker started by `start` if it still runs after `wait` seconds (with its
    JVM), and remove what it left."""
    if proc is None:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=wait)
    if proc.poll() is not None:
        return
    kill_tree(proc.pid)
    proc.wait(timeout=60)
    for leftover in path.parent.glob(f"{path.name}.*"):
        leftover.unlink(missing_ok=True)


def _records() -> list[tuple]:
    """Capture records of shop.t: two inserts, an update, a delete, a watermark."""
    from tests.spark.engine_harness import canal_row, canal_watermark

    types, key = {"id": "int", "v": "varchar"}, ["id"]
    a, b, c = {"id": "1", "v": "a"}, {"id": "2", "v": "b"}, {"id": "1", "v": "c"}
    changes = [
        ("INSERT", 100, a, None),
        ("INSERT", 100, b, None),
        ("UPDATE", 200, c, {"v": "a"}),
        ("DELETE", 300, b, None),
    ]
    out = [
        (0, i, None, canal_row("shop", "t", op, ts << 18, data, types, key, old))
        for i, (op, ts, data, old) in enumerate(changes)
    ]
    return [*out, (0, len(out), None, canal_watermark(400 << 18))]


def _make(dest: Path) -> int:
    """One small `ticdc-sync run` in a JVM that writes its classes to `dest` as it exits."""
    from tests.spark.engine_harness import make_project, write_captures

    # The JVM runs in a session of its own and writes the archive as it exits, after the
    # CLI's process has ended: as the subreaper of what it starts, this process gets the
    # JVM as its child then, and waits for it.
    _become_subreaper()
    parent = os.getppid()
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    try:
        with tempfile.TemporaryDirectory(prefix="ticdc-sync-jvm-archive-") as work:
            schema = "CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10));\n"
            root = make_project(Path(work) / "p", protocol="canal-json", schema_sql=schema)
            write_captures(root, "t", _records())
            opts = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -XX:ArchiveClassesAtExit={tmp}"
            child = subprocess.Popen(
                [sys.executable, "-m", "ticdc_sync.commands.cli", "run", "--project", str(root)],
                env={**os.environ, "SPARK_SUBMIT_OPTS": opts.strip()},
                stdin=subprocess.DEVNULL,
            )
            code = None
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break  # the CLI and its JVM have exited
                if pid == child.pid:
                    code = os.waitstatus_to_exitcode(status)
                elif pid == 0:
                    if os.getppid() != parent:  # the test session died: stop with it
                        kill_tree(os.getpid())
                    time.sleep(0.2)
        if code != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            print(f"no archive: the run exited {code}", flush=True)
            return 1
        os.replace(tmp, dest)
        return 0
    finally:
        tmp.unlink(missing_ok=True)
        _lock(dest).unlink(missing_ok=True)


def _become_subreaper() -> None:
    """prctl(PR_SET_CHILD_SUBREAPER): orphans below this process become its children."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


if __name__ == "__main__":
    sys.exit(_make(Path(sys.argv[1])))
