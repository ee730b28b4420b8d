"""Where things live in a warehouse: the warehouse itself, targets, and state tables.

A warehouse is a local path (relative to the project, or absolute) or a URI (`s3a://...`,
`file:/...`). Targets live at `<warehouse>/tables/<safe name>` and state at
`<warehouse>/_ticdc_sync/<name>`. Pure Python: computes locations, never touches them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ticdc_sync.core.model import Project

_SAFE_SEGMENT = re.compile(r"[^A-Za-z0-9_.\-]")


def warehouse_path(project: Project) -> str:
    """The project's warehouse as an absolute local path or a URI."""
    wh = project.output.warehouse
    if "://" in wh:
        return wh
    p = Path(wh)
    return str(p if p.is_absolute() else (project.root / p).resolve())


def is_local(location: str) -> bool:
    return "://" not in location or location.startswith("file:")


def local_path(location: str) -> Path:
    """The file-system path of a local location (a plain path or a `file:` URI)."""
    return Path(location.removeprefix("file://").removeprefix("file:"))


# The escape character of folder names. Not `%`: delta-rs (and so polars, and DuckDB's
# Delta extension) decodes a `%XX` in a local table path once too often and cannot load
# the table (docs/engine.md, "What lands"). `~` is unreserved in URIs (RFC 3986), so no reader,
# object store or Hadoop path decodes it.
_ESCAPE = "~"


def _segment(name: str, escape: str) -> str:
    out = []
    for ch in name:
        if _SAFE_SEGMENT.match(ch):
            out.extend(f"{escape}{b:02X}" for b in ch.encode("utf-8"))
        else:
            out.append(ch)
    seg = "".join(out)
    if seg.startswith("."):  # no hidden folder, no `.` or `..`
        return f"{escape}2E" + seg[1:]
    # An empty name: the escape character alone, which no escaping produces (earlier
    # versions wrote `%00`, as for a NUL character).
    return seg or (escape if escape != "%" else "%00")


def path_segment(name: str) -> str:
    """One safe folder name for a target: no separators, no `..`, never empty, no `%`.

    Characters outside [A-Za-z0-9_.-] (the escape character `~` among them) become `~XX`,
    one per byte of their UTF-8 encoding, so distinct names stay distinct and nothing can
    escape the warehouse folder.
    """
    return _segment(name, _ESCAPE)


def legacy_path_segment(name: str) -> str:
    """The folder name earlier versions gave a target: the same escaping with `%XX`."""
    return _segment(name, "%")


def join_uri(base: str, *parts: str) -> str:
    base = base.rstrip("/")
    return "/".join([base, *parts])


def target_location(warehouse: str, target: str) -> str:
    """Where a new target's Delta table lives: `<warehouse>/tables/<safe name>`."""
    return join_uri(warehouse, "tables", path_segment(target))


def find_target(warehouse: str, target: str, exists: Callable[[str], bool]) -> str:
    """Where target `target` lives: `target_location`, unless only the folder an earlier
    version named it (`%XX` escapes) holds a table (`exists` says whether a location holds
    one), which then keeps being used. Names of only [A-Za-z0-9_.-] never differ."""
    here = target_location(warehouse, target)
    legacy = join_uri(warehouse, "tables", legacy_path_segment(target))
    if legacy != here and not exists(here) and exists(legacy):
        return legacy
    return here


def state_location(warehouse: str, name: str) -> str:
    """Where a state table lives: `<warehouse>/_ticdc_sync/<name>`."""
    return join_uri(warehouse, "_ticdc_sync", path_segment(name))
