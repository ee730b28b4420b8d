"""A run's Prometheus metrics, mapped from what the run loop reports (`results`): per source
its resolved TSO, staging lag, polls, records and events staged, records quarantined; per
target its applied TSO, staleness against its `target_lag`, what is pending, its applies
and their duration, rows changed, errors, blocks, and its maintenance (files, bytes,
removed bytes awaiting VACUUM, its last compaction and VACUUM); the run lease; the run's polls and errors.

`RunMetrics` holds them in a registry of its own (`prometheus_client.CollectorRegistry`,
not the client's global one), fed on the loop thread by the loop's callbacks (`polled`,
`staged`, `applied`). Values the results already hold (totals, TSOs, staleness) are not
counted again here: each callback copies the values it changed, which scrapes turn into
metric families (`_Results`), so a scrape from another thread never reads the results
while the loop changes them. Durations are observed per stage and per apply into the client's
histograms. Names follow Prometheus conventions: the `ticdc_sync_` prefix, base units
(seconds), `_total` counters, labels `source` and `target`.

Computes nothing the loop has not (lags and staleness are `schedule`'s, measured by
`loop_report` each poll). No I/O (serving, the textfile and the push are
`metrics_export`), no pyspark.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ticdc_sync import __version__
from ticdc_sync.run.engine import ApplyOutcome, StageOutcome
from ticdc_sync.run.results import LoopResult, PollSummary, SourceRun, TargetRun
from ticdc_sync.run.schedule import wall_ms

PREFIX = "ticdc_sync_"
SOURCE = ("source",)
TARGET = ("target", "source")
# A stage reads Kafka, decodes and commits once: about a second when little is new, minutes
# for a catch-up. An apply is one or more MERGEs and commits: seconds to many minutes.
POLL_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
APPLY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)


@dataclass(frozen=True)
class Series:
    """One metric mapped from a field of `SourceRun` or `TargetRun`: its name (a counter's
    without `_total`), kind, help and value (None: no sample, e.g. nothing resolved yet)."""

    name: str
    kind: str  # "gauge" or "counter"
    help: str
    value: Callable


def _tso(ts: int | None) -> int | None:
    return ts if ts is not None and ts >= 0 else None


def _wall_seconds(ts: int | None) -> float | None:
    """A TSO's physical part as Unix time in seconds (codec facts 1.1)."""
    t = _tso(ts)
    return None if t is None else wall_ms(t) / 1000


SOURCE_SERIES: tuple[Series, ...] = (
    Series(
        "source_resolved_tso",
        "gauge",
        "The source's resolved TSO: every change at or below it is staged (a float64: exact "
        "to its physical part, milliseconds).",
        lambda s: _tso(s.resolved_ts),
    ),
    Series(
        "source_resolved_timestamp_seconds",
        "gauge",
        "The wall time of the source's resolved TSO, as Unix seconds.",
        lambda s: _wall_seconds(s.resolved_ts),
    ),
    Series(
        "source_staging_lag_seconds",
        "gauge",
        "How far the source's resolved TSO is behind the wall clock, as of the last poll: "
        "staging's own freshness.",
        lambda s: s.staging_lag_seconds,
    ),
    Series(
        "source_records",
        "counter",
        "Kafka records read from the source by this run (capture files: not counted).",
        lambda s: s.records,
    ),
    Series(
        "source_events_staged",
        "counter",
        "Events staged from the source by this run.",
        lambda s: s.staged_events,
    ),
    Series(
        "source_records_quarantined",
        "counter",
        "Undecodable records of the source moved to the quarantine by this run.",
        lambda s: s.quarantined,
    ),
    Series(
        "source_events_trimmed",
        "counter",
        "Applied events older than the retention deleted from the staging table by this run.",
        lambda s: s.trimmed_events,
    ),
    Series(
        "source_unavailable",
        "counter",
        "Polls that could not read the source (a Kafka outage, waited out by --follow).",
        lambda s: s.unavailable,
    ),
)

