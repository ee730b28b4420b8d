"""The typed DDL statements and ALTER TABLE clauses the grammar produces (frozen dataclasses).

What the grammar does not understand is `Unknown(sql, reason)`, never a guess. Data only:
no parsing here (`grammar`), no schema evolution (`evolution`). Pure Python; no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.core.sqlgen import quote
from ticdc_sync.core.upstream import Column, TableSchema

# -- ALTER TABLE clauses ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Position:
    """Column position: FIRST (after=None) or AFTER `after`."""

    after: str | None = None

    @property
    def first(self) -> bool:
        return self.after is None

    def sql(self) -> str:
        return "FIRST" if self.after is None else f"AFTER {quote(self.after)}"


@dataclass(frozen=True, slots=True)
class AddColumnClause:
    column: Column
    position: Position | None = None
    primary: bool = False
    unique: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropColumnClause:
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class ChangeColumnClause:
    """MODIFY (old == column.name) or CHANGE old new type."""

    old: str
    column: Column
    position: Position | None = None
    primary: bool = False
    unique: bool = False


@dataclass(frozen=True, slots=True)
class RenameColumnClause:
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class SetDefaultClause:
    """ALTER COLUMN c SET DEFAULT v (default text; None for NULL) / DROP DEFAULT (drop=True)."""

    name: str
    default: str | None = None
    drop: bool = False


@dataclass(frozen=True, slots=True)
class AddPrimaryKeyClause:
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropPrimaryKeyClause:
    pass


@dataclass(frozen=True, slots=True)
class AddUniqueKeyClause:
    name: str | None
    columns: tuple[str, ...] | None  # None: functional key parts (not a handle key)


@dataclass(frozen=True, slots=True)
class IndexClause:
    """Non-unique index, foreign key, check constraint, rename/visibility of an index."""

    action: str  # "add" | "drop" | "rename" | "alter"
    name: str | None = None


@dataclass(frozen=True, slots=True)
class TableOptionClause:
    """Table options: COMMENT (kept), charset/collation, engine, auto-id, TTL, placement..."""

    option: str
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionClause:
    """ADD/DROP/TRUNCATE/EXCHANGE/REORGANIZE/COALESCE PARTITION, PARTITION BY, REMOVE
    PARTITIONING (and the maintenance verbs ANALYZE, CHECK, ... which change nothing)."""

    action: str  # upper-case: "ADD", "DROP", "TRUNCATE", "EXCHANGE", "REORGANIZE", ...
    text: str
    names: tuple[str, ...] = ()  # the partitions it names (ALL: `all_partitions`)
    all_partitions: bool = False  # TRUNCATE PARTITION ALL
    # ADD / REORGANIZE ... INTO: the `(PARTITION ...)` list as text; PARTITION BY: the new
    # partitioning's text (`ddl.partitioning`), None when TiDB builds no partitioning.
    definitions: str | None = None
    count: int | None = None  # ADD PARTITION PARTITIONS n, COALESCE PARTITION n
    table: tuple[str, str] | None = None  # EXCHANGE ... WITH TABLE db.t


@dataclass(frozen=True, slots=True)
class TiFlashClause:
    replicas: int


@dataclass(frozen=True, slots=True)
class RenameTableClause:
    new_db: str
    new_table: str


AlterClause = (
    AddColumnClause
    | DropColumnClause
    | ChangeColumnClause
    | RenameColumnClause
    | SetDefaultClause
    | AddPrimaryKeyClause
    | DropPrimaryKeyClause
    | AddUniqueKeyClause
    | IndexClause
    | TableOptionClause
    | PartitionClause
    | TiFlashClause
    | RenameTableClause
)

# -- statements -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTable:
    schema: TableSchema
    if_not_exists: bool = False
    sql: str = ""


@dataclass(frozen=True, slots=True)
class CreateTableLike:
    db: str
    table: str
    like_db: str
    like_table: str
    if_not_exists: bool = False
    sql: str = ""


@dataclass(frozen=True, slots=True)
class AlterTable:
    db: str
    table: str
    clauses: tuple[AlterClause, ...]
    sql: str = ""


@dataclass(frozen=True, slots=True)
class RenameTables:
    pairs: tuple[tuple[tuple[str, str], tuple[str, str]], ...]  # ((old_db, old), (new_db, new))
    sql: str = ""


@dataclass(frozen=True, slots=True)
class TruncateTable:
    db: str
    table: str
    sql: str = ""


@dataclass(frozen=True, slots=True)
class DropTable:
    db: str
    table: str
    if_exists: bool = False
    sql: str = ""


@dataclass(frozen=True, slots=True)
class CreateDatabase:
    db: str
    sql: str = ""


@dataclass(frozen=True, slots=True)
class DropDatabase:
    db: str
    sql: str = ""


@dataclass(frozen=True, slots=True)
class AlterDatabase:
    db: str | None
    sql: str = ""


@dataclass(frozen=True, slots=True)
class CreateIndex:
    db: str
    table: str
    name: str
    unique: bool
    columns: tuple[str, ...] | None
    sql: str = ""


@dataclass(frozen=True, slots=True)
class DropIndex:
    db: str
    table: str
    name: str
    sql: str = ""


@dataclass(frozen=True, slots=True)
class SchemaObject:
    """Views, sequences, placement policies, resource groups, LOCK/UNLOCK: no table data."""

    object: str  # "view" | "sequence" | "placement policy" | "resource group" | "lock"
    action: str  # "create" | "alter" | "drop" | ...
    name: str | None
    sql: str = ""


@dataclass(frozen=True, slots=True)
class RecoverTable:
    """RECOVER TABLE / FLASHBACK TABLE|DATABASE: brings back rows with no row events."""

    db: str | None
    table: str | None
    new_table: str | None = None
    sql: str = ""


@dataclass(frozen=True, slots=True)
class Unknown:
    sql: str
    reason: str


DdlStatement = (
    CreateTable
    | CreateTableLike
    | AlterTable
    | RenameTables
    | TruncateTable
    | DropTable
    | CreateDatabase
    | DropDatabase
    | AlterDatabase
    | CreateIndex
    | DropIndex
    | SchemaObject
    | RecoverTable
    | Unknown
)
