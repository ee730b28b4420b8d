"""The state of one project load: the problems and warnings found so far, where each entry
was written (file, key path, line), and reading a project YAML file into it.

Every part of the loader reports through a `Ctx`, so all problems are raised together.
This module decides nothing about what entries mean; it never writes anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ticdc_sync.core.errors import Issue
from ticdc_sync.core.model import Source, TableEntry
from ticdc_sync.project.schema_check import schema_issues
from ticdc_sync.project.yaml_lines import ENV_MISSING, interpolate, line_of, load_yaml

PROJECT_FILE = "ticdc_sync.yml"


@dataclass
class Ctx:
    root: Path
    issues: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    paths: dict[int, str] = field(default_factory=dict)  # id(Source|TableEntry) -> key path
    # id(Source|TableEntry) -> (its file's parsed data, its key path there): for key lines
    nodes: dict[int, tuple[Any, tuple[Any, ...]]] = field(default_factory=dict)
    raw: dict[Path, Any] = field(default_factory=dict)  # parsed files (dicts only)
    declared_sources: set[str] = field(default_factory=set)

    def schema_issues(self, data: Any, kind: str, file: str) -> list[Issue]:
        """Schema problems, minus those at a value whose env variable is missing (reported)."""
        env_failed = {(i.file, i.path) for i in self.issues if i.message.startswith(ENV_MISSING)}
        return [i for i in schema_issues(data, kind, file) if (i.file, i.path) not in env_failed]

    def path(self, obj: object, key: str = "") -> str:
        base = self.paths.get(id(obj), "")
        return f"{base}.{key}" if key else base

    def entry_issue(self, obj: Source | TableEntry, key: str, message: str, hint: str = "") -> None:
        """Report a problem at `key` of the entry `obj` (its file, line and key path)."""
        self.issues.append(
            Issue(obj.origin.file, self.line(obj, key), self.path(obj, key), message, hint)
        )

    def line(self, obj: Source | TableEntry, key: str = "") -> int | None:
        """The line of `key` inside the entry `obj` (the entry's own line without a key, or
        when the key is not written there)."""
        data, base = self.nodes.get(id(obj), (None, ()))
        if data is None:
            return obj.origin.line
        return line_of(data, (*base, key) if key else base)

    def rel(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def read_yaml(self, path: Path, kind: str) -> tuple[Any, str]:
        """Read, check duplicates, interpolate env (not for profiles: only the selected output)."""
        file = self.rel(path)
        try:
            text = path.read_text("utf-8")
        except OSError as exc:
            self.issues.append(Issue(file, None, "", f"cannot read: {exc.strerror}"))
            return None, file
        data, issues = load_yaml(text, file)
        self.issues.extend(issues)
        if data is None and not issues:
            self.issues.append(
                Issue(
                    file,
                    None,
                    "",
                    "file is empty",
                    f"see the {kind} keys in docs/reference/keys.md",
                )
            )
        if kind != "profiles_file" and data is not None:
            data = interpolate(data, file, self.issues)
        if isinstance(data, dict):
            self.raw[path] = data
        return data, file


def issue_order(i: Issue) -> tuple[str, int, str, str]:
    return (i.file, i.line or 0, i.path, i.message)


def check_file(ctx: Ctx, data: Any, kind: str, file: str) -> bool:
    """Schema-check one file; False if it is unusable (so semantic checks skip it)."""
    if data is None:
        return False
    issues = ctx.schema_issues(data, kind, file)
    ctx.issues.extend(issues)
    return not issues


def check_items(ctx: Ctx, data: Any, kind: str, file: str, list_key: str) -> list[int]:
    """Schema-check a file holding one list; the indices of the items that passed.

    Items with problems are left out of semantic checks (their problems are reported),
    so one mistake does not hide the others in the same file.
    """
    if data is None:
        return []
    issues = ctx.schema_issues(data, kind, file)
    ctx.issues.extend(issues)
    items = data.get(list_key) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    bad: set[int] = set()
    env = [i for i in ctx.issues if i.file == file and i.message.startswith(ENV_MISSING)]
    for issue in [*issues, *env]:
        m = re.match(rf"{re.escape(list_key)}\[(\d+)\]", issue.path)
        if not m:
            return []  # a file-level problem: nothing in it can be trusted
        bad.add(int(m.group(1)))
    return [i for i in range(len(items)) if i not in bad]
