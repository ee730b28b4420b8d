"""What `ticdc-sync verify` found, per target, and how it is shown: text for people, JSON for
tools (`--format json`: sorted keys, every list in a fixed order, so two runs over the same
lake and export print the same bytes).

A target is equal when the lake holds its table, no column is on one side only, and both
sides have as many rows with the same checksum. A target absent at its export's TSO (none of
its upstream tables existed then) is listed as such: it is neither equal nor different. Values are shown as text (`verify.shown_sql`):
exact for every type, and JSON cannot hold a BIGINT or DECIMAL exactly as a number.

Pure: no pyspark, no I/O; `spark.verify` fills it in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ticdc_sync.read.as_of import wall_text
from ticdc_sync.read.verify import EXTRA, KINDS, MISSING, AbsentTarget, Check, Columns

FORMAT_VERSION = 1

Values = tuple[tuple[str, str | None], ...]  # (column, value as text; None: NULL)


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison: its live rows, and its checksums (`verify.checksum_text`)
    over all compared columns and per compared column."""

    rows: int
    checksum: str
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Difference:
    """One differing key: `missing` (upstream only), `extra` (lake only) or `changed` (with
    the columns whose values differ), with each side's row where it has one."""

    kind: str
    key: Values
    columns: tuple[str, ...] = ()
    upstream: Values | None = None
    lake: Values | None = None


@dataclass(frozen=True, slots=True)
class TableResult:
    check: Check
    columns: Columns
    upstream: Side
    lake: Side | None  # None: the lake has no Delta table for the target
    # Differing keys of each kind; None when not counted (no keys to find them by).
    counts: Mapping[str, int] | None = None
    first: tuple[Difference, ...] = ()  # the first differing keys, by key
    bad_rows: int = 0  # export rows left out, as the load quarantined them

    @property
    def differing_columns(self) -> tuple[str, ...]:
        if self.lake is None:
            return ()
        pairs = zip(self.columns.names, self.upstream.columns, self.lake.columns, strict=True)
        return tuple(n for n, u, lk in pairs if u != lk)

    @property
    def equal(self) -> bool:
        return (
            self.lake is not None
            and not self.columns.only_upstream
            and not self.columns.only_lake
            and self.upstream.rows == self.lake.rows
            and self.upstream.checksum == self.lake.checksum
        )


@dataclass(frozen=True, slots=True)
class Report:
    results: tuple[TableResult, ...]
    passed: tuple[str, ...] = ()  # targets neither side holds anything of (with why)
    show: int = 10
    exports: tuple[tuple[str, int], ...] = field(default=())  # (export as shown, TSO)
    # Targets none of whose upstream tables existed at their export's TSO: not compared.
    absent: tuple[AbsentTarget, ...] = ()

    @property
    def equal(self) -> bool:
        return all(r.equal for r in self.results)


def exports_of(
    results: Sequence[TableResult], absent: Sequence[AbsentTarget] = ()
) -> tuple[tuple[str, int], ...]:
    return tuple(
        sorted(
            {(r.check.export.shown, r.check.tso) for r in results}
            | {(a.export.shown, a.tso) for a in absent}
        )
    )


# --------------------------------------------------------------------------- JSON


def _values(v: Values | None) -> dict[str, str | None] | None:
    return None if v is None else dict(v)


def to_json(report: Report) -> dict[str, Any]:
    targets = []
    for r in sorted(report.results, key=lambda r: r.check.target):
        c = r.check
        targets.append(
            {
                "name": c.target,
                "catalog_name": c.catalog_name,
                "source": c.source,
                "mode": c.mode.value,
                "export": c.export.shown,
                "tso": c.tso,
                "lake_tso": c.lake_tso,
                "equal": r.equal,
                "lake_table": r.lake is not None,
                "upstream_tables": list(c.upstreams),
                "not_in_export": list(c.not_in_export),
                "keys": list(r.columns.keys),
                "columns": list(r.columns.names),
                "not_compared": [{"column": n, "why": w} for n, w in r.columns.not_compared],
                "columns_only_upstream": list(r.columns.only_upstream),
                "columns_only_in_lake": list(r.columns.only_lake),
                "rows": {"upstream": r.upstream.rows, "lake": r.lake.rows if r.lake else 0},
                "checksum": {
                    "upstream": r.upstream.checksum,
                    "lake": r.lake.checksum if r.lake else None,
                },
                "differing_columns": list(r.differing_columns),
                "differences": None if r.counts is None else {k: r.counts[k] for k in KINDS},
                "first_differences": [
                    {
                        "kind": d.kind,
                        "key": dict(d.key),
                        "columns": list(d.columns),
                        "upstream": _values(d.upstream),
                        "lake": _values(d.lake),
                    }
                    for d in r.first
                ],
                "bad_export_rows": r.bad_rows,
                "notes": list(r.columns.notes),
            }
        )
    return {
        "format_version": FORMAT_VERSION,
        "equal": report.equal,
        "exports": [{"export": e, "tso": t, "wall_time": wall_text(t)} for e, t in report.exports],
        "targets": targets,
        "absent": [
            {
                "name": a.target,
                "source": a.source,
                "export": a.export.shown,
                "tso": a.tso,
                "why": a.absent.why,
                "absent_since": a.absent.gone_ts,
                "absent_until": a.absent.created_ts,
            }
            for a in sorted(report.absent, key=lambda a: a.target)
        ],
        "passed_over": list(report.passed),
    }


