"""Each target's name in the output's catalog, and the catalog statements a run makes.

With a `catalog:` on the profile output, every target is registered by name as an external
Delta table at its location (`schema`/`table` templates of its table entry), kept in step
with its DDL: a target that exists, or that this run creates (a CREATE TABLE, a RENAME TABLE
that moves rows in, a load), is registered; one whose upstream table is dropped or renamed
away has its entry dropped (or kept: `catalog_on_drop: keep`). The decision is made here
once, from the target's steps; the run's catalog step (`plan.model.Catalog`, the last step
before a stop) carries it out and records what it did in the `catalog` state table, which
`plan` reads back: a target whose record differs from its entry counts as pending. A run
checks the catalog itself for every target whatever the record says (it reconciles), and
refuses a name that a table at another location holds. Before any target's apply, a run
whose targets have catalog steps checks once that the catalog loads at all (`to_check`,
`check_statement`): a catalog plugin that cannot be loaded or a metastore that is down stops
the run before anything is committed, not after every target's rows. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ticdc_sync.core.model import Project
from ticdc_sync.core.sqlgen import quote, sql_string
from ticdc_sync.ddl import changes as ch
from ticdc_sync.plan import policy
from ticdc_sync.plan.model import (
    CATALOG_DROP,
    CATALOG_KEEP,
    CATALOG_NONE,
    CATALOG_REGISTER,
    Catalog,
    CatalogEntry,
    Ddl,
    LoadRows,
    Stop,
    TargetPlan,
    end_ts,
)
from ticdc_sync.warehouse.state import TargetState

# The table properties that say a target's upstream table is gone (`plan.ddl_parts`).
GONE_PROPERTIES = ("ticdc_sync.dropped", "ticdc_sync.renamed_to")


def catalog_entry(project: Project, t: TargetPlan, state: TargetState) -> CatalogEntry | None:
    """Target `t`'s catalog entry as the warehouse stands (its action follows from its
    steps: `place`), or None: no catalog."""
    cat = project.output.catalog
    if cat is None or t.refused is not None or not t.upstreams:
        return None
    db, tbl = t.upstreams[0]
    schema, table = t.entry.catalog_names(db, tbl)
    ups = ", ".join(f"{d}.{u}" for d, u in t.upstreams)
    return CatalogEntry(
        catalog=cat.name,
        schema=schema,
        table=table,
        location=t.location,
        comment=f"ticdc-sync target {t.name}: source {t.source}, upstream {ups}",
        action=CATALOG_NONE,
        recorded=state.catalog,
        gone=state.exists and any(state.property(p) for p in GONE_PROPERTIES),
    )


def place(t: TargetPlan) -> TargetPlan:
    """`t` with its catalog entry's action decided from its steps, and its catalog step
    after the last step that commits (before a stop at a blocked DDL)."""
    entry = t.catalog
    if entry is None:
        return t
    live = _live_after(t, entry.gone)
    keep = t.entry.catalog_on_drop == "keep"
    if live is None:
        action = CATALOG_NONE
    else:
        action = CATALOG_REGISTER if live else (CATALOG_KEEP if keep else CATALOG_DROP)
    entry = replace(entry, action=action)
    steps = [s for s in t.steps if not isinstance(s, Catalog)]
    if action != CATALOG_NONE:
        at = len(steps)
        if steps and isinstance(steps[-1], Stop):
            at -= 1
        reach = max((end_ts(s) for s in steps[:at]), default=-1)
        steps.insert(at, Catalog(entry, reach))
    return replace(t, catalog=entry, steps=tuple(steps))


def _live_after(t: TargetPlan, gone: bool) -> bool | None:
    """Whether the target holds its upstream table's rows once its steps have run (False:
    dropped or renamed away; None: it does not exist then)."""
    live: bool | None = None
    if t.exists:
        live = not gone
    elif t.create is not None or t.load is not None:
        live = True
    for step in t.steps:
        if isinstance(step, Stop):
            break
        if isinstance(step, LoadRows):
            live = True
        if not isinstance(step, Ddl):
            continue
        d = step.ddl
        for s in d.steps:
            if s.decision.action not in (policy.APPLY, policy.REBUILD):
                continue
            if isinstance(s.change, ch.CreateTarget):
                live = True
            elif isinstance(s.change, (ch.DropTarget, ch.RenameTarget)) and live is not None:
                live = False
        if d.rename_from is not None:
            live = True
    return live


def ident(entry: CatalogEntry) -> str:
    """The entry's table as a quoted three-part name."""
    return ".".join(quote(x) for x in (entry.catalog, entry.schema, entry.table))


def statements(entry: CatalogEntry) -> tuple[str, ...]:
    """The catalog statements of the entry's action (each run only where the catalog
    differs: `spark.apply.catalog_sync`)."""
    if entry.action == CATALOG_REGISTER:
        return (
            f"CREATE SCHEMA IF NOT EXISTS {quote(entry.catalog)}.{quote(entry.schema)}",
            f"CREATE TABLE {ident(entry)} USING DELTA LOCATION {sql_string(entry.location)} "
            f"COMMENT {sql_string(entry.comment)}",
        )
    if entry.action == CATALOG_DROP:
        return (f"DROP TABLE {ident(entry)}",)
    return ()


def to_check(targets: Iterable[TargetPlan]) -> str | None:
    """The catalog a run checks once before any of `targets` is applied: the output's, when
    one of them has a catalog step (None: no catalog step, nothing to check)."""
    for t in targets:
        for step in t.steps:
            if isinstance(step, Catalog):
                return step.entry.catalog
    return None


def check_statement(catalog: str) -> str:
    """The cheap statement that loads `catalog` and reaches its store (its plugin class is
    instantiated, its metastore asked for its schemas), reading no table."""
    return f"SHOW NAMESPACES IN {quote(catalog)}"
