"""A source's upstream DDL replayed over its tables' schemas, in commit order, once for all targets.

The timeline is upstream truth: every version of every upstream table of one source, and for
each DDL commit_ts the tables it touched, their schemas before and after and the Delta changes
(`evolution`). It is computed from the seeds (`schema/*.sql`), schemas inferred from protocol
metadata, the versions already recorded in the schema history, and the staged DDL events, so
the order in which targets are applied can never change what a DDL means: a RENAME TABLE sees
the old table's schema whichever target handles it first. `ddl_overrides` are the user's
reading of one DDL and apply here. Policies are not: what a target does with a change is
`plan.policy`'s business. Pure Python; never imports pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ticdc_sync.core.errors import DdlError
from ticdc_sync.core.model import DdlOverride, OverrideAction, Project
from ticdc_sync.core.upstream import Key, TableSchema, Version, key
from ticdc_sync.core.window import DdlEvent, dedupe_ddl
from ticdc_sync.ddl.changes import (
    CreateTarget,
    DeltaChange,
    DropTarget,
    ExchangePartition,
    NoOp,
    RenameTarget,
    Unsupported,
)
from ticdc_sync.ddl.debezium import schema_from_debezium_table
from ticdc_sync.ddl.evolution import apply_statement, diff_schemas, statement_tables
from ticdc_sync.ddl.protocol import parse_ddl
from ticdc_sync.ddl.statements import (
    AlterTable,
    CreateTable,
    CreateTableLike,
    DdlStatement,
    DropDatabase,
    DropTable,
    PartitionClause,
    RenameTableClause,
    RenameTables,
    Unknown,
)


@dataclass(frozen=True, slots=True)
class TableEffect:
    """What one DDL did to one upstream table. `old`/`new`: its name before and after (None:
    it did not exist before / does not exist after)."""

    old: tuple[str, str] | None
    new: tuple[str, str] | None
    before: TableSchema | None
    after: TableSchema | None
    changes: tuple[DeltaChange, ...]
    sql: str  # the DDL text read (an override's SQL where one applies)
    # Made by a CREATE TABLE (upstream the table did not exist just before, even where a
    # seed or an unseen DROP gave it a schema here): its rows all come after this DDL.
    created: bool = False

    def touches(self, k: Key) -> bool:
        return (self.old is not None and key(*self.old) == k) or (
            self.new is not None and key(*self.new) == k
        )


@dataclass(frozen=True, slots=True)
class DdlGroup:
    """The DDL events of one commit_ts (a multi-table RENAME is split into several, codec
    facts 0.5) and their effect on every table they touch, in event order."""

    commit_ts: int
    events: tuple[DdlEvent, ...]
    effects: tuple[TableEffect, ...]
    overrides: tuple[DdlOverride, ...] = ()
    problem: str | None = None  # could not be replayed (the history is out of step)
    # Of a group that could not be replayed: the tables its statements drop, create or
    # rename, as their text names them ((old, new); None: none), in order. A DROP TABLE needs
    # no schema to say that the table is gone.
    moves: tuple[tuple[Key | None, Key | None], ...] = ()
    # Of a group that could not be replayed: the tables other than the events' own whose
    # rows it changes, as its text names them (the other table of an EXCHANGE PARTITION).
    named: tuple[Key, ...] = ()

    def renames(self) -> dict[Key, tuple[str, str] | None]:
        """Net renames of the group: each table that existed before, to where it ended up
        (None: gone), for the tables a rename moved. Chains and swaps compose (a -> tmp,
        b -> a, tmp -> b gives a -> b and b -> a)."""
        where: dict[Key, tuple[str, str] | None] = {}  # original -> current name
        for e in self.effects:
            if e.old is None or e.new is None or key(*e.old) == key(*e.new):
                continue
            moved = next((o for o, cur in where.items() if cur and key(*cur) == key(*e.old)), None)
            where[moved if moved is not None else key(*e.old)] = e.new
        return {o: n for o, n in where.items() if n is None or key(*n) != o}

    @property
    def sql(self) -> str:
        return "; ".join(dict.fromkeys(e.sql.strip() for e in self.events))


@dataclass(frozen=True, slots=True)
class Existence:
    """A DDL at which an upstream table began (`exists`) or ceased to exist under its name.
    `other`: the name it was renamed from (began) or to (ceased); None: created / dropped."""

    commit_ts: int
    exists: bool
    other: tuple[str, str] | None = None


@dataclass
class Timeline:
    """Every version of a source's upstream tables, and the DDL groups in commit order."""

    versions: dict[Key, list[Version]] = field(default_factory=dict)
    fallback: dict[Key, TableSchema] = field(default_factory=dict)  # seeds, then inferred
    groups: list[DdlGroup] = field(default_factory=list)

    def at(self, db: str, table: str, ts: int) -> TableSchema | None:
        """The schema of `db.table` in force at commit_ts `ts` (None: unknown or gone)."""
        best: Version | None = None
        for v in self.versions.get(key(db, table), []):
            if v.commit_ts <= ts:
                best = v
        if best is not None:
            return best.schema
        return self.fallback.get(key(db, table))

    def known(self, db: str, table: str) -> bool:
        k = key(db, table)
        return k in self.versions or k in self.fallback

    def exists_at(self, db: str, table: str, ts: int) -> bool | None:
        """Whether `db.table` exists at commit_ts `ts` as far as this timeline tells: True
        (created, renamed in, or a version with a schema), False (dropped or renamed away),
        None (nothing names it, or only a seed or metadata describes it). A DDL that could
        not be replayed still counts by what its text drops, creates or renames (`moves`)."""
        k = key(db, table)
        state: bool | None = None
        at = -1
        for v in self.versions.get(k, []):
            if v.commit_ts <= ts:
                state, at = v.schema is not None, v.commit_ts
        for g in self.groups:
            if g.commit_ts > ts:
                break
            if g.problem is None or g.commit_ts < at:
                continue
            for old, new in g.moves:
                if old == k:
                    state = False
                if new == k:
                    state = True
        return state

    def absent_at(self, db: str, table: str, ts: int) -> bool:
        """Whether `db.table` did not exist at commit_ts `ts` as far as this timeline tells:
        dropped or renamed away at or before it (`exists_at` False), or nothing names it at
        or before it and the next DDL that names it creates it or renames it in. A table
        nothing says was gone (known from a seed, an export or metadata only) existed."""
        exists = self.exists_at(db, table, ts)
        if exists is not None:
            return not exists
        ahead = next((x for x in self.existence(db, table) if x.commit_ts > ts), None)
        return ahead is not None and ahead.exists

    def existence(self, db: str, table: str) -> list[Existence]:
        """The DDL at which `db.table` began or ceased to exist, in commit order: a CREATE
        TABLE (one over a seeded schema too: upstream the table did not exist just before
        it), a rename to or from it, a DROP TABLE or DATABASE; a DDL that could not be
        replayed counts by what its text creates, drops or renames (`moves`). Renames at one
        commit_ts count by their net effect: a swap leaves both tables existing."""
        k = key(db, table)
        out: list[Existence] = []
        for g in self.groups:
            # (name before, name after, made by a CREATE) per table the group touched.
            touched: list[tuple[tuple[str, str] | None, tuple[str, str] | None, bool]]
            if g.problem is None:
                touched = [(e.old, e.new, e.created) for e in g.effects]
            else:
                touched = [(old, new, old is None) for old, new in g.moves]
            turns: list[Existence] = []
            for old, new, created in touched:
                was = old is not None and key(*old) == k
                now = new is not None and key(*new) == k
                if now and (not was or created):
                    turns.append(Existence(g.commit_ts, True, None if was else old))
                elif was and not now:
                    turns.append(Existence(g.commit_ts, False, new))
            # Only a net change counts: away and back (a swap), or in and away again (the
            # middle of a chain), leaves the table as it was before the group.
            if not turns or turns[0].exists != turns[-1].exists:
                continue
            turn = turns[-1]
            if g.problem is None and turn.other is not None:
                # A chain names its ends: a -> x, x -> c moves a to c.
                net = g.renames()
                if turn.exists:
                    ends = [o for o, n in net.items() if n is not None and key(*n) == k]
                    turn = Existence(turn.commit_ts, True, ends[0] if ends else turn.other)
                else:
                    turn = Existence(turn.commit_ts, False, net.get(k, turn.other))
            out.append(turn)
        return out

    def created_here(self, db: str, table: str, before: int) -> bool:
        """Whether `db.table`, as it exists just before commit_ts `before`, was made by a
        CREATE TABLE in this timeline's DDL (so every row it ever held came after it, in
        the captured history). False for a table known only from seeds, metadata or a
        recorded history, and for one that got its name by a rename (whose rows began
        elsewhere)."""
        k = key(db, table)
        born = False
        for g in self.groups:
            if g.commit_ts >= before:
                break
            for e in g.effects:
                if e.new is not None and key(*e.new) == k:
                    # An ALTER keeps what the table was; a CREATE makes it new; a rename
                    # brings a table whose rows began under another name.
                    if e.created:
                        born = True
                    elif e.old is not None and key(*e.old) != k:
                        born = False
                elif e.old is not None and key(*e.old) == k:
                    born = False  # dropped or renamed away
        return born

    def spans(
        self, db: str, table: str, lo: int, hi: int
    ) -> list[tuple[int, int, TableSchema | None]]:
        """(lo, hi] cut where a version takes effect: (lo_i, hi_i, schema) for the rows with
        lo_i < commit_ts <= hi_i. A DDL at `ts` governs rows from `ts` on; no row shares a
        DDL's commit_ts (codec facts 0.5)."""
        cuts = sorted(
            {v.commit_ts for v in self.versions.get(key(db, table), []) if lo < v.commit_ts <= hi}
        )
        out: list[tuple[int, int, TableSchema | None]] = []
        for cut in cuts:
            if cut - 1 > lo:
                out.append((lo, cut - 1, self.at(db, table, cut - 1)))
            lo = max(lo, cut - 1)
        out.append((lo, hi, self.at(db, table, hi)))
        return out

    def _add(self, k: Key, v: Version) -> None:
        versions = [x for x in self.versions.get(k, []) if x.commit_ts != v.commit_ts]
        versions.append(v)
        self.versions[k] = sorted(versions, key=lambda x: x.commit_ts)


