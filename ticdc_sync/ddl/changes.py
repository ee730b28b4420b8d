"""The Delta changes a DDL causes on a target (`DeltaChange`): what `evolution` computes,
`plan.policy` decides on and `delta_sql` renders. Data only. Pure Python; no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.core.datatypes import type_change
from ticdc_sync.core.model import DdlKind
from ticdc_sync.core.upstream import TableSchema
from ticdc_sync.ddl.statements import Position

# -- Delta changes ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTarget:
    schema: TableSchema
    kind: DdlKind = DdlKind.CREATE_TABLE
    effect: str = "additive"

    def describe(self) -> str:
        return f"create target from {self.schema.qualified} ({len(self.schema.columns)} columns)"


@dataclass(frozen=True, slots=True)
class AddColumn:
    """Add a column. `backfill_sql` is the Spark literal every existing row gets (MySQL fills
    existing rows with the DEFAULT, or the implicit default for NOT NULL without DEFAULT)."""

    name: str
    delta_type: str
    position: Position | None = None
    default_sql: str | None = None
    backfill_sql: str | None = None
    comment: str | None = None
    note: str | None = None  # why existing rows are not backfilled exactly, when so
    kind: DdlKind = DdlKind.ADD_COLUMN
    effect: str = "additive"

    def describe(self) -> str:
        s = f"add column {self.name} {self.delta_type}"
        if self.position is not None:
            s += " " + self.position.sql().replace("`", "")
        if self.backfill_sql is not None:
            s += f"; existing rows = {self.backfill_sql}"
        if self.note:
            s += f" ({self.note})"
        return s


@dataclass(frozen=True, slots=True)
class DropColumn:
    name: str
    kind: DdlKind = DdlKind.DROP_COLUMN
    effect: str = "destructive"

    def describe(self) -> str:
        return f"drop column {self.name}"


@dataclass(frozen=True, slots=True)
class RenameColumn:
    old: str
    new: str
    kind: DdlKind = DdlKind.RENAME_COLUMN
    effect: str = "destructive"  # readers of the old name break

    def describe(self) -> str:
        return f"rename column {self.old} to {self.new}"


@dataclass(frozen=True, slots=True)
class ChangeColumnType:
    name: str
    old_type: str
    new_type: str
    change: str  # "widen" | "same" | "narrow" (datatypes.type_change)
    kind: DdlKind = DdlKind.WIDEN_COLUMN
    effect: str = "additive"

    def describe(self) -> str:
        return f"{self.change} column {self.name}: {self.old_type} -> {self.new_type}"


def change_column_type(name: str, old: str, new: str) -> ChangeColumnType:
    c = type_change(old, new)
    if c == "narrow":
        return ChangeColumnType(name, old, new, c, DdlKind.NARROW_COLUMN, "destructive")
    if c == "same":
        return ChangeColumnType(name, old, new, c, DdlKind.WIDEN_COLUMN, "none")
    return ChangeColumnType(name, old, new, c)


@dataclass(frozen=True, slots=True)
class MoveColumn:
    """MODIFY/CHANGE ... FIRST|AFTER: the upstream column order changed."""

    name: str
    position: Position
    kind: DdlKind = DdlKind.OTHER
    effect: str = "none"

    def describe(self) -> str:
        return f"move column {self.name} {self.position.sql().replace('`', '')}"


@dataclass(frozen=True, slots=True)
class SetDefault:
    name: str
    default: str | None  # MySQL default text; None: no default / DEFAULT NULL
    kind: DdlKind = DdlKind.SET_DEFAULT
    effect: str = "none"

    def describe(self) -> str:
        d = "none" if self.default is None else self.default
        return f"set default of {self.name} to {d} (affects future upstream inserts only)"


@dataclass(frozen=True, slots=True)
class TruncateTarget:
    kind: DdlKind = DdlKind.TRUNCATE_TABLE
    effect: str = "destructive"

    def describe(self) -> str:
        return "truncate target (delete all rows; history stays in Delta)"


@dataclass(frozen=True, slots=True)
class DeletePartitionRows:
    """TRUNCATE / DROP PARTITION: the rows the partitions held at the DDL go, with no row
    events (`predicate`: Spark SQL over the target's columns, `ddl.partitioning`)."""

    action: str  # TRUNCATE | DROP
    partitions: tuple[str, ...]
    predicate: str
    kind: DdlKind = DdlKind.PARTITION
    effect: str = "destructive"

    def describe(self) -> str:
        return (
            f"{self.action.lower()} partition {', '.join(self.partitions)}: delete the rows "
            f"where {self.predicate}"
        )


@dataclass(frozen=True, slots=True)
class ExchangePartition:
    """EXCHANGE PARTITION: the rows of partition `partition` of the partitioned table and
    those of the other table swap, with no row events. One change per side: `partitioned`
    says whether this side is the partitioned table; `other` is the other side's upstream
    name; `predicate` holds for the partition's rows (Spark SQL over either's columns)."""

    partition: str
    other: tuple[str, str]
    partitioned: bool
    predicate: str
    kind: DdlKind = DdlKind.PARTITION
    effect: str = "destructive"

    def describe(self) -> str:
        other = f"{self.other[0]}.{self.other[1]}"
        if self.partitioned:
            return (
                f"exchange partition {self.partition} with {other}: the rows where "
                f"{self.predicate} leave, the rows of {other} come in"
            )
        return (
            f"exchange with partition {self.partition} of {other}: every row leaves, the rows "
            f"of {other} where {self.predicate} come in"
        )


@dataclass(frozen=True, slots=True)
class DropTarget:
    kind: DdlKind = DdlKind.DROP_TABLE
    effect: str = "destructive"

    def describe(self) -> str:
        return "drop target"


@dataclass(frozen=True, slots=True)
class RenameTarget:
    new_db: str
    new_table: str
    kind: DdlKind = DdlKind.RENAME_TABLE
    effect: str = "destructive"

    def describe(self) -> str:
        if not self.new_db:  # leaving the target: `new_table` says where to (plan.target_ddl)
            return f"upstream table renamed away, to {self.new_table}"
        return f"upstream table renamed to {self.new_db}.{self.new_table}"


@dataclass(frozen=True, slots=True)
class ChangeKey:
    new_keys: tuple[str, ...]  # the new handle key (PK, else first NOT NULL unique key)
    kind: DdlKind = DdlKind.PRIMARY_KEY
    effect: str = "none"

    def describe(self) -> str:
        return (
            f"merge key becomes ({', '.join(self.new_keys)})"
            if self.new_keys
            else ("merge key dropped (no primary or NOT NULL unique key left)")
        )


@dataclass(frozen=True, slots=True)
class NoOp:
    reason: str
    kind: DdlKind = DdlKind.OTHER
    effect: str = "none"

    def describe(self) -> str:
        return f"no Delta change: {self.reason}"


@dataclass(frozen=True, slots=True)
class Unsupported:
    reason: str
    kind: DdlKind = DdlKind.OTHER
    effect: str = "unsupported"

    def describe(self) -> str:
        return f"unsupported: {self.reason}"


DeltaChange = (
    CreateTarget
    | AddColumn
    | DropColumn
    | RenameColumn
    | ChangeColumnType
    | MoveColumn
    | SetDefault
    | TruncateTarget
    | DeletePartitionRows
    | ExchangePartition
    | DropTarget
    | RenameTarget
    | ChangeKey
    | NoOp
    | Unsupported
)
