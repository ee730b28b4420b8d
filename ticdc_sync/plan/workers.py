"""How many targets `run` applies at once, and why: a decision of the plan (`plan` shows it,
`run` uses it), from the profile's setting or the Spark master's cores.

Pure: no pyspark, no clock.
"""

from __future__ import annotations

import re

# Default apply workers: past a few, more threads only queue more jobs for the same
# executors and hold more query plans in the driver.
MAX_DEFAULT_WORKERS = 4

_LOCAL = re.compile(r"^local(?:\[\s*(\*|\d+)\s*(?:,\s*\d+\s*)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]$")


def apply_workers(setting: int | None, master: str, cpus: int | None) -> tuple[int, str]:
    """How many targets `run` applies at once, and why: the profile's `run.apply_workers`,
    else the cores of the Spark master (`local[N]`: N; `local[*]`: `cpus`, this machine's),
    at most MAX_DEFAULT_WORKERS; a cluster master: MAX_DEFAULT_WORKERS."""
    if setting is not None:
        return setting, "run.apply_workers in the profile"
    text = master.strip()
    m = _LOCAL.match(text)
    if m is not None:
        n = m.group(1)
        if n is None:
            return 1, "local: 1 core"
        if n == "*":
            cores = max(1, cpus or 1)
            return min(MAX_DEFAULT_WORKERS, cores), (
                f"local[*]: {cores} core(s) here, at most {MAX_DEFAULT_WORKERS}"
            )
        cores = max(1, int(n))
        return min(MAX_DEFAULT_WORKERS, cores), (
            f"{text}: {cores} core(s), at most {MAX_DEFAULT_WORKERS}"
        )
    m = _LOCAL_CLUSTER.match(text)
    if m is not None:
        cores = max(1, int(m.group(1)) * int(m.group(2)))
        return min(MAX_DEFAULT_WORKERS, cores), (
            f"{text}: {cores} core(s), at most {MAX_DEFAULT_WORKERS}"
        )
    return MAX_DEFAULT_WORKERS, f"a cluster master: {MAX_DEFAULT_WORKERS} by default"