TARGET_SERIES: tuple[Series, ...] = (
    Series(
        "target_applied_tso",
        "gauge",
        "The TSO of the target's last applied change, as its Delta table's marker says (a "
        "float64: exact to its physical part, milliseconds).",
        lambda t: _tso(t.applied_ts),
    ),
    Series(
        "target_applied_timestamp_seconds",
        "gauge",
        "The wall time of the target's applied TSO, as Unix seconds.",
        lambda t: _wall_seconds(t.applied_ts),
    ),
    Series(
        "target_staleness_seconds",
        "gauge",
        "How old the target's data is, as of the last poll: the wall clock less the TSO it "
        "equals its upstream tables at (before its oldest pending change, else its source's "
        "resolved TSO).",
        lambda t: t.staleness_seconds,
    ),
    Series(
        "target_lag_budget_seconds",
        "gauge",
        "The target's target_lag: how old its oldest pending change may get.",
        lambda t: t.target_lag_seconds,
    ),
    Series(
        "target_over_lag",
        "gauge",
        "1 when the target's oldest pending change is older than its target_lag (last poll).",
        lambda t: int(t.over_lag),
    ),
    Series(
        "target_pending",
        "gauge",
        "1 when a change the target can apply now is staged and not applied (last poll).",
        lambda t: int(t.oldest_pending_ts is not None),
    ),
    Series(
        "target_oldest_pending_timestamp_seconds",
        "gauge",
        "The wall time of the target's oldest pending change, as Unix seconds (no sample "
        "when nothing is pending).",
        lambda t: _wall_seconds(t.oldest_pending_ts),
    ),
    Series(
        "target_pending_ddl",
        "gauge",
        "Upstream DDL the target's plan has not applied yet, blocked ones included.",
        lambda t: t.pending_ddl,
    ),
    Series(
        "target_rows_inserted",
        "counter",
        "Rows the target's applies inserted in this run.",
        lambda t: t.inserted,
    ),
    Series(
        "target_rows_updated",
        "counter",
        "Rows the target's applies updated in this run.",
        lambda t: t.updated,
    ),
    Series(
        "target_rows_deleted",
        "counter",
        "Rows the target's applies deleted in this run, as Delta counts them (a soft_delete "
        "or history target updates or appends instead).",
        lambda t: t.deleted,
    ),
    Series(
        "target_rows_loaded",
        "counter",
        "Rows loaded into the target from its Dumpling export (initial_load) by this run.",
        lambda t: t.loaded or 0,
    ),
    Series(
        "target_rows_quarantined",
        "counter",
        "Row changes (or export lines) of the target quarantined at apply time in this run.",
        lambda t: t.quarantined,
    ),
    Series(
        "target_ddl_applied",
        "counter",
        "Upstream DDL changes applied to the target in this run.",
        lambda t: len(t.ddl),
    ),
    Series(
        "target_apply_errors",
        "counter",
        "Applies of the target that failed in this run (--follow tries again after a backoff).",
        lambda t: t.failures,
    ),
    Series(
        "target_failing",
        "gauge",
        "1 while the target's last apply failed (until one succeeds).",
        lambda t: int(t.error is not None),
    ),
    Series(
        "target_data_files",
        "gauge",
        "Data files of the target's newest version, as its last maintenance look found them.",
        lambda t: t.files,
    ),
    Series(
        "target_data_bytes",
        "gauge",
        "Bytes of the data files of the target's newest version (last maintenance look).",
        lambda t: t.bytes,
    ),
    Series(
        "target_removed_bytes",
        "gauge",
        "Bytes of the target's files on disk its newest version does not use: removed, "
        "awaiting VACUUM past `maintenance.retain` (local tables only).",
        lambda t: t.removed_bytes,
    ),
    Series(
        "target_last_compaction_timestamp_seconds",
        "gauge",
        "When the target was last compacted (OPTIMIZE), as Unix seconds.",
        lambda t: t.last_compacted,
    ),
    Series(
        "target_last_vacuum_timestamp_seconds",
        "gauge",
        "When the target was last vacuumed (or created, if never), as Unix seconds.",
        lambda t: t.last_vacuumed,
    ),
    Series(
        "target_compactions",
        "counter",
        "Compactions of the target by this run's maintenance.",
        lambda t: t.compactions,
    ),
    Series(
        "target_vacuums",
        "counter",
        "VACUUMs of the target by this run's maintenance.",
        lambda t: t.vacuums,
    ),
    Series(
        "target_maintenance_failing",
        "gauge",
        "1 when the target's last maintenance look failed (tried again at the next).",
        lambda t: int(t.maintenance_error is not None) if t.maintained else None,
    ),
    Series(
        "target_blocked",
        "gauge",
        "1 when the target stopped at a DDL its policy blocks (see `ticdc-sync status`).",
        lambda t: int(t.blocked is not None),
    ),
)

