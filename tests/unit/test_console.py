"""Where ticdc-sync's lines go (`console`) and what a progress line says (`progress`)."""

from __future__ import annotations

import io
import threading
from pathlib import Path

from ticdc_sync.core.console import Console, log_file
from ticdc_sync.core.interrupts import Interrupts
from ticdc_sync.core.progress import PhaseStatus, duration, render, size


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def streams() -> tuple[io.StringIO, io.StringIO]:
    return io.StringIO(), io.StringIO()


def test_results_to_stdout_errors_and_warnings_to_stderr_everything_to_the_log(
    tmp_path: Path,
) -> None:
    out, err = streams()
    c = Console(stdout=out, stderr=err, progress="off")
    c.open_log(log_file(tmp_path), "ticdc-sync run")
    c("apply t: +1 ~0 -0")
    c("error: target t: value does not fit its column")
    c("warning: source s has read nothing")
    c.jvm_line("26/11/25 23:09:30 WARN Utils: something")
    c.close()
    assert out.getvalue() == "apply t: +1 ~0 -0\n"
    assert err.getvalue() == (
        "error: target t: value does not fit its column\nwarning: source s has read nothing\n"
    )
    assert c.errors == ["error: target t: value does not fit its column"]
    log = log_file(tmp_path).read_text()
    assert "===== ticdc-sync run (pid " in log
    for line in ("apply t: +1", "error: target t", "warning: source s", "WARN Utils"):
        assert line in log


def test_jvm_output_reaches_the_terminal_only_when_verbose(tmp_path: Path) -> None:
    out, err = streams()
    quiet = Console(stdout=out, stderr=err, progress="off")
    quiet.open_log(tmp_path / "a.log", "t")
    quiet.jvm_line(":: resolving dependencies :: org.apache.spark")
    assert err.getvalue() == "" and quiet.jvm_lines == 1
    verbose = Console(stdout=out, stderr=err, progress="off", verbose=True)
    verbose.open_log(tmp_path / "b.log", "t")
    verbose.jvm_line(":: resolving dependencies :: org.apache.spark")
    assert err.getvalue() == ":: resolving dependencies :: org.apache.spark\n"


def test_a_trace_goes_to_the_log_and_to_stderr_only_with_debug(tmp_path: Path) -> None:
    out, err = streams()
    plain = Console(stdout=out, stderr=err, progress="off", verbose=True)
    plain.open_log(tmp_path / "a.log", "t")
    plain.trace("trace of the error of t:\n\tat java.lang.Thread.run")
    assert err.getvalue() == "" and out.getvalue() == ""
    assert "\tat java.lang.Thread.run" in (tmp_path / "a.log").read_text()
    debug = Console(stdout=out, stderr=err, progress="off", debug=True)
    debug.open_log(tmp_path / "b.log", "t")
    debug.trace("trace of the error of t:\n\tat java.lang.Thread.run")
    assert "\tat java.lang.Thread.run" in err.getvalue()
    assert "\tat java.lang.Thread.run" in (tmp_path / "b.log").read_text()


def test_details_off_keeps_them_in_the_log_but_not_errors(tmp_path: Path) -> None:
    out, err = streams()
    c = Console(stdout=out, stderr=err, progress="off")
    c.open_log(tmp_path / "x.log", "t")
    c.details = False
    c.detail("read+decode s: 3 new event(s) staged")
    c.detail("error: target t: blocked")
    c.result("batch 1: 3 event(s) staged")
    assert out.getvalue() == "batch 1: 3 event(s) staged\n"
    assert err.getvalue() == "error: target t: blocked\n"
    assert "read+decode s: 3 new event(s) staged" in (tmp_path / "x.log").read_text()


def test_progress_lines_mode_prints_phases_and_interval_lines() -> None:
    out, err = streams()
    c = Console(stdout=out, stderr=err, progress="lines", interval=0.01)
    asked = threading.Event()

    def status() -> str:
        asked.set()
        return "stage s: 10 records, 0:01"

    c.phase("stage s (1.0 kB of capture files)")
    c.progress_from(status)
    assert asked.wait(30)
    c.progress_off()
    lines = err.getvalue().splitlines()
    assert lines[0] == "progress: stage s (1.0 kB of capture files)"
    assert "progress: stage s: 10 records, 0:01" in lines
    assert out.getvalue() == ""


