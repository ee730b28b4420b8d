"""Where ticdc-sync's lines go: results on stdout, errors, warnings and progress on stderr,
and all of them, with the Spark JVM's output, into the log file under `target/logs/`.

- `console(line)` routes one of ticdc-sync's lines by its prefix: `error: ...` and
  `warning: ...` go to stderr, every other line is a result and goes to stdout. A line
  marked as detail (`console.detail`) goes to stdout unless details are off (`run
  --follow` prints one compact line per batch instead), and always into the log.
- Progress is drawn on stderr from a status provider (`progress_from`): on a terminal a
  live line, redrawn in place and wiped before any other line is printed; otherwise a
  plain `progress: ...` line when a phase starts and every `interval` seconds while it
  lasts; or nothing (`off`).
- `trace` takes an error's whole trace: into the log file, and on stderr too with `--debug`.
- `jvm_line` takes the lines the Spark JVM prints (Ivy, log4j, the JVM itself): into the
  log file only, and on stderr too with `--verbose` / `--debug`.

Pure core: no pyspark, and no decisions about a run; it only routes and draws lines.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

PROGRESS_MODES = ("auto", "live", "lines", "off")
PROGRESS_ENV = "TICDC_SYNC_PROGRESS"
INTERVAL_ENV = "TICDC_SYNC_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 10.0
# How often the live line is redrawn (and the provider asked) on a terminal.
LIVE_PERIOD_S = 0.5
# A log file bigger than this when a command starts is kept as `<name>.1` and a new one begun.
LOG_ROTATE_BYTES = 20 * 1024 * 1024

Status = Callable[[], "str | None"]


def log_file(project_root: Path) -> Path:
    """The log file of a project: `target/logs/ticdc-sync.log`."""
    return project_root / "target" / "logs" / "ticdc-sync.log"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Console:
    """The one sink for what a command prints (see the module docstring)."""

    def __init__(
        self,
        *,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        verbose: bool = False,
        debug: bool = False,
        progress: str = "auto",
        interval: float | None = None,
    ) -> None:
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.verbose = verbose
        self.debug = debug
        self.details = True
        self.mode = self._mode(progress)
        env_interval = os.environ.get(INTERVAL_ENV)
        self.interval = (
            interval
            if interval is not None
            else float(env_interval)
            if env_interval
            else DEFAULT_INTERVAL_S
        )
        self._lock = threading.RLock()
        # Writes in progress on the thread holding the lock, and those that arrived meanwhile
        # from a signal handler (see `_guarded`).
        self._busy = False
        self._pending: list[Callable[[], None]] = []
        self._log: TextIO | None = None
        self.log_path: Path | None = None
        self._live = ""  # the live line on screen now ("" when none)
        self._status: Status | None = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self.errors: list[str] = []  # the error lines printed, each once, in order
        self.jvm_lines = 0  # lines the JVM printed (into the log)

    def _mode(self, asked: str) -> str:
        asked = os.environ.get(PROGRESS_ENV, "") if asked == "auto" else asked
        if asked in ("live", "lines", "off"):
            return asked
        isatty = getattr(self.stderr, "isatty", None)
        return "live" if callable(isatty) and isatty() else "lines"

    # ------------------------------------------------------------------ plain lines

    def __call__(self, line: str = "") -> None:
        if line.startswith(("error:", "warning:")):
            self.error(line)
        else:
            self.result(line)

    def result(self, line: str = "") -> None:
        """A result line: stdout (and the log)."""
        self._write(self.stdout, line)

    def error(self, line: str) -> None:
        """An error or warning line: stderr (and the log)."""
        if line.startswith("error:") and line not in self.errors:
            self.errors.append(line)
        self._write(self.stderr, line)

    def final(self, line: str) -> None:
        """The last line of a process that ends now (from a signal handler): no more
        progress, the line on stderr, the log closed."""
        self._stop.set()
        self._status = None
        with self._lock:
            if self._busy:
                # The handler interrupted a write, and the process ends before that write
                # could print a queued line: put it on the file descriptors directly.
                self._raw_final(line)
                return
        self.error(line)
        self._guarded(self._close_log)

    def _raw_final(self, line: str) -> None:
        targets = [self.stderr] + ([self._log] if self._log is not None else [])
        for stream in targets:
            with contextlib.suppress(OSError, ValueError, AttributeError):  # exiting anyway
                os.write(stream.fileno(), f"\n{line}\n".encode())

    def detail(self, line: str) -> None:
        """A line of a run's detail: routed like any line while details are on, else
        into the log only (errors and warnings always reach stderr)."""
        if self.details or line.startswith(("error:", "warning:")):
            self(line)
        else:
            self.log_only(line)

    def log_only(self, line: str) -> None:
        self._guarded(lambda: self._put_log(f"{_now()} {line}"))

    def trace(self, text: str) -> None:
        """A trace (an error's whole text, over many lines): into the log, and on stderr
        too with `--debug`."""
        if self.debug:
            self._write(self.stderr, text)
        else:
            self._guarded(lambda: self._put_log(f"{_now()} {text}"))

    def _write(self, stream: TextIO, line: str) -> None:
        def put() -> None:
            self._wipe_live()
            stream.write(line + "\n")
            stream.flush()
            self._put_log(f"{_now()} {line}")

        self._guarded(put)

    def _put_log(self, text: str) -> None:
        if self._log is not None:
            self._log.write(text + "\n")
            self._log.flush()

    def _guarded(self, put: Callable[[], None]) -> None:
        """Run one write under the lock, or queue it when it re-enters one.

        CPython runs a signal handler on the main thread between two bytecodes, so Ctrl-C's
        "stopping after the current step" line can arrive while that thread is inside a
        write, even inside a buffered file's flush; writing there again raises
        "reentrant call inside BufferedWriter". The lock is re-entrant, so only the thread
        that holds it can find `_busy` set: its line waits and is written, in order, as
        soon as the interrupted write ends.
        """
        with self._lock:
            if self._busy:
                self._pending.append(put)
                return
            self._busy = True
            try:
                put()
                while self._pending:
                    self._pending.pop(0)()
            finally:
                self._busy = False

    # ------------------------------------------------------------------ the log file

    def open_log(self, path: Path, title: str) -> None:
        """Append this command's lines (and the JVM's) to `path` from now on."""

        def put() -> None:
            if self._log is not None:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                if path.stat().st_size > LOG_ROTATE_BYTES:
                    path.replace(path.with_name(path.name + ".1"))
            except FileNotFoundError:
                pass
            self._log = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
            self.log_path = path
            self._put_log(f"\n{_now()} ===== {title} (pid {os.getpid()}) =====")

        self._guarded(put)

    def jvm_line(self, line: str) -> None:
        """One line of the Spark JVM's own output."""

        def put() -> None:
            self.jvm_lines += 1
            self._put_log(line)
            if self.verbose or self._log is None:
                self._wipe_live()
                self.stderr.write(line + "\n")
                self.stderr.flush()

        self._guarded(put)

    def close(self) -> None:
        self.progress_off()
        self._guarded(self._close_log)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    # ------------------------------------------------------------------ progress

    def progress_from(self, status: Status) -> None:
        """Draw progress from `status` (a line, or None for nothing to show) until
        `progress_off`; see the module docstring for the modes."""
        if self.mode == "off":
            return
        self.progress_off()
        self._status = status
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="ticdc-sync-progress", daemon=True)
        self._ticker.start()

    def progress_off(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            self._stop.set()
            ticker.join(timeout=5)
        self._guarded(self._wipe_live)
        self._status = None

    def phase(self, text: str) -> None:
        """A phase began: one `progress:` line in `lines` mode (the live line shows it)."""
        if self.mode == "lines":
            self._write(self.stderr, f"progress: {text}")

    def _tick(self) -> None:
        period = LIVE_PERIOD_S if self.mode == "live" else max(self.interval, LIVE_PERIOD_S)
        while not self._stop.wait(period):
            status = self._status
            try:
                text = status() if status is not None else None
            except Exception:  # noqa: BLE001 - progress must never break a run
                text = None
            if not text or self._stop.is_set():
                continue
            if self.mode == "live":
                self._draw_live(text)
            else:
                self._write(self.stderr, f"progress: {text}")

    def _draw_live(self, text: str) -> None:
        width = shutil.get_terminal_size((100, 20)).columns - 1
        with self._lock:
            if self._stop.is_set():
                return
            self._live = text[:width]
            self.stderr.write("\r\x1b[K" + self._live)
            self.stderr.flush()

    def _wipe_live(self) -> None:
        if self._live:
            self.stderr.write("\r\x1b[K")
            self.stderr.flush()
            self._live = ""