RUN_SERIES: tuple[Series, ...] = (
    Series(
        "polls",
        "counter",
        "Polls of the sources by this run (1 for a plain run).",
        lambda r: r.polls,
    ),
    Series(
        "errors",
        "counter",
        "Distinct error lines this run reported (a failed apply, a blocked target, a "
        "record that stops its partition).",
        lambda r: len(r.errors),
    ),
)

POLL_DURATION = "source_poll_duration_seconds"
APPLY_DURATION = "target_apply_duration_seconds"
LAST_POLL = "last_poll_timestamp_seconds"
LEASE_HELD = "run_lease_held"
INFO = "run"  # ticdc_sync_run_info


# The label names of each family, by its name without the prefix.
_LABELS: dict[str, tuple[str, ...]] = {
    **{s.name: SOURCE for s in SOURCE_SERIES},
    **{s.name: TARGET for s in TARGET_SERIES},
    **{s.name: () for s in RUN_SERIES},
    POLL_DURATION: SOURCE,
    APPLY_DURATION: TARGET,
    LAST_POLL: (),
    LEASE_HELD: (),
    INFO: ("mode", "project", "version"),
}


class RunMetrics:
    """The metrics of one run in a registry of their own (`registry`). `lease_held` tells
    at each scrape whether the run still holds the warehouse's run lease; `clock` is wall
    time (the last poll's timestamp)."""

    def __init__(
        self,
        project: str,
        *,
        follow: bool,
        lease_held: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        self._poll = Histogram(
            PREFIX + POLL_DURATION,
            "Seconds one poll took to read, decode and stage the source (one that could not "
            "read it is not observed: see ticdc_sync_source_unavailable_total).",
            SOURCE,
            registry=self.registry,
            buckets=POLL_BUCKETS,
        )
        self._apply = Histogram(
            PREFIX + APPLY_DURATION,
            "Seconds one apply of the target took (failed and interrupted ones too); its "
            "_count is the target's applies.",
            TARGET,
            registry=self.registry,
            buckets=APPLY_BUCKETS,
        )
        self._results = _Results(
            {"project": project, "version": __version__, "mode": "follow" if follow else "once"},
            lease_held,
        )
        self.registry.register(self._results)

    # --- the loop's callbacks (on the loop thread) -------------------------------------

    def polled(self, summary: PollSummary, result: LoopResult) -> None:
        """`run_loop`'s `on_poll`: each poll's results, once measured."""
        self._results.take(result, polled_at=self._clock())

    def staged(self, outcome: StageOutcome, result: LoopResult) -> None:
        """`run_loop`'s `on_stage`: one source staged (or found unavailable)."""
        if outcome.unavailable is None:
            self._poll.labels(outcome.source).observe(outcome.seconds)
        self._results.take(result, source=outcome.source)

    def applied(self, outcome: ApplyOutcome, result: LoopResult) -> None:
        """`run_loop`'s `on_apply`: one apply, folded into the results."""
        run = result.targets.get(outcome.target)
        source = run.source if run is not None else ""
        self._apply.labels(outcome.target, source).observe(outcome.seconds)
        self._results.take(result, target=outcome.target)

    def ended(self, result: LoopResult) -> None:
        """The run ended (also with an error): its results as they are."""
        self._results.take(result)

    def names(self) -> list[str]:
        """The sample names a scrape shows, whether or not they have a sample yet: counters
        with `_total`, histograms with `_bucket`, `_sum` and `_count` (and the client's
        `_created`, left out here: nothing reads it), sorted."""
        return sorted(self.labels())

    def labels(self) -> dict[str, tuple[str, ...]]:
        """Each sample name a scrape shows (`names`) with its label names."""
        out: dict[str, tuple[str, ...]] = {}
        for m in self.registry.collect():
            base = _LABELS[m.name[len(PREFIX) :]]
            if m.type == "info":
                out[m.name + "_info"] = base
            elif m.type == "counter":
                out[m.name + "_total"] = base
            elif m.type == "histogram":
                out[m.name + "_bucket"] = (*base, "le")
                out[m.name + "_sum"] = out[m.name + "_count"] = base
            else:
                out[m.name] = base
        return out


Row = tuple[tuple[str, ...], tuple]  # label values, and the values of a table's series


class _Results(Collector):
    """The metrics mapped from the loop's results, as of the last callback; the lease as of
    the scrape. A callback copies the values of what it changed (a poll: everything; a
    stage: its source; an apply: its target; each: the run's counts), so that an apply
    costs the same with a thousand targets as with one. Scrapes make the families from the
    copies."""

    def __init__(self, info: dict[str, str], lease_held: Callable[[], bool] | None) -> None:
        self._info = info
        self._lease_held = lease_held
        self._lock = threading.Lock()
        self._sources: dict[str, Row] = {}
        self._targets: dict[str, Row] = {}
        self._run_values: tuple = _values(RUN_SERIES, LoopResult())
        self._last_poll: float | None = None

    def take(
        self,
        result: LoopResult,
        *,
        polled_at: float | None = None,
        source: str | None = None,
        target: str | None = None,
    ) -> None:
        """Copy from `result` (on the loop thread, which alone changes it): the source or
        the target named, else every one; `polled_at`: a poll was summed up then."""
        if source is None and target is None:
            sources, targets = list(result.sources), list(result.targets)
        else:
            sources = [source] if source is not None else []
            targets = [target] if target is not None else []
        new_sources = {
            n: ((s.name,), _values(SOURCE_SERIES, s))
            for n in sources
            if (s := result.sources.get(n)) is not None
        }
        new_targets = {
            n: ((t.name, t.source), _values(TARGET_SERIES, t))
            for n in targets
            if (t := result.targets.get(n)) is not None
        }
        run = _values(RUN_SERIES, result)
        with self._lock:
            self._sources.update(new_sources)
            self._targets.update(new_targets)
            self._run_values = run
            if polled_at is not None:
                self._last_poll = polled_at

    def describe(self) -> Iterator[Metric]:
        """The families (no samples), for the registry's check of clashing names."""
        yield from self._run()
        yield from _families({}, {}, _values(RUN_SERIES, LoopResult()), None)

    def collect(self) -> Iterator[Metric]:
        yield from self._run(self._lease_held)
        with self._lock:
            sources, targets = dict(self._sources), dict(self._targets)
            run, last_poll = self._run_values, self._last_poll
        yield from _families(sources, targets, run, last_poll)

    def _run(self, lease_held: Callable[[], bool] | None = None) -> Iterator[Metric]:
        info = InfoMetricFamily(PREFIX + INFO, "The run: its project, ticdc-sync version, mode.")
        info.add_metric([], self._info)
        yield info
        held = GaugeMetricFamily(
            PREFIX + LEASE_HELD,
            "1 while this run holds the warehouse's run lease and may commit.",
        )
        if lease_held is not None:
            held.add_metric([], int(lease_held()))
        yield held


def _values(series: tuple[Series, ...], item: SourceRun | TargetRun | LoopResult) -> tuple:
    return tuple(s.value(item) for s in series)


def _families(
    sources: dict[str, Row], targets: dict[str, Row], run: tuple, last_poll: float | None
) -> list[Metric]:
    out = _mapped(SOURCE_SERIES, SOURCE, [sources[n] for n in sorted(sources)])
    out += _mapped(TARGET_SERIES, TARGET, [targets[n] for n in sorted(targets)])
    out += _mapped(RUN_SERIES, (), [((), run)])
    last = GaugeMetricFamily(
        PREFIX + LAST_POLL,
        "When this run's last poll was summed up (each poll of --follow, a plain run's one), "
        "as Unix seconds.",
    )
    if last_poll is not None:
        last.add_metric([], last_poll)
    out.append(last)
    return out


def _mapped(series: tuple[Series, ...], labels: tuple[str, ...], rows: list[Row]) -> list[Metric]:
    out: list[Metric] = []
    for i, s in enumerate(series):
        kind = CounterMetricFamily if s.kind == "counter" else GaugeMetricFamily
        family = kind(PREFIX + s.name, s.help, labels=list(labels))
        for label_values, values in rows:
            if values[i] is not None:
                family.add_metric(list(label_values), values[i])
        out.append(family)
    return out
