"""How far a source's staged events may be trimmed: the one decision about the staging table's
retention, made from the plan and the run's outcome.

Events every target of the source has applied, and older than the project's
`staging.retention` behind the source's resolved TSO (TiDB time, not the clock of the
machine: a replay of old captures keeps what it stages), are deleted; DDL and undecodable
records are kept (they are few, and the DDL timeline and the quarantine read them).
Nothing is trimmed while a target of the source has not applied the events (blocked, not
created yet) or while an undecodable record is open (its partition's resolved TSO is read
from the watermarks before it). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable


def trim_bound(
    applied: Iterable[int], resolved: int | None, retention_ms: int, open_bad: bool
) -> int | None:
    """The highest commit_ts whose row and watermark events may be deleted, or None."""
    if open_bad or resolved is None or resolved < 0:
        return None
    # A TSO's physical part is milliseconds, above 18 logical bits (codec facts 1.1).
    cut = resolved - (retention_ms << 18)
    bound = min(*applied, resolved, cut)
    return bound if bound >= 0 else None
