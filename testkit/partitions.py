"""TiDB's partitioned tables, simulated for histories: a layout (the partitions, each with its
bound or values as SQL and as the Python values TiDB folds them to), the PARTITION BY text it
is created with, and which partition TiDB puts a row in.

Written from TiDB's rules (pingcap/tidb `table/tables/partition.go`) independently of
ticdc-sync's own reading of them (`ticdc_sync.ddl.partition_rows`), so that a test's truth
does not come from the code it checks: the row's partitioning value is a Python function the
test writes by hand beside the SQL it stands for (`lambda r: to_days(r["d"])` for
`TO_DAYS(d)`). RANGE: the first partition whose bound is above the value, NULL in the
first. RANGE COLUMNS: tuples, NULL below and MAXVALUE above everything. LIST / LIST COLUMNS:
the partition listing the value (NULL only where listed), else DEFAULT. HASH: |int64(v) % n|
with Go's remainder, NULL in p0. KEY: crc32 over each value's decimal text (NULL: a 0 byte).
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

MAXVALUE = "MAXVALUE"


def to_days(d: dt.date | None) -> int | None:
    """MySQL TO_DAYS: days since year 0 (TO_DAYS('1970-01-01') = 719528)."""
    if d is None:
        return None
    return (d - dt.date(1970, 1, 1)).days + 719528


@dataclass(frozen=True)
class Part:
    """One partition. RANGE: `bound` (an int, a tuple for COLUMNS, MAXVALUE) and its SQL;
    LIST: `values` (ints or None, tuples for COLUMNS) and their SQL; `default`: LIST DEFAULT.
    HASH/KEY partitions have a name only."""

    name: str
    bound: Any = None
    bound_sql: str = ""
    values: tuple[Any, ...] = ()
    values_sql: str = ""
    default: bool = False

    def sql(self, kind: str) -> str:
        out = f"PARTITION `{self.name}`"
        if kind.startswith("RANGE"):
            return f"{out} VALUES LESS THAN ({self.bound_sql})"
        if kind.startswith("LIST"):
            return f"{out} DEFAULT" if self.default else f"{out} VALUES IN ({self.values_sql})"
        return out


@dataclass(frozen=True)
class Layout:
    """A partitioned table's layout. `value(row)`: the partitioning value TiDB computes (an
    int or None; a tuple of column values for COLUMNS and KEY)."""

    kind: str  # RANGE | RANGE COLUMNS | LIST | LIST COLUMNS | HASH | KEY
    by_sql: str
    value: Callable[[dict[str, Any]], Any] = field(compare=False)
    parts: tuple[Part, ...] = ()

    def sql(self) -> str:
        defs = ", ".join(p.sql(self.kind) for p in self.parts)
        return f"PARTITION BY {self.kind} ({self.by_sql}) ({defs})"

    def names(self) -> list[str]:
        return [p.name for p in self.parts]

    def with_parts(self, parts: list[Part] | tuple[Part, ...]) -> Layout:
        return replace(self, parts=tuple(parts))

    def locate(self, row: dict[str, Any]) -> str:
        """The partition TiDB puts `row` in; raises where TiDB refuses the row."""
        v = self.value(row)
        kind = self.kind
        if kind == "RANGE":
            if v is None:
                return self.parts[0].name
            for p in self.parts:
                if p.bound == MAXVALUE or v < p.bound:
                    return p.name
        elif kind == "RANGE COLUMNS":
            for p in self.parts:
                if _tuple_below(v, p.bound):
                    return p.name
        elif kind in ("LIST", "LIST COLUMNS"):
            for p in self.parts:
                if not p.default and v in p.values:
                    return p.name
            for p in self.parts:
                if p.default:
                    return p.name
        elif kind == "HASH":
            if v is None:
                return self.parts[0].name
            s = v - (1 << 64) if v >= 1 << 63 else v
            r = s % len(self.parts) if s >= 0 else -((-s) % len(self.parts))
            return self.parts[abs(r)].name
        elif kind == "KEY":
            data = b"".join(b"\x00" if x is None else str(x).encode() for x in v)
            return self.parts[zlib.crc32(data) % len(self.parts)].name
        raise ValueError(f"TiDB has no partition for value {v!r} (table has no partition)")


def _tuple_below(v: tuple, bound: tuple) -> bool:
    for x, b in zip(v, bound, strict=True):
        if b == MAXVALUE or x is None:
            return True
        if x != b:
            return x < b
    return False
