"""What a run loop reports for run_results and `--follow`: per target (its applies, its
staleness against its lag), per source (staged events, staging freshness), per poll (the
one line `--follow` prints).

`loop` fills these as it runs; they are data with their JSON form, nothing more. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TargetRun:
    """One target in this run: what its applies did, and how stale it is."""

    name: str
    source: str
    upstream: list[str]
    target_lag_seconds: float
    applied_ts: int | None = None
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    merges: int = 0
    quarantined: int = 0
    loaded: int | None = None
    ddl: list[str] = field(default_factory=list)
    blocked: str | None = None
    error: str | None = None  # the last apply failed (cleared by a later success)
    interrupted: bool = False
    applies: int = 0
    seconds: float = 0.0
    staleness_seconds: float | None = None
    current_ts: int | None = None  # the TSO it holds its tables as of (`loop._covers`)
    over_lag: bool = False
    # The commit_ts of its oldest change it can apply now and has not (None: nothing
    # pending): what its staleness and lag count from (`schedule`).
    oldest_pending_ts: int | None = None
    pending_ddl: int = 0  # upstream DDL its plan has not applied (blocked ones too)
    failures: int = 0  # applies that failed in this run (`error` keeps the last one's why)
    waits_for: str | None = None  # a RENAME TABLE ahead waits for this target
    # Its maintenance (`loop_maintenance`): looks taken, compactions and VACUUMs done, the
    # last look's error, and what the last look found (None: not looked at yet).
    maintained: int = 0
    compactions: int = 0
    vacuums: int = 0
    maintenance_error: str | None = None
    files: int | None = None
    bytes: int | None = None
    removed_bytes: int | None = None  # on disk, not in its newest version: awaiting VACUUM
    last_compacted: float | None = None  # wall seconds (or its creation's)
    last_vacuumed: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "upstream": sorted(self.upstream),
            "applied_ts": self.applied_ts if self.applied_ts is not None else -1,
            "inserted": self.inserted,
            "updated": self.updated,
            "deleted": self.deleted,
            "merges": self.merges,
            "ddl": list(self.ddl),
            "blocked": {"message": self.blocked} if self.blocked else None,
            "error": self.error,
            "quarantined": self.quarantined,
            "interrupted": self.interrupted,
            "loaded": self.loaded,
            "applies": self.applies,
            "seconds": round(self.seconds, 3),
            "target_lag_seconds": self.target_lag_seconds,
            "staleness_seconds": self.staleness_seconds,
            "current_ts": self.current_ts,
            "over_lag": self.over_lag,
            "oldest_pending_ts": self.oldest_pending_ts,
            "pending_ddl": self.pending_ddl,
            "failures": self.failures,
            "waits_for": self.waits_for,
        }


@dataclass
class SourceRun:
    """One source in this run."""

    name: str
    staged_events: int = 0
    # Kafka records read (what Kafka held in the ranges read); None: not counted (capture
    # files are not counted apart from the events they stage).
    records: int | None = None
    quarantined: int = 0
    trimmed_events: int = 0
    resolved_ts: int | None = None
    staging_lag_seconds: float | None = None
    partitions: dict[str, int] = field(default_factory=dict)  # topic/partition -> last offset
    skipped_tables: dict[str, int] = field(default_factory=dict)
    unavailable: int = 0  # polls that could not read it (a Kafka outage)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "staged_events": self.staged_events,
            "resolved_ts": self.resolved_ts,
            "staging_lag_seconds": self.staging_lag_seconds,
            "partitions": dict(sorted(self.partitions.items())),
        }
        if self.records is not None:
            out["records"] = self.records
        if self.quarantined:
            out["quarantined"] = self.quarantined
        if self.unavailable:
            out["unavailable"] = self.unavailable
        if self.trimmed_events:
            out["trimmed_events"] = self.trimmed_events
        if self.skipped_tables:
            out["skipped_tables"] = dict(sorted(self.skipped_tables.items()))
        return out


@dataclass(frozen=True)
class PollSummary:
    """One poll of the loop and what happened until the next one."""

    n: int
    staged: int  # events staged by the poll
    applied: int  # applies that ended since the poll
    behind: int  # targets past their lag at its end
    staging_lag_seconds: float | None  # the stalest source's resolved TSO, behind now
    errors: int  # new error lines

    def line(self) -> str:
        """The line `run --follow` prints per poll."""
        lag = "-" if self.staging_lag_seconds is None else f"{self.staging_lag_seconds:.1f}s"
        errors = f", {self.errors} error(s)" if self.errors else ""
        return (
            f"poll {self.n}: {self.staged} event(s) staged, {self.applied} applied, "
            f"{self.behind} behind (over lag), staging lag {lag}{errors}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "staged": self.staged,
            "applied": self.applied,
            "behind": self.behind,
            "staging_lag_seconds": self.staging_lag_seconds,
            "errors": self.errors,
        }


@dataclass
class LoopResult:
    """What the loop did, kept up to date while it runs (a run that raises keeps what it
    had done)."""

    targets: dict[str, TargetRun] = field(default_factory=dict)
    sources: dict[str, SourceRun] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    polls: int = 0
    last_poll: PollSummary | None = None
    interrupted: bool = False  # stopped on request before it was done
    code: int = 0  # 0, or 1: a target is blocked or failed, or a source could not be staged
    sync_points: list[Any] = field(default_factory=list)  # `engine.SyncPoint`s recorded

    def as_results(self) -> dict[str, Any]:
        """The run_results body's parts the loop knows."""
        return {
            "sources": {n: s.as_dict() for n, s in sorted(self.sources.items())},
            "targets": {n: t.as_dict() for n, t in sorted(self.targets.items())},
            "errors": list(self.errors),
            "polls": self.polls,
            "poll": self.last_poll.as_dict() if self.last_poll else None,
        }
