"""Per-protocol value conversion (raw text -> Delta values) as Spark SQL text, and dispatch.

`ticdc_sync.spark.staging.decode` stages each column value as raw text; at apply time the engine
asks `value_sql(protocol, col, raw, options)` for the expression that converts it to
`datatypes.delta_type(col)` and `fits_sql(...)` for the check that it converted without
loss. `infer` builds upstream columns from protocol metadata when no DDL history exists.
`dumpling` converts the values of a Dumpling export (an initial load) the same way.
Pure Python: nothing here imports pyspark or touches rows.
"""

from __future__ import annotations

from types import ModuleType

from ticdc_sync.core.model import Protocol, SourceOptions
from ticdc_sync.core.upstream import Column


def module_for(protocol: Protocol | str) -> ModuleType:
    """The codec module (`canal_json`, `debezium`, `open_protocol`) for a protocol."""
    from ticdc_sync.codecs import canal_json, debezium, open_protocol

    p = Protocol(protocol)
    return {
        Protocol.CANAL_JSON: canal_json,
        Protocol.DEBEZIUM: debezium,
        Protocol.OPEN_PROTOCOL: open_protocol,
    }[p]


def value_sql(protocol: Protocol | str, col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL converting the raw-text expression `raw` into the column's Delta type."""
    return module_for(protocol).value_sql(col, raw, options)


def fits_sql(protocol: Protocol | str, col: Column, raw: str, options: SourceOptions) -> str:
    """Spark SQL boolean: true when `raw` is NULL or converts without loss."""
    return module_for(protocol).fits_sql(col, raw, options)
