"""Read targets as of one TiDB TSO in Spark: DataFrames that equal the upstream tables at it,
consistent across tables, and fresh up to the newest resolved change.

    from ticdc_sync.spark.as_of import as_of, register_views
    read = as_of(spark, "path/to/project", "latest")   # or a TSO, or "2026-11-26T22:45:00Z"
    register_views(spark, read)                         # SQL: SELECT * FROM orders

Each target is its Delta version chosen by `snapshot` (time travel, `versionAsOf`), plus
the staged row changes after it up to the TSO, typed, checked and collapsed by the very
code an apply runs (`rows.TargetWriter.changes`) over the row segments of the target's
plan with its stop at the TSO, then merged into it by the rules a rewrite writes with
(`merge_rules.merged`: each mode's MERGE as a DataFrame; for a mirror a delete or an upsert
per key, never a row older than what the table holds; a soft_delete's marks, a history's
versions) instead of a commit. Nothing is written: not the targets, not the staging
table, not the quarantine. Refusals (a TSO outside what is readable, a schema change in
between) come from `as_of` and `snapshot`; so does which targets are absent at the TSO
(their upstream tables did not exist then): they have no frame and no view, and the read
names them with why (`AsOfRead.absent`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import Project
from ticdc_sync.core.sqlgen import quote
from ticdc_sync.read import as_of as ao
from ticdc_sync.read import snapshot as snap
from ticdc_sync.spark.apply.merge_rules import merged
from ticdc_sync.spark.apply.rows import TargetWriter
from ticdc_sync.warehouse.locations import state_location, warehouse_path


class AbsentTarget(KeyError):
    """The frame of a target whose upstream tables did not exist at the read's TSO."""

    def __str__(self) -> str:
        return str(self.args[0])  # the message itself, not KeyError's repr of it


