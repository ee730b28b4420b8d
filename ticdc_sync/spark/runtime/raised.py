"""Errors out of Spark, said so that a user can act on them.

Bad input found inside a Spark job: the job calls `raise_error('ticdc-sync: ...')` (so it
fails on the first bad row without an extra pass), and the driver turns the JVM exception
back into a plain `UserError` with that message (`user_error`).

Any other error Spark raises (a py4j `Py4JJavaError`, whose own first line only names the
call that failed, "An error occurred while calling o2150.filter."; or one PySpark converted,
an `AnalysisException`...) is said by its Java class and the first line of its message
(`SparkFailure`, `spark_failure`): "java.lang.StackOverflowError",
"org.apache.spark.sql.AnalysisException: [UNRESOLVED_COLUMN...] ...". The whole trace stays
on the exception (`SparkFailure.trace`) for the log file (and `--debug`)."""

from __future__ import annotations

import traceback

from ticdc_sync.core.errors import UserError

PREFIX = "ticdc-sync: "
# How many causes a line follows down to one that says something.
_CAUSES = 8


def user_error(e: BaseException) -> UserError | None:
    """The UserError a `raise_error(PREFIX + message)` inside the failed job carried, if any."""
    text = str(e)
    at = text.find(PREFIX)
    if at < 0:
        return None
    return UserError(text[at + len(PREFIX) :].split("\n")[0].removesuffix(" SQLSTATE: P0001"))


class SparkFailure(Exception):
    """A Spark (JVM) error: its text is the Java class and first message line; `trace` the
    whole of it (the Java stack trace and the Python one)."""

    def __init__(self, line: str, trace: str) -> None:
        super().__init__(line)
        self.trace = trace


def spark_failure(e: BaseException) -> SparkFailure | None:
    """`e` said by its Java class and first message line, or None when `e` is no error of
    the JVM (a Python error, ticdc-sync's own)."""
    if isinstance(e, SparkFailure):
        return e
    java = _java_of(e)
    if java is not None:
        line = _java_line(java) or _first(str(e))
    elif _is_pyspark(e):
        # Spark Connect's errors (no JVM here): PySpark's class, the server's text.
        line = f"{type(e).__name__}: {_first(str(e))}"
    else:
        return None
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return SparkFailure(line[:500], text)


def _java_of(e: BaseException):
    """The Java exception behind `e` (py4j's JavaObject), if any."""
    j = getattr(e, "java_exception", None)  # Py4JJavaError
    if j is None:
        j = getattr(e, "_origin", None)  # PySpark's CapturedException
    return j


def _is_pyspark(e: BaseException) -> bool:
    return any(c.__module__.startswith(("pyspark.", "py4j.")) for c in type(e).__mro__)


def _java_line(j) -> str | None:
    """ "class: first message line" of the Java exception `j`; where its message is empty
    (a StackOverflowError), or only wraps its cause, the first cause that says more is
    added."""
    try:
        parts: list[str] = []
        seen = 0
        while j is not None and seen < _CAUSES:
            name = str(j.getClass().getName())
            msg = _first(str(j.getMessage() or ""))
            parts.append(f"{name}: {msg}" if msg else name)
            if msg and not msg.startswith(("java.", "org.", "scala.")):
                break  # it says what went wrong; its causes are in the trace
            cause = j.getCause()
            j = None if cause is None or cause.equals(j) else cause
            seen += 1
        return "; caused by ".join(parts) if parts else None
    except Exception:  # noqa: BLE001 - the JVM is gone: the Python text says what it can
        return None


def _first(text: str) -> str:
    """The first line of `text` that is not empty."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
