"""A target's DDL: the upstream DDL groups that concern one target, oldest first, each with
a decision per change (`plan.policy`) and a status (ready, blocked, held, waiting).

Renames that move a table between targets are taken net over their group. The Delta
commits of each decided change come from `ddl_parts` (an EXCHANGE PARTITION's from
`exchange`). Pure: never reads or writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ticdc_sync.core.model import Mode, Project, Source
from ticdc_sync.core.upstream import Key, key
from ticdc_sync.ddl import changes as ch
from ticdc_sync.ddl.timeline import DdlGroup, TableEffect, Timeline
from ticdc_sync.plan import exchange, policy
from ticdc_sync.plan import table_features as tf
from ticdc_sync.plan.ddl_parts import record_part, rename_in, rename_out
from ticdc_sync.plan.layout import where
from ticdc_sync.plan.model import (
    BLOCKED,
    HELD,
    OP_CREATE,
    READY,
    WAITING,
    ChangeStep,
    DeltaPart,
    TargetDdl,
)
from ticdc_sync.plan.modes import keeps_fused_rows, mode_change
from ticdc_sync.project import routing


def target_ddl(
    project: Project,
    source: Source,
    tr: routing.TargetRoute,
    timeline: Timeline,
    exists: bool,
    marker,
    resolved: int | None,
    ref: str,
    notes: list[str],
    staged_rows: Mapping[Key, int],
    data_bytes: int = 0,
    features: tuple[str, ...] = (),
    groups: Sequence[DdlGroup] | None = None,
    layout: tuple[str, tuple[str, ...]] = ("", ()),
) -> list[TargetDdl]:
    """The DDL groups that concern target `tr`, oldest first, each with its decisions.
    `staged_rows`: row changes staged per upstream table (of all time), which tell whether
    a table no entry routes had rows a rename would bring in. `data_bytes` and `features`:
    the target's size and table features now, for `table_features: auto`. `groups`: the
    timeline's groups that may concern it (`GroupIndex`; None: all of them). `layout`: its
    key (`partition_by` / `cluster_by`) and the columns it is partitioned or clustered by
    (`plan.layout`), which no DDL may take away."""
    out: list[TargetDdl] = []
    held_by: TargetDdl | None = None
    touched = {key(db, t) for db, t in tr.upstreams}
    for g in timeline.groups if groups is None else groups:
        part = _Part.of(project, source.name, tr.target, g)
        keyed_here = any(key(e.db, e.tbl) in touched for e in g.events) or any(
            k in touched for k in g.named
        )
        if part.empty and not (g.problem and keyed_here) and not _skipped_here(g, touched):
            continue
        if marker.ddl_done(g.commit_ts):
            continue
        done = marker.parts_done(g.commit_ts)
        # A half-applied DDL goes on the way it began (`policy._auto`).
        resumed = bool(set(features) & set(tf.SETTING)) if done else None
        d = _decide_group(
            project, tr, g, part, ref, exists, timeline, staged_rows, data_bytes, resumed, layout
        )
        if done and d.status != BLOCKED and len(d.parts) != marker.ddl_parts:
            # Half applied under other settings (a policy or `table_features` changed in
            # between): resuming at part `done` of a different list of commits would skip
            # or repeat a change.
            d = replace(
                d,
                status=BLOCKED,
                reason=f"half applied ({done} of its {marker.ddl_parts} Delta commits) under "
                f"other settings, which now give it {len(d.parts)} commits",
                setting="the `ddl` and `table_features` settings this DDL started with (as "
                "they were at that run), until it is applied",
            )
        if held_by is not None:
            d = replace(
                d, status=HELD, reason=f"after the blocked DDL at commit_ts {held_by.commit_ts}"
            )
        elif d.status == BLOCKED:
            held_by = d
        elif resolved is None or g.commit_ts > resolved:
            d = replace(
                d, status=WAITING, reason="beyond the resolved TSO (no watermark past it yet)"
            )
        out.append(replace(d, parts_done=done) if done else d)
        # A target a DDL creates exists for the DDL after it: an ADD COLUMN that follows
        # its CREATE TABLE in the stream is additive (`fuse_additive`).
        exists = exists or (d.status == READY and any(p.op == OP_CREATE for p in d.parts))
    return out


class GroupIndex:
    """Which of a timeline's DDL groups may concern each target, found once for all of a
    source's targets: a group whose effects route no table to a target, that names none of
    its tables (in its events, the tables an unreplayable group names, its overrides) is
    one `target_ddl` passes over. So each target looks at its own groups, not at every
    group of the source (tables created by the stream one after the other: one group each).
    """

    def __init__(self, project: Project, source: str, timeline: Timeline) -> None:
        self.groups = timeline.groups
        self.by_target: dict[str, list[int]] = {}
        self.by_table: dict[Key, list[int]] = {}
        routed: dict[tuple[str, str], str | None] = {}
        for i, g in enumerate(self.groups):
            names = {n for e in g.effects for n in (e.old, e.new) if n is not None}
            targets = set()
            for n in names:
                if n not in routed:
                    routed[n] = routing.target_of(project, source, *n)
                targets.add(routed[n])
            tables = {key(e.db, e.tbl) for e in g.events} | set(g.named)
            tables |= {key(*o.upstream.split(".", 1)) for o in g.overrides}
            for t in targets - {None}:
                self.by_target.setdefault(t, []).append(i)  # type: ignore[arg-type]
            for k in tables:
                self.by_table.setdefault(k, []).append(i)

    def of(self, tr: routing.TargetRoute) -> list[DdlGroup]:
        """The groups that may concern `tr`, oldest first."""
        found = set(self.by_target.get(tr.target, ()))
        for db, t in tr.upstreams:
            found.update(self.by_table.get(key(db, t), ()))
        return [self.groups[i] for i in sorted(found)]


def _skipped_here(g: DdlGroup, touched: set[Key]) -> bool:
    """A group whose only event for this target was skipped by an override (no effects)."""
    return any(key(*o.upstream.split(".", 1)) in touched for o in g.overrides)


@dataclass(frozen=True)
class _Part:
    """How one DDL group concerns one target. Renames that move a table from one target to
    another are taken net over the group (a -> tmp, b -> a, tmp -> b is a swap of a and b;
    tmp is never involved), so the order of the renames inside it cannot matter."""

    own: tuple[TableEffect, ...]  # effects on this target's tables that stay in it
    # (from target or None: not routed, the table's name before the group, its last effect)
    incoming: tuple[tuple[str | None, tuple[str, str], TableEffect], ...]
    outgoing: tuple[str, ...]  # where this target's table went (a target, or not routed)

    @property
    def empty(self) -> bool:
        return not (self.own or self.incoming or self.outgoing)

    @staticmethod
    def of(project: Project, source: str, target: str, g: DdlGroup) -> _Part:
        def tgt(name: tuple[str, str] | None) -> str | None:
            return routing.target_of(project, source, *name) if name else None

        def moves(e: TableEffect) -> bool:
            return (
                e.old is not None
                and e.new is not None
                and key(*e.old) != key(*e.new)
                and tgt(e.old) != tgt(e.new)
            )

        own = tuple(e for e in g.effects if not moves(e) and target in (tgt(e.old), tgt(e.new)))
        incoming: list[tuple[str | None, tuple[str, str], TableEffect]] = []
        outgoing: list[str] = []
        for old_key, new_name in sorted(g.renames().items()):
            old_name = next(e.old for e in g.effects if e.old and key(*e.old) == old_key)
            src, dst = tgt(old_name), tgt(new_name)
            if src == dst:
                continue
            if dst == target and new_name is not None:
                last = [e for e in g.effects if e.new and key(*e.new) == key(*new_name)][-1]
                incoming.append((src, old_name, last))
            if src == target:
                where = f"{new_name[0]}.{new_name[1]} (not routed)" if new_name else "gone"
                outgoing.append(dst or where)
        return _Part(own, tuple(incoming), tuple(outgoing))


def _decide_group(
    project: Project,
    tr: routing.TargetRoute,
    g: DdlGroup,
    part: _Part,
    ref: str,
    exists: bool,
    timeline: Timeline,
    staged_rows: Mapping[Key, int],
    data_bytes: int,
    resumed: bool | None,
    layout: tuple[str, tuple[str, ...]] = ("", ()),
) -> TargetDdl:
    entry = tr.entry
    effects = [*part.own, *(e for _, _, e in part.incoming)]
    mine = {key(*u) for u in tr.upstreams}
    names = {f"{n[0]}.{n[1]}" for e in effects for n in (e.old, e.new) if n is not None}
    names |= {f"{e.db}.{e.tbl}" for e in g.events if key(e.db, e.tbl) in mine}
    upstreams = tuple(sorted(names))
    if g.problem:
        problem = g.problem.split(" (hint: ")[0]
        return TargetDdl(
            g.commit_ts,
            g,
            upstreams,
            (),
            (record_part(ref, g.commit_ts),),
            BLOCKED,
            reason=f"cannot replay the DDL: {problem}",
            setting="a schema/*.sql seed for the table, or a `ddl_overrides` entry for this DDL",
        )
    steps: list[ChangeStep] = []
    mode, _ = project.mode(entry)
    rename_from: str | None = None
    for e in part.own:
        for c in e.changes:
            d = policy.decide(project, entry, c, data_bytes, resumed)
            if isinstance(c, ch.ExchangePartition):
                d, src, src_mode = exchange.other_target(project, tr.source, tr.target, c, d)
                d = policy.partition_in_merge(d, tr.upstreams)
                swap: tuple[DeltaPart, ...] = ()
                if d.action == policy.APPLY and src and src_mode and e.after is not None:
                    keys, _ = routing.merge_keys(entry, e.after)
                    cols = e.after.column_names()
                    swap = tuple(
                        exchange.exchange_parts(
                            mode, ref, g.commit_ts, c, cols, keys, src, src_mode
                        )
                    )
                    rename_from = src  # its rows come in, as of just before the DDL
                steps.append(ChangeStep(c, d, swap))
                continue
            if isinstance(c, ch.DeletePartitionRows):
                d = policy.partition_in_merge(d, tr.upstreams)
            if not (mode is Mode.HISTORY and isinstance(c, ch.DropColumn)):
                # (A history target keeps a dropped column: `modes.mode_change`.)
                d = policy.layout_column(d, c, layout[1], layout[0], where(entry))
            # The mode's own decisions (a history target keeps a dropped column, ...).
            decision, mode_parts = mode_change(mode, c, d, ref, g.commit_ts)
            steps.append(ChangeStep(c, decision, tuple(mode_parts)))
    for src, (odb, otbl), e in part.incoming:
        assert e.new is not None
        c = ch.RenameTarget(*e.new)
        decision = policy.decide(project, entry, c)
        if src is None:
            decision = policy.rename_from_unrouted(
                decision,
                f"{odb}.{otbl}",
                staged_rows.get(key(odb, otbl), 0),
                timeline.created_here(odb, otbl, g.commit_ts),
            )
        rename_from = src or ""
        steps.append(ChangeStep(c, decision, rename_in(decision, e, src, ref, g)))
    renamed_to = part.outgoing[0] if part.outgoing else None
    if renamed_to is not None:
        c = ch.RenameTarget("", renamed_to)
        decision = policy.decide(project, entry, c)
        # With rows moving in as well (a swap), the replace that brings them clears these.
        moved = () if part.incoming else rename_out(decision, renamed_to, ref)
        steps.append(ChangeStep(c, decision, moved))
    blocked = next((s.decision for s in steps if s.decision.blocks), None)
    parts = tuple(p for s in steps for p in s.parts) or (record_part(ref, g.commit_ts),)
    additive = (
        exists
        and blocked is None
        and not part.incoming
        and not part.outgoing
        and bool(steps)
        and all(_is_additive(s) and keeps_fused_rows(mode, s.change) for s in steps)
        and all(_same_key(e) for e in part.own)
    )
    return TargetDdl(
        commit_ts=g.commit_ts,
        group=g,
        upstreams=upstreams,
        steps=tuple(steps),
        parts=parts,
        status=BLOCKED if blocked else READY,
        reason=blocked.reason if blocked else None,
        setting=blocked.setting if blocked else None,
        rename_from=rename_from or None,
        renamed_to=renamed_to,
        additive=additive,
    )


# Changes that leave every existing column as it is: rows on both sides of such a DDL can
# share one MERGE (window.fuse_additive). SetDefault affects future upstream inserts only.
def _is_additive(s: ChangeStep) -> bool:
    c, d = s.change, s.decision
    if d.action == policy.NONE:
        return True
    if d.action != policy.APPLY:
        return False
    return isinstance(c, (ch.AddColumn, ch.NoOp, ch.SetDefault))


def _same_key(e: TableEffect) -> bool:
    if e.before is None or e.after is None:
        return False
    return e.before.handle_key() == e.after.handle_key()
