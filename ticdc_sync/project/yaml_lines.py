"""YAML with line numbers: parse a project file so every key and item knows its line, and
fill in `${VAR}` environment values.

Duplicate keys, syntax errors and missing variables become `Issue`s. This module knows
nothing of what a project file means (no schema, no model); it never reads files itself.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from ticdc_sync.core.errors import Issue

ENV_MISSING = "environment variable"
_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class LineDict(dict):
    """A YAML mapping that remembers the line of each key (1-based) and its own line."""

    line: int | None = None
    key_lines: dict[Any, int]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines = {}


class LineList(list):
    """A YAML sequence that remembers the line of each item."""

    line: int | None = None
    item_lines: list[int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines = []


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that keeps line numbers and reports duplicate keys instead of overwriting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # key, line, first line, the mapping holding it
        self.duplicates: list[tuple[str, int, int, LineDict]] = []


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if isinstance(key, (dict, list)):
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a scalar", key_node.start_mark
            )
        if key in out:
            loader.duplicates.append((str(key), line, out.key_lines[key], out))
            continue
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str, file: str) -> tuple[Any, list[Issue]]:
    """Parse YAML keeping lines; duplicate keys and syntax errors become Issues."""
    loader = _LineLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        return None, [
            Issue(file, line, "", f"invalid YAML: {problem}", "check indentation and quoting")
        ]
    finally:
        loader.dispose()
    issues = [
        Issue(
            file,
            line,
            key_path((*(_find(data, owner) or ()), key)),
            f"duplicate key {key!r} (first at line {first})",
            "keep one of them",
        )
        for key, line, first, owner in loader.duplicates
    ]
    return data, issues


def _find(node: Any, target: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """The key path of container `target` inside `node` (by identity)."""
    if node is target:
        return path
    children = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for k, v in children:
        found = _find(v, target, (*path, k))
        if found is not None:
            return found
    return None


def line_of(data: Any, path: tuple[Any, ...]) -> int | None:
    """The line of the deepest node along `path` that exists."""
    line = getattr(data, "line", None)
    node = data
    for part in path:
        if isinstance(node, LineDict) and part in node:
            line = node.key_lines.get(part, line)
            node = node[part]
        elif isinstance(node, LineList) and isinstance(part, int) and part < len(node):
            line = node.item_lines[part]
            node = node[part]
        else:
            break
    return line


def key_path(path: tuple[Any, ...]) -> str:
    """`sources[0].options.time-zone` style path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def interpolate(
    data: Any, file: str, issues: list[Issue], path: tuple[Any, ...] = (), root: Any = None
) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in string values (`$$` is a literal `$`).

    Containers are updated in place so line information survives.
    """
    root = data if root is None else root
    if isinstance(data, LineDict):
        for k in list(data):
            data[k] = interpolate(data[k], file, issues, (*path, k), root)
        return data
    if isinstance(data, LineList):
        for i, v in enumerate(data):
            data[i] = interpolate(v, file, issues, (*path, i), root)
        return data
    if not isinstance(data, str) or "$" not in data:
        return data

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        value = os.environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is not None:
                return default
            issues.append(
                Issue(
                    file,
                    line_of(root, path),
                    key_path(path),
                    f"{ENV_MISSING} {name} is not set",
                    f"export {name}=... or write ${{{name}:-default}}",
                )
            )
            return ""
        return value

    return _ENV.sub(sub, data)