def build(
    project: Project,
    source: str,
    events: Iterable[DdlEvent],
    recorded: Mapping[Key, list[Version]] | None = None,
    inferred: Mapping[Key, TableSchema] | None = None,
) -> Timeline:
    """Replay `events` (a source's staged DDL, any order, broadcast copies included) over
    the seeds, `inferred` schemas and the `recorded` history (recorded versions win over a
    replay: they are what was applied)."""
    t = Timeline()
    for (db, tbl), schema in sorted(project.seed_schemas.items()):
        t.fallback[key(db, tbl)] = schema
    for k, schema in sorted((inferred or {}).items()):
        t.fallback.setdefault(k, schema)
    for k, versions in sorted((recorded or {}).items()):
        for v in versions:
            t._add(k, v)
    by_ts: dict[int, list[DdlEvent]] = {}
    for e in dedupe_ddl(list(events)):
        by_ts.setdefault(e.commit_ts, []).append(e)
    for ts in sorted(by_ts):
        group = _replay(project, source, t, ts, by_ts[ts])
        t.groups.append(group)
        # A recorded version is what was applied: it wins over the replay.
        recorded_here = {
            k for k, vs in (recorded or {}).items() if any(v.commit_ts == ts for v in vs)
        }
        for e in group.effects:
            gone = e.old is not None and (e.new is None or key(*e.new) != key(*e.old))
            if gone and key(*e.old) not in recorded_here:  # type: ignore[misc]
                t._add(key(*e.old), Version(ts, None, e.sql))  # type: ignore[misc]
            if e.new is not None and key(*e.new) not in recorded_here:
                t._add(key(*e.new), Version(ts, e.after, e.sql))
    return t


