"""Where things live in a warehouse: the warehouse itself, targets, and state tables.

A warehouse is a local path (relative to the project, or absolute) or a URI (`s3a://...`,
`file:/...`). Targets live at `<warehouse>/tables/<safe name>` and state at
`<warehouse>/_ticdc_sync/<name>`. Pure Python: computes locations, never touches them.
"""

from __future__ import annotations

import re
from pathlib import Path

from ticdc_sync.model import Project

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


def path_segment(name: str) -> str:
    """One safe folder name for a target: no separators, no `..`, never empty.

    Characters outside [A-Za-z0-9_.-] become `%XX` (percent-encoded UTF-8), so distinct
    names stay distinct and nothing can escape the warehouse folder.
    """
    out = []
    for ch in name:
        if _SAFE_SEGMENT.match(ch):
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
        else:
            out.append(ch)
    seg = "".join(out)
    if seg in ("", ".", "..") or seg.startswith("."):
        seg = "%2E" + seg[1:] if seg.startswith(".") else "%00"
    return seg


def join_uri(base: str, *parts: str) -> str:
    base = base.rstrip("/")
    return "/".join([base, *parts])


def target_location(warehouse: str, target: str) -> str:
    """Where a target's Delta table lives: `<warehouse>/tables/<safe name>`."""
    return join_uri(warehouse, "tables", path_segment(target))


def state_location(warehouse: str, name: str) -> str:
    """Where a state table lives: `<warehouse>/_ticdc_sync/<name>`."""
    return join_uri(warehouse, "_ticdc_sync", path_segment(name))
