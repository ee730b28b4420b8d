"""Kill a process started by a test together with everything it started, at once.

`ticdc-sync` starts Spark's JVM in a session of its own (`ticdc_sync.spark.runtime.jvm_output`: the
terminal's Ctrl-C must not reach it), so killing the CLI's process group misses the JVM,
which would then exit on its own when its stdin closes, finishing what it was doing.
Descendants are found through /proc (Linux); elsewhere only the process group is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (children, their children, ...), as /proc shows them now."""
    parents: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # After the command's ")": state, ppid.
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process group of `pid` (a group leader: started with
    `start_new_session`) and to the group of every process below it (the JVM's own, and
    the Python workers it forked), all found before the first is sent."""
    groups = {pid}
    for child in descendants(pid):
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(child))
    groups.discard(os.getpgid(0))  # not the caller's own (unless it is `pid`'s)
    for group in [*sorted(groups - {pid}), pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