def _replay(
    project: Project, source: str, t: Timeline, ts: int, events: list[DdlEvent]
) -> DdlGroup:
    # Schemas changed earlier in this group: DDLs sharing a commit_ts (a split RENAME, or an
    # `es`-ordered source's CREATE and ALTER in the same second) see each other in order.
    current: dict[Key, TableSchema | None] = {}

    def lookup(db: str, table: str) -> TableSchema | None:
        k = key(db, table)
        return current[k] if k in current else t.at(db, table, ts - 1)

    effects: list[TableEffect] = []
    overrides: list[DdlOverride] = []
    ordered = sorted(events, key=lambda e: (e.partition, e.offset, e.db, e.tbl))
    try:
        for ev in ordered:
            ov = project.ddl_override(source, ev.db, ev.tbl, ts)
            if ov is not None:
                overrides.append(ov)
                if ov.action is OverrideAction.SKIP:
                    continue
            sql = ov.sql if ov is not None and ov.sql else ev.sql
            hint = None if ov is not None else ev.hint
            for stmt in parse_ddl(sql, ev.db or None, hint):
                if isinstance(stmt, DropDatabase):
                    names = {*t.versions, *t.fallback, *current}
                    found = _drop_database(stmt.db, names, lookup, sql)
                else:
                    found = _apply(stmt, ev, sql, lookup)
                for e in found:
                    effects.append(e)
                    if e.old is not None:
                        current[key(*e.old)] = None
                    if e.new is not None:
                        current[key(*e.new)] = e.after
    except DdlError as err:
        moves, named = _moves(project, source, ts, ordered)
        return DdlGroup(
            ts, tuple(ordered), tuple(effects), tuple(overrides), str(err), moves, named
        )
    return DdlGroup(ts, tuple(ordered), tuple(effects), tuple(overrides))


