"""Errors: one root class; every error says where it came from and how to fix it.

Nothing here imports pyspark or does I/O. `cli.py` maps these to exit codes:
`UserError` and subclasses exit 1, anything else is a crash (exit 3+).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem in a project file, rendered as `file:line: key.path: message (hint: ...)`."""

    file: str
    line: int | None
    path: str
    message: str
    hint: str = ""
    severity: str = "error"  # "error" or "warning"

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        key = f" {self.path}:" if self.path else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{where}:{key} {prefix}{self.message}{hint}"


class TicdcSyncError(Exception):
    """Root of every error ticdc-sync raises on purpose."""


class UserError(TicdcSyncError):
    """Something the user can fix (bad project, bad input, a policy that blocks). Exit code 1."""


class ProjectError(UserError):
    """The project files have problems; all of them are listed at once."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        super().__init__("\n".join(i.render() for i in issues))


class PlanError(UserError):
    """A valid project that cannot be compiled into a plan."""


@dataclass(frozen=True, slots=True)
class RecordRef:
    """Where a Kafka record came from: topic/partition/offset, plus table and commit_ts if known."""

    topic: str
    partition: int
    offset: int
    table: str | None = None
    commit_ts: int | None = None

    def render(self) -> str:
        s = f"{self.topic}/{self.partition}/{self.offset}"
        if self.table:
            s += f" table {self.table}"
        if self.commit_ts is not None:
            s += f" commit_ts {self.commit_ts}"
        return s


class DecodeError(UserError):
    """A message that cannot be decoded. Carries the record's position and the reason."""

    def __init__(self, ref: RecordRef | None, reason: str, hint: str = "") -> None:
        self.ref = ref
        self.reason = reason
        self.hint = hint
        where = ref.render() if ref else "<unknown record>"
        msg = f"{where}: {reason}"
        if hint:
            msg += f" (hint: {hint})"
        super().__init__(msg)


class DdlError(UserError):
    """A DDL statement that cannot be parsed or translated."""


class BlockedError(UserError):
    """A table is blocked at a DDL by policy or because the DDL is unsupported."""


class ApplyError(TicdcSyncError):
    """Applying changes to a Delta table failed in a way the user cannot fix by editing files."""
