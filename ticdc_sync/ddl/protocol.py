"""One upstream DDL message into statements, cross-checked with what its protocol says it is.

Canal-JSON's `type` (codec facts 1.4) and Open Protocol's DDL type code, a TiDB ActionType
(codec facts 0.3), say what kind of DDL a message is; `parse_ddl` parses the SQL and turns a
statement that contradicts the protocol into `Unknown`, and an unreadable statement that the
protocol marks as having no effect on table data into a no-op `SchemaObject`. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from ticdc_sync.core.model import DdlKind
from ticdc_sync.ddl.grammar import parse_statements
from ticdc_sync.ddl.statements import (
    AlterDatabase,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    CreateTableLike,
    DdlStatement,
    DropDatabase,
    DropIndex,
    DropTable,
    RecoverTable,
    RenameTables,
    SchemaObject,
    TruncateTable,
    Unknown,
)

# -- DDL messages -----------------------------------------------------------------------------


def parse_ddl(sql: str, default_db: str | None, hint: str | None = None) -> list[DdlStatement]:
    """One upstream DDL message into typed statements, cross-checked with the protocol's hint.

    `hint` is Canal's `type` (ALTER, CINDEX, QUERY, ...), an Open Protocol ActionType number as
    a string ("61"), or "debezium". A statement whose parse contradicts the hint becomes
    `Unknown`; a statement the grammar cannot read but the hint classifies as one with no
    table data effect (index, view, sequence, placement, TiFlash, comment, charset ...) becomes
    a `SchemaObject` (a no-op); anything else unreadable stays `Unknown` with the reason.
    """
    stmts = parse_statements(sql, default_db)
    if not hint or hint.lower() == "debezium":
        return stmts
    if hint.strip().isdigit():
        info = open_protocol_action(int(hint))
        allowed, noop, label = info.statements, info.noop, f"ActionType {info.code} {info.name}"
    else:
        allowed = _CANAL_STATEMENTS.get(hint.upper())
        noop, label = False, f"Canal type {hint.upper()}"
    out: list[DdlStatement] = []
    for s in stmts:
        if isinstance(s, Unknown):
            if noop:
                out.append(SchemaObject(label, "protocol", None, s.sql))
            else:
                out.append(Unknown(s.sql, f"{s.reason} ({label})"))
        elif allowed is not None and not isinstance(s, allowed):
            out.append(
                Unknown(
                    getattr(s, "sql", sql),
                    f"the protocol says {label} but the SQL parses as {type(s).__name__}",
                )
            )
        else:
            out.append(s)
    return out


@dataclass(frozen=True, slots=True)
class ActionInfo:
    """A TiDB ActionType (Open Protocol DDL `t`, codec facts 0.3)."""

    code: int
    name: str
    kind: DdlKind | None  # None: depends on the SQL (ModifyColumn, MultiSchemaChange)
    statements: tuple[type, ...] | None  # statement classes the SQL may parse as
    noop: bool = False  # no table data effect: safe to record and skip when unreadable


_T = AlterTable
_ACTIONS: dict[int, tuple[str, DdlKind | None, tuple[type, ...] | None, bool]] = {
    1: ("CreateSchema", DdlKind.OTHER, (CreateDatabase,), True),
    2: ("DropSchema", DdlKind.DROP_TABLE, (DropDatabase,), False),  # drops its tables
    3: ("CreateTable", DdlKind.CREATE_TABLE, (CreateTable, CreateTableLike), False),
    4: ("DropTable", DdlKind.DROP_TABLE, (DropTable,), False),
    5: ("AddColumn", DdlKind.ADD_COLUMN, (_T,), False),
    6: ("DropColumn", DdlKind.DROP_COLUMN, (_T,), False),
    7: ("AddIndex", DdlKind.OTHER, (_T, CreateIndex), False),
    8: ("DropIndex", DdlKind.OTHER, (_T, DropIndex), False),
    9: ("AddForeignKey", DdlKind.OTHER, (_T,), True),
    10: ("DropForeignKey", DdlKind.OTHER, (_T,), True),
    11: ("TruncateTable", DdlKind.TRUNCATE_TABLE, (TruncateTable,), False),
    12: ("ModifyColumn", None, (_T,), False),
    13: ("RebaseAutoID", DdlKind.OTHER, (_T,), True),
    14: ("RenameTable", DdlKind.RENAME_TABLE, (RenameTables, _T), False),
    15: ("SetDefaultValue", DdlKind.SET_DEFAULT, (_T,), False),
    16: ("ShardRowID", DdlKind.OTHER, (_T,), True),
    17: ("ModifyTableComment", DdlKind.OTHER, (_T,), True),
    18: ("RenameIndex", DdlKind.OTHER, (_T,), True),
    19: ("AddTablePartition", DdlKind.OTHER, (_T,), False),
    20: ("DropTablePartition", DdlKind.PARTITION, (_T,), False),
    21: ("CreateView", DdlKind.OTHER, (SchemaObject,), True),
    22: ("ModifyTableCharsetAndCollate", DdlKind.OTHER, (_T,), True),
    23: ("TruncateTablePartition", DdlKind.PARTITION, (_T,), False),
    24: ("DropView", DdlKind.OTHER, (SchemaObject,), True),
    25: ("RecoverTable", DdlKind.RECOVER_TABLE, (RecoverTable,), False),
    26: ("ModifySchemaCharsetAndCollate", DdlKind.OTHER, (AlterDatabase,), True),
    27: ("LockTable", DdlKind.OTHER, None, True),
    28: ("UnlockTable", DdlKind.OTHER, None, True),
    29: ("RepairTable", DdlKind.OTHER, None, False),
    30: ("SetTiFlashReplica", DdlKind.OTHER, (_T,), True),
    31: ("UpdateTiFlashReplicaStatus", DdlKind.OTHER, None, True),
    32: ("AddPrimaryKey", DdlKind.PRIMARY_KEY, (_T,), False),
    33: ("DropPrimaryKey", DdlKind.PRIMARY_KEY, (_T,), False),
    34: ("CreateSequence", DdlKind.OTHER, (SchemaObject,), True),
    35: ("AlterSequence", DdlKind.OTHER, (SchemaObject,), True),
    36: ("DropSequence", DdlKind.OTHER, (SchemaObject,), True),
    37: ("AddColumns", DdlKind.ADD_COLUMN, (_T,), False),
    38: ("DropColumns", DdlKind.DROP_COLUMN, (_T,), False),
    39: ("ModifyTableAutoIDCache", DdlKind.OTHER, (_T,), True),
    40: ("RebaseAutoRandomBase", DdlKind.OTHER, (_T,), True),
    41: ("AlterIndexVisibility", DdlKind.OTHER, (_T,), True),
    42: ("ExchangeTablePartition", DdlKind.PARTITION, (_T,), False),
    43: ("AddCheckConstraint", DdlKind.OTHER, (_T,), True),
    44: ("DropCheckConstraint", DdlKind.OTHER, (_T,), True),
    45: ("AlterCheckConstraint", DdlKind.OTHER, (_T,), True),
    47: ("RenameTables", DdlKind.RENAME_TABLE, (RenameTables,), False),
    49: ("AlterTableAttributes", DdlKind.OTHER, (_T,), True),
    50: ("AlterTablePartitionAttributes", DdlKind.OTHER, (_T,), True),
    51: ("CreatePlacementPolicy", DdlKind.OTHER, (SchemaObject,), True),
    52: ("AlterPlacementPolicy", DdlKind.OTHER, (SchemaObject,), True),
    53: ("DropPlacementPolicy", DdlKind.OTHER, (SchemaObject,), True),
    54: ("AlterTablePartitionPlacement", DdlKind.OTHER, (_T,), True),
    55: ("ModifySchemaDefaultPlacement", DdlKind.OTHER, (AlterDatabase,), True),
    56: ("AlterTablePlacement", DdlKind.OTHER, (_T,), True),
    57: ("AlterCacheTable", DdlKind.OTHER, (_T,), True),
    58: ("AlterTableStatsOptions", DdlKind.OTHER, (_T,), True),
    59: ("AlterNoCacheTable", DdlKind.OTHER, (_T,), True),
    # tiflow keeps 60 on each split CREATE TABLE (codec facts 0.3).
    60: ("CreateTables", DdlKind.CREATE_TABLE, (CreateTable, CreateTableLike), False),
    61: ("MultiSchemaChange", None, (_T,), False),
    62: ("FlashbackCluster", DdlKind.RECOVER_TABLE, None, False),
    63: ("RecoverSchema", DdlKind.RECOVER_TABLE, (RecoverTable,), False),
    64: ("ReorganizePartition", DdlKind.OTHER, (_T,), False),
    65: ("AlterTTLInfo", DdlKind.OTHER, (_T,), True),
    67: ("AlterTTLRemove", DdlKind.OTHER, (_T,), True),
    68: ("CreateResourceGroup", DdlKind.OTHER, (SchemaObject,), True),
    69: ("AlterResourceGroup", DdlKind.OTHER, (SchemaObject,), True),
    70: ("DropResourceGroup", DdlKind.OTHER, (SchemaObject,), True),
    71: ("AlterTablePartitioning", DdlKind.OTHER, (_T,), False),
    72: ("RemovePartitioning", DdlKind.OTHER, (_T,), False),
    73: ("AddVectorIndex", DdlKind.OTHER, (_T, CreateIndex), True),
}


def open_protocol_action(code: int) -> ActionInfo:
    """What an Open Protocol DDL type code (TiDB ActionType) means; unknown codes check nothing."""
    if code in _ACTIONS:
        name, kind, stmts, noop = _ACTIONS[code]
        return ActionInfo(code, name, kind, stmts, noop)
    return ActionInfo(code, f"ActionType{code}", None, None, False)


# Canal-JSON `type` of a DDL message (codec facts 1.4) -> statement classes it may parse as.
# QUERY is the catch-all (views, schema DDL, EXCHANGE PARTITION, TTL, CreateTables in
# tiflow...), so it checks nothing.
_CANAL_STATEMENTS: dict[str, tuple[type, ...] | None] = {
    "CREATE": (CreateTable, CreateTableLike),
    "ALTER": (AlterTable,),
    "ERASE": (DropTable,),
    "TRUNCATE": (TruncateTable,),
    "RENAME": (RenameTables, AlterTable),
    "CINDEX": (AlterTable, CreateIndex),
    "DINDEX": (AlterTable, DropIndex),
    "QUERY": None,
}
CANAL_DDL_TYPES = tuple(_CANAL_STATEMENTS)