def _moves(
    project: Project, source: str, ts: int, events: list[DdlEvent]
) -> tuple[tuple[tuple[Key | None, Key | None], ...], tuple[Key, ...]]:
    """The tables `events` drop, create or rename, read from their text alone (`DdlGroup.moves`;
    a text that does not parse names none), and the other tables whose rows they change
    (`DdlGroup.named`)."""
    out: list[tuple[Key | None, Key | None]] = []
    named: list[Key] = []
    for ev in events:
        ov = project.ddl_override(source, ev.db, ev.tbl, ts)
        if ov is not None and ov.action is OverrideAction.SKIP:
            continue
        sql = ov.sql if ov is not None and ov.sql else ev.sql
        try:
            stmts = parse_ddl(sql, ev.db or None, None if ov is not None else ev.hint)
        except DdlError:
            continue
        for stmt in stmts:
            if isinstance(stmt, DropTable):
                out.append((key(stmt.db, stmt.table), None))
            elif isinstance(stmt, RenameTables):
                out += [(key(*old), key(*new)) for old, new in stmt.pairs]
            elif isinstance(stmt, CreateTable):
                out.append((None, key(stmt.schema.db, stmt.schema.table)))
            elif isinstance(stmt, CreateTableLike):
                out.append((None, key(stmt.db, stmt.table)))
            elif isinstance(stmt, AlterTable):
                for c in stmt.clauses:
                    if isinstance(c, RenameTableClause):
                        out.append((key(stmt.db, stmt.table), key(c.new_db, c.new_table)))
                other = _exchanged(stmt)
                if other is not None:
                    named += [key(stmt.db, stmt.table), key(*other)]
    return tuple(out), tuple(named)