def test_live_line_is_wiped_before_other_output() -> None:
    out, err = Tty(), Tty()
    c = Console(stdout=out, stderr=err)
    assert c.mode == "live"
    c._draw_live("apply: 1 of 2 targets done")
    c.error("error: boom")
    c.progress_off()
    assert err.getvalue() == "\r\x1b[Kapply: 1 of 2 targets done\r\x1b[Kerror: boom\n"
    assert Console(stdout=out, stderr=io.StringIO()).mode == "lines"  # not a terminal


def test_progress_line_text() -> None:
    st = PhaseStatus(
        "stage canal",
        elapsed=42.0,
        records=153_201,
        bytes=45_100_000,
        bytes_total=120_000_000,
        tasks_done=3,
        tasks_total=8,
    )
    assert render(st) == (
        "stage canal: 153,201 records, 45.1 MB of 120.0 MB (37%), 3.6k records/s, tasks 3/8, 0:42"
    )
    kafka = PhaseStatus("stage k", elapsed=10, records=500, records_total=2000)
    assert render(kafka) == "stage k: 500 of 2,000 records (25%), 50 records/s, 0:10"
    apply = PhaseStatus(
        "apply", elapsed=3725, targets_done=1, targets_total=3, steps={"b": "merge 2/3"}
    )
    assert render(apply) == "apply: 1 of 3 targets done, b merge 2/3, 1:02:05"
    assert render(PhaseStatus("starting Spark", elapsed=5)) == "starting Spark: 0:05"
    assert (size(999), size(1500), duration(61)) == ("999 B", "1.5 kB", "1:01")


def test_interrupts_first_asks_second_aborts(monkeypatch) -> None:
    import signal

    said: list[int] = []
    aborted: list[bool] = []
    exits: list[int] = []
    monkeypatch.setattr("os._exit", exits.append)
    # Whatever held SIGINT before (Python's default, or a SparkContext started earlier in
    # this process) must hold it again afterwards.
    before = signal.getsignal(signal.SIGINT)
    with Interrupts(said.append, lambda: aborted.append(True)) as stop:
        handler = signal.getsignal(signal.SIGINT)
        # PySpark's context takes SIGINT when it starts; reinstall takes it back.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop.reinstall()
        assert signal.getsignal(signal.SIGINT) == handler
        handler(signal.SIGINT, None)
        assert stop.requested and said == [signal.SIGINT] and not aborted
        handler(signal.SIGINT, None)
        assert aborted == [True] and exits == [130]
    assert signal.getsignal(signal.SIGINT) is before


class SignalInFlush(io.StringIO):
    """A stream whose flush is interrupted by a signal, as CPython can do between two
    bytecodes; it refuses to be written while it flushes, as a BufferedWriter does."""

    def __init__(self, on_flush) -> None:
        super().__init__()
        self.on_flush = on_flush
        self.flushing = False

    def write(self, s: str) -> int:
        if self.flushing:
            raise RuntimeError("reentrant call inside <_io.BufferedWriter>")
        return super().write(s)

    def flush(self) -> None:
        if self.flushing:
            raise RuntimeError("reentrant call inside <_io.BufferedWriter>")
        self.flushing = True
        try:
            on_flush, self.on_flush = self.on_flush, None
            if on_flush is not None:
                on_flush()
        finally:
            self.flushing = False


def test_a_signal_that_arrives_inside_a_write_has_its_line_written_after_it() -> None:
    out = io.StringIO()
    c: Console
    # The runner's first-signal handler prints one warning through the console.
    err = SignalInFlush(lambda: c("warning: interrupted: stopping"))
    c = Console(stdout=out, stderr=err, progress="off")
    c.error("progress: stage src")
    assert err.getvalue() == "progress: stage src\nwarning: interrupted: stopping\n"


def test_a_second_signal_inside_a_write_still_prints_its_last_line(tmp_path: Path) -> None:
    with open(tmp_path / "err", "w+") as raw:
        c: Console
        err = SignalInFlush(lambda: c.final("interrupted: stopped at once"))
        err.fileno = raw.fileno  # type: ignore[method-assign]
        c = Console(stdout=io.StringIO(), stderr=err, progress="off")
        c.error("progress: apply t")
        assert err.getvalue() == "progress: apply t\n"
        assert (tmp_path / "err").read_text() == "\ninterrupted: stopped at once\n"
