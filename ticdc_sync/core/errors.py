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


class DdlError(UserError):
    """A DDL statement that cannot be parsed or translated."""


class BlockedError(UserError):
    """A table is blocked at a DDL by policy or because the DDL is unsupported."""


class Fatal(TicdcSyncError):
    """The whole run must stop (the run lease is lost, ...): raised by an engine method,
    it stops every apply at its next step and ends the run with this error. Any other
    exception from a target's apply is the failure of that target only (`loop`)."""
