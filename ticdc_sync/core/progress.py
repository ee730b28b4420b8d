"""The text of a progress report: one line per phase of a run, from what is known of it.

`PhaseStatus` holds what a phase has done and, where known, how much there is to do
(records in Kafka, bytes of capture files); `render` makes the line the console draws,
e.g. `stage canal: 153,201 records, 45.1 of 120.0 MB (38%), 12.3k records/s, tasks 3/8,
0:42`. Pure: no Spark, no clock, no I/O (the caller passes the elapsed time).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PhaseStatus:
    """What one phase of a run has done so far."""

    name: str  # "stage canal", "apply", "plan", "starting Spark", ...
    elapsed: float = 0.0
    records: int | None = None  # records read so far
    bytes: int | None = None  # bytes read so far
    records_total: int | None = None  # records to read, when known (Kafka)
    bytes_total: int | None = None  # bytes to read, when known (capture files)
    tasks_done: int = 0
    tasks_total: int = 0
    targets_done: int | None = None  # apply: targets finished
    targets_total: int | None = None
    steps: dict[str, str] = field(default_factory=dict)  # apply: target -> its current step


def count(n: int) -> str:
    return f"{n:,}"


def size(n: float) -> str:
    """Bytes as kB/MB/GB (powers of 1000, as disk and network tools show them)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def rate(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


def duration(seconds: float) -> str:
    """`m:ss`, or `h:mm:ss` from an hour on."""
    s = int(max(0.0, seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _percent(done: int, total: int) -> str:
    return f" ({min(100, done * 100 // total)}%)" if total > 0 else ""


def render(st: PhaseStatus) -> str:
    """The progress line of a phase."""
    parts: list[str] = []
    if st.records_total is not None:
        done = st.records or 0
        parts.append(
            f"{count(done)} of {count(st.records_total)} records{_percent(done, st.records_total)}"
        )
    elif st.records is not None:
        parts.append(f"{count(st.records)} records")
    if st.bytes_total is not None:
        done = st.bytes or 0
        parts.append(
            f"{size(done)} of {size(st.bytes_total)}"
            + ("" if st.records_total is not None else _percent(done, st.bytes_total))
        )
    elif st.bytes:
        parts.append(size(st.bytes))
    if st.records and st.elapsed > 0 and st.records >= st.elapsed:
        parts.append(f"{rate(st.records / st.elapsed)} records/s")
    if st.targets_total is not None:
        parts.append(f"{st.targets_done or 0} of {st.targets_total} targets done")
        parts.extend(f"{t} {step}" for t, step in sorted(st.steps.items()))
    if st.tasks_total:
        parts.append(f"tasks {st.tasks_done}/{st.tasks_total}")
    parts.append(duration(st.elapsed))
    return f"{st.name}: " + ", ".join(parts)