def json_text(report: Report) -> str:
    return json.dumps(to_json(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- text


_PLAIN = re.compile(r"^[A-Za-z0-9_.:+-]+$")


def shown(v: str | None) -> str:
    """A value in a line: NULL, as it is when plain, else quoted (JSON string syntax)."""
    if v is None:
        return "NULL"
    return v if _PLAIN.match(v) else json.dumps(v, ensure_ascii=False)


def _pairs(values: Values) -> str:
    return ", ".join(f"{n}={shown(v)}" for n, v in values)


def _difference(d: Difference) -> str:
    head = f"    {d.kind} {_pairs(d.key)}"
    if d.kind == MISSING:
        return f"{head}: upstream ({_pairs(d.upstream or ())}), not in the lake"
    if d.kind == EXTRA:
        return f"{head}: in the lake ({_pairs(d.lake or ())}), not upstream"
    up, lake = dict(d.upstream or ()), dict(d.lake or ())
    diffs = "; ".join(
        f"{c}: upstream {shown(up.get(c))}, lake {shown(lake.get(c))}" for c in d.columns
    )
    return f"{head}: {diffs}"


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _named(c: Check) -> str:
    """A target as the report names it: with its catalog name, when it has one."""
    return c.target if c.catalog_name is None else f"{c.target} ({c.catalog_name})"


def _table_lines(r: TableResult, several: bool) -> list[str]:
    c = r.check
    where = f" (export {c.export.shown})" if several else ""
    if r.equal:
        assert r.lake is not None
        return [
            f"  {_named(c)}: equal ({_rows(r.upstream.rows)}, checksum {r.upstream.checksum})"
            f"{where}"
        ]
    why: list[str] = []
    if r.lake is None:
        why.append(f"the lake has no table for it ({_rows(r.upstream.rows)} upstream)")
    if r.columns.only_upstream:
        why.append(f"columns only upstream: {', '.join(r.columns.only_upstream)}")
    if r.columns.only_lake:
        why.append(f"columns only in the lake: {', '.join(r.columns.only_lake)}")
    if r.lake is not None:
        if r.upstream.rows != r.lake.rows:
            why.append(f"{_rows(r.upstream.rows)} upstream, {_rows(r.lake.rows)} in the lake")
        if r.upstream.checksum != r.lake.checksum:
            why.append(f"checksum {r.upstream.checksum} upstream, {r.lake.checksum} in the lake")
        if r.differing_columns and r.upstream.rows == r.lake.rows:
            # (With a row on one side only, every column's checksum differs.)
            why.append(f"values differ in {', '.join(r.differing_columns)}")
    if r.counts is not None and any(r.counts.values()):
        why.append(", ".join(f"{r.counts[k]} {k}" for k in KINDS))
    lines = [f"  {_named(c)}: DIFFERENT: {'; '.join(why)}{where}"]
    lines += [_difference(d) for d in r.first]
    shown_n = len(r.first)
    total = sum(r.counts.values()) if r.counts is not None else 0
    if total > shown_n:
        lines.append(f"    ... and {total - shown_n} more (hint: --show N lists more)")
    return lines


def render(report: Report) -> list[str]:
    """The report as lines for a terminal: one line per export, one per target (and its
    first differing keys), and a last line counting them."""
    lines = [
        f"verify against the Dumpling export {e} at its snapshot TSO {t} ({wall_text(t)})"
        for e, t in report.exports
    ]
    several = len(report.exports) > 1
    results = sorted(report.results, key=lambda r: r.check.target)
    by_name: list[tuple[str, list[str]]] = []
    for r in results:
        mine = _table_lines(r, several)
        mine += [f"    note: {n}" for n in r.columns.notes if not r.equal]
        if r.bad_rows:
            mine.append(
                f"    note: {r.bad_rows} export row(s) cannot be typed for it and were left out "
                "(on_bad_message: quarantine, as its load does)"
            )
        by_name.append((r.check.target, mine))
    for a in report.absent:
        where = f" (export {a.export.shown})" if several else ""
        text = (
            f"  {a.target}: absent at TSO {a.tso}, nothing to compare: its upstream table did "
            f"not exist then: {a.absent.why}{where}"
        )
        by_name.append((a.target, [text]))
    for _, mine in sorted(by_name, key=lambda x: x[0]):
        lines += mine
    lines += [f"  passed over: {p}" for p in report.passed]
    n_equal = sum(r.equal for r in results)
    n_diff = len(results) - n_equal
    tail = f"{n_equal} of {len(results)} target(s) equal" + (
        f", {n_diff} different" if n_diff else ""
    )
    if report.absent:
        tail += (
            f"; {len(report.absent)} absent at the export's TSO (their upstream tables did "
            "not exist then)"
        )
    lines.append(tail)
    return lines