def _apply(stmt: DdlStatement, ev: DdlEvent, sql: str, lookup) -> list[TableEffect]:
    """The effects of one statement, reading schemas through `lookup(db, table)`."""
    if isinstance(stmt, RenameTables):
        out = []
        # MySQL renames pairs left to right (a TO tmp, b TO a, tmp TO b works).
        seen: dict[Key, TableSchema | None] = {}

        def get(db: str, table: str) -> TableSchema | None:
            k = key(db, table)
            return seen[k] if k in seen else lookup(db, table)

        for (od, ot), (nd, nt) in stmt.pairs:
            before = get(od, ot)
            if before is None:
                raise DdlError(
                    f"RENAME TABLE {od}.{ot}: the table's schema is unknown (hint: seed it "
                    "from schema/*.sql)"
                )
            after = before.with_(db=nd, table=nt)
            seen[key(od, ot)] = None
            seen[key(nd, nt)] = after
            out.append(TableEffect((od, ot), (nd, nt), before, after, (RenameTarget(nd, nt),), sql))
        return out
    if isinstance(stmt, CreateTableLike):
        src = lookup(stmt.like_db, stmt.like_table)
        if src is None:
            raise DdlError(
                f"CREATE TABLE {stmt.db}.{stmt.table} LIKE {stmt.like_db}.{stmt.like_table}: "
                "the source table is unknown (hint: seed it from schema/*.sql)"
            )
        base = lookup(stmt.db, stmt.table)
        new = src.with_(db=stmt.db, table=stmt.table)
        if base is not None:
            if stmt.if_not_exists:
                return [_same(stmt.db, stmt.table, base, "CREATE TABLE IF NOT EXISTS", sql)]
            return [
                TableEffect(
                    (stmt.db, stmt.table),
                    (stmt.db, stmt.table),
                    base,
                    new,
                    tuple(diff_schemas(base, new)),
                    sql,
                    created=True,
                )
            ]
        return [
            TableEffect(
                None, (stmt.db, stmt.table), None, new, (CreateTarget(new),), sql, created=True
            )
        ]
    if isinstance(stmt, CreateTable):
        s = stmt.schema
        base = lookup(s.db, s.table)
        if base is None:
            return [
                TableEffect(None, (s.db, s.table), None, s, (CreateTarget(s),), sql, created=True)
            ]
        if stmt.if_not_exists:
            return [
                _same(s.db, s.table, base, "CREATE TABLE IF NOT EXISTS on an existing table", sql)
            ]
        # A seed (schema/*.sql) or a table whose DROP was not seen: follow the CREATE.
        return [
            TableEffect(
                (s.db, s.table),
                (s.db, s.table),
                base,
                s,
                tuple(diff_schemas(base, s)),
                sql,
                created=True,
            )
        ]
    if isinstance(stmt, DropTable) and lookup(stmt.db, stmt.table) is None and stmt.if_exists:
        return []
    if isinstance(stmt, Unknown) and ev.table_changes:
        return [_from_debezium(ev, lookup(ev.db, ev.tbl), sql)]
    tables = statement_tables(stmt)
    if tables:
        db, table = _named(stmt, ev)
    elif ev.tbl:
        db, table = ev.db, ev.tbl
    else:
        return []  # schema-level DDL (CREATE DATABASE ...): no table changes
    base = lookup(db, table)
    new, changes = apply_statement(base, stmt)
    old_name = (db, table) if base is not None else None
    if isinstance(stmt, AlterTable) and any(isinstance(c, RenameTableClause) for c in stmt.clauses):
        new_name = (new.db, new.table) if new is not None else None
    else:
        new_name = (db, table) if new is not None else None
    out = [TableEffect(old_name, new_name, base, new, tuple(changes), sql)]
    other = _exchanged(stmt)
    if other is not None:
        out.append(_exchange_other(other, (db, table), changes, lookup, sql))
    return out