class Frames(Mapping[str, DataFrame]):
    """Each present target's DataFrame by name. Asking for an absent target's frame raises
    `AbsentTarget` (a KeyError) saying when its table was created or dropped, not a bare
    KeyError: `in`, `.get` and iteration see the present targets only. A target registered
    in the output's catalog is found by its catalog name too (`aliases`)."""

    def __init__(
        self,
        frames: Mapping[str, DataFrame],
        absent: Mapping[str, ao.Absent],
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self._frames = dict(frames)
        self.absent = dict(absent)
        self.aliases = dict(aliases or {})

    def __getitem__(self, name: str) -> DataFrame:
        name = self.aliases.get(name, name)
        if name in self._frames:
            return self._frames[name]
        gone = self.absent.get(name)
        if gone is not None:
            raise AbsentTarget(
                f"as_of: {gone.message()}: the read has no frame of it (hint: "
                "read.absent lists such targets; read at a TSO when its table existed)"
            )
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    def __repr__(self) -> str:
        return f"Frames({sorted(self._frames)}, absent={sorted(self.absent)})"


@dataclass(frozen=True)
class AsOfRead:
    """The targets read as of one TSO (`at.tso`; `at.held_by`: the source that holds
    `latest` back). A target whose upstream tables did not exist at the TSO is in `absent`
    only (with why: `as_of.Absent`), never in `frames` or the other mappings."""

    at: ao.AsOf
    frames: Frames
    versions: Mapping[str, int]  # the Delta version each target was read from
    applied: Mapping[str, int]  # the applied ts that version holds
    pending: Mapping[str, int]  # staged changes merged on top of it (0: the version is exact)
    absent: Mapping[str, ao.Absent]  # targets left out: created after the TSO, or gone by it


class _Staged:
    """What `TargetWriter` reads of the state tables in a read: the staged events, only, as
    of the staging table's version whose tallies `snapshot` read (`Snapshot.staging_version`:
    a trim that version does not know of yet may be deleting some of them). Pinned, the
    read's frames give the same rows each time they are computed, though later runs stage
    more and trim what they applied. One frame for every target of the read."""

    def __init__(self, events_path: str, version: int | None) -> None:
        self.events_path = events_path
        self.version = version
        self._events: DataFrame | None = None

    def events(self, spark: SparkSession) -> DataFrame:
        if self._events is None:
            reader = spark.read.format("delta")
            if self.version is not None:
                # First the newest version: Delta then holds that snapshot (and its file
                # list) in memory, and the pinned one below, the same version unless a
                # commit came in between, is read from it instead of being rebuilt.
                reader.load(self.events_path)
                reader = reader.option("versionAsOf", self.version)
            self._events = reader.load(self.events_path)
        return self._events


class _ReadState:
    def __init__(self, events_path: str, version: int | None) -> None:
        self.staging = _Staged(events_path, version)


def as_of(
    spark: SparkSession,
    project: Project | str | Path,
    at: Any = ao.LATEST,
    targets: Sequence[str] = (),
    *,
    others: bool = False,
) -> AsOfRead:
    """The selected `targets` (fnmatch globs; all by default) as of `at`: a TSO, a
    wall-clock time (str or datetime; UTC unless it says otherwise) or `latest`. A selected
    target whose upstream tables did not exist at it is named in `absent`, not read, even
    when it is the only one selected; the others are read all the same. `others`: with the
    commits others made on each target after the version read, up to the next run's (a
    user's UPDATE, DELETE or INSERT: `read.as_of.with_others`), as a reader of the table
    sees them; `ticdc-sync verify` reads so."""
    if not isinstance(project, Project):
        from ticdc_sync.project import load_project

        project = load_project(Path(project))
    s = snap.snapshot(project, at, targets, strict=True, others=others)
    state = _ReadState(state_location(warehouse_path(project), "events"), s.staging_version)
    frames: dict[str, DataFrame] = {}
    versions: dict[str, int] = {}
    pending: dict[str, int] = {}
    applied: dict[str, int] = {}
    absent: dict[str, ao.Absent] = {}
    for t in s.targets:
        if t.absent is not None:
            absent[t.name] = t.absent
            continue
        rp = t.read
        assert rp is not None and t.version is not None
        frames[t.name] = _read(spark, project, s, rp, state)
        versions[t.name] = t.version
        pending[t.name] = t.pending
        applied[t.name] = rp.marker.applied_ts
    aliases = {t.catalog_name: t.name for t in s.targets if t.catalog_name}
    return AsOfRead(s.at, Frames(frames, absent, aliases), versions, applied, pending, absent)


def _read(
    spark: SparkSession, project: Project, s: snap.Snapshot, rp: ao.ReadPlan, state: _ReadState
) -> DataFrame:
    try:
        df = spark.read.format("delta").option("versionAsOf", rp.version).load(rp.location)
        df.schema  # noqa: B018 - resolves the version now, so a lost one is refused here
    except Exception as e:  # noqa: BLE001 - the JVM's error, named
        raise UserError(
            f"as_of: version {rp.version} of target {rp.target} cannot be read: "
            f"{str(e).strip().splitlines()[0][:300]} (hint: read at a newer TSO)"
        ) from None
    if rp.exact:
        return df
    sp = s.plan.source_plan(rp.source)
    assert sp is not None
    writer = TargetWriter(spark, state, sp.source, rp.plan, _quiet)  # type: ignore[arg-type]
    for step in rp.steps:
        if isinstance(step, ao.AddColumns):
            df = added(df, step)
            continue
        own = writer.own_columns()
        target_cols = [
            (f.name, f.dataType.simpleString()) for f in df.schema.fields if f.name not in own
        ]
        found = writer.changes(step, target_cols, quarantine=False)
        if found is not None:
            src, keys = found
            df = merged(df, src, rp.plan.mode, keys, [n for n, _ in target_cols])
    return df


def added(df: DataFrame, step: ao.AddColumns) -> DataFrame:
    """`df` after the ADD COLUMN `step`, as the apply's commits leave the table: each new
    column where ALTER TABLE ADD COLUMNS puts it (at the end, or FIRST / AFTER a column),
    holding its backfill value (the apply's UPDATE) or NULL."""
    for c in step.columns:
        if any(f.name.lower() == c.name.lower() for f in df.schema.fields):
            continue  # a DDL recorded twice upstream: the apply tolerates it too
        value = F.expr(c.backfill_sql or "NULL").cast(c.delta_type).alias(c.name)
        names = [quote(n) for n in df.columns]
        if c.position is None:
            cols = [*[F.col(n) for n in names], value]
        elif c.position.first:
            cols = [value, *[F.col(n) for n in names]]
        else:
            at = next(
                (i for i, n in enumerate(df.columns) if n.lower() == str(c.position.after).lower()),
                len(df.columns) - 1,
            )
            cols = [F.col(n) for n in names]
            cols.insert(at + 1, value)
        df = df.select(*cols)
    return df


def _quiet(_line: str) -> None:
    return None


class Views(list[str]):
    """The names of the views `register_views` registered (a list, as it always was), and
    `absent`: each target left without a view, with why."""

    def __init__(self, names: Sequence[str], absent: Mapping[str, ao.Absent]) -> None:
        super().__init__(names)
        self.absent: dict[str, ao.Absent] = dict(absent)


def register_views(spark: SparkSession, read: AsOfRead | Mapping[str, DataFrame]) -> Views:
    """Register each frame of `read` (an `as_of` read, or its frames) as a temporary view
    under its target's name (SQL users then query `orders` as of the read's TSO); the names
    registered, with the absent targets (`Views.absent`). An absent target gets no view,
    and a view of that name left by an earlier read is dropped: a query naming it fails
    as it would upstream, instead of mixing in a table as of another TSO."""
    frames: Mapping[str, DataFrame] = read.frames if isinstance(read, AsOfRead) else read
    absent = frames.absent if isinstance(frames, Frames) else {}
    for name, df in sorted(frames.items()):
        df.createOrReplaceTempView(name)
    for name in sorted(absent):
        spark.catalog.dropTempView(name)
    return Views(sorted(frames), absent)