def _exchanged(stmt: DdlStatement) -> tuple[str, str] | None:
    """The non-partitioned table of an EXCHANGE PARTITION (None: not one)."""
    if not isinstance(stmt, AlterTable):
        return None
    for c in stmt.clauses:
        if isinstance(c, PartitionClause) and c.action == "EXCHANGE" and c.table is not None:
            return c.table
    return None


def _exchange_other(
    other: tuple[str, str], pt: tuple[str, str], changes: list[DeltaChange], lookup, sql: str
) -> TableEffect:
    """The other side of an EXCHANGE PARTITION: its rows swap with the partition's, so it
    changes (or blocks) exactly as the partitioned table does."""
    schema = lookup(*other)
    if schema is None:
        raise DdlError(
            f"EXCHANGE PARTITION with {other[0]}.{other[1]}: that table's schema is unknown "
            "(hint: seed it from schema/*.sql)"
        )
    mirrored: list[DeltaChange] = []
    for c in changes:
        if isinstance(c, ExchangePartition):
            mirrored.append(ExchangePartition(c.partition, pt, False, c.predicate))
        elif isinstance(c, Unsupported):
            mirrored.append(c)
    return TableEffect(other, other, schema, schema, tuple(mirrored), sql)


def _drop_database(db: str, names: Iterable[Key], lookup, sql: str) -> list[TableEffect]:
    """DROP DATABASE drops every table in it. TiCDC sends it as one schema-level DDL event
    (TiDB's DropSchema job; no table name, codec facts 1.4), not as a DROP TABLE per
    table, so each table of the database known here just before it gets its drop."""
    out = []
    for k in sorted(set(names)):
        base = lookup(*k) if k[0] == db.lower() else None
        if base is not None:
            out.append(TableEffect((base.db, base.table), None, base, None, (DropTarget(),), sql))
    return out


def _named(stmt: DdlStatement, ev: DdlEvent) -> tuple[str, str]:
    """The table a single-table statement names, with its original spelling."""
    db, table = getattr(stmt, "db", None), getattr(stmt, "table", None)
    if isinstance(db, str) and isinstance(table, str) and table:
        return db, table
    return ev.db, ev.tbl


def _same(db: str, table: str, schema: TableSchema, reason: str, sql: str) -> TableEffect:
    return TableEffect((db, table), (db, table), schema, schema, (NoOp(reason),), sql)


def _from_debezium(ev: DdlEvent, base: TableSchema | None, sql: str) -> TableEffect:
    """Debezium DDL text the grammar cannot read: its post-DDL `tableChanges` schema instead
    (codec facts 3.3)."""
    for tc in json.loads(ev.table_changes or "[]"):
        table = tc.get("table")
        if table is None:
            if str(tc.get("type", "")).upper() == "DROP" and base is not None:
                return TableEffect((ev.db, ev.tbl), None, base, None, (DropTarget(),), sql)
            continue
        new = schema_from_debezium_table(ev.db, ev.tbl, table)
        created = str(tc.get("type", "")).upper() == "CREATE"
        if base is None:
            return TableEffect(
                None, (ev.db, ev.tbl), None, new, (CreateTarget(new),), sql, created=created
            )
        return TableEffect(
            (ev.db, ev.tbl),
            (ev.db, ev.tbl),
            base,
            new,
            tuple(diff_schemas(base, new)),
            sql,
            created=created,
        )
    old = (ev.db, ev.tbl) if base is not None else None
    return TableEffect(old, old, base, base, (NoOp("no table in tableChanges"),), sql)


def replay_script(project: Project, sql: str, db: str) -> dict[Key, TableSchema]:
    """The tables a DDL script leaves, replayed as one DDL event over `project`'s seeds (for
    checking the grammar and evolution against recorded DDL scripts)."""
    t = build(project, "", [DdlEvent(db, "", 1, sql)])
    if t.groups and t.groups[0].problem:
        raise DdlError(t.groups[0].problem)
    out = {k: t.at(*k, 1) for k in t.versions}
    return {k: s for k, s in out.items() if s is not None}
