"""TiCDC's large-message handling undone in Spark, before a record is decoded: values
decompressed (`large-message-handle-compression`) and claim-check records replaced by the
message TiCDC wrote to the source's `claim-check-storage-uri`.

An Arrow-vectorized `mapInArrow` over the records (Canal-JSON, Debezium) runs the pure
`codecs.large_message.Unwrap` on each record in the executors, where each claimed file is
read from the storage (`core.claim_store`): rows never reach the driver. Open Protocol's
events are undone inside its framing split (`decode._decode_open`). Each record keeps its
Kafka `key` and `value` as they came (a bad record is quarantined with its raw bytes) and
gains `pkey`/`pvalue`, what the decoder parses, and `unwrap_error`, the reason it is bad.
A source without compression or claim-check takes no Python step: `pkey`/`pvalue` are its
`key`/`value`.

The storage's credentials are read from the driver's environment when the plan of the
decode is built (`core.claim_store.options`), and travel to the executors inside the
function Spark ships them, as Hadoop's S3 keys travel in its configuration. This module
decides nothing: which records are bad, and what becomes of them, is the decoder's and the
policy's.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ticdc_sync.codecs.large_message import Unwrap
from ticdc_sync.core import claim_store
from ticdc_sync.core.errors import UserError
from ticdc_sync.core.model import LargeMessageHandle, Protocol, Source
from ticdc_sync.spark.runtime import raised

UNWRAPPED_SCHEMA = (
    "topic STRING, partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY, "
    "pkey BINARY, pvalue BINARY, unwrap_error STRING"
)
_PASSED = ("topic", "partition", "offset", "timestamp", "key", "value")


def unwrap_for(source: Source, connect: bool = False) -> Unwrap:
    """How `source`'s records are undone (built on the driver: the storage's options come
    from its environment). `connect`: a Spark Connect client, whose server's executors, not
    this machine, read a local claim-check folder."""
    o = source.options
    read = None
    uri = o.claim_check_storage_uri or ""
    if o.large_message_handle_option is LargeMessageHandle.CLAIM_CHECK and uri:
        folder = claim_store.root(uri)
        if not connect and "://" not in folder and not Path(folder).is_dir():
            # Each claim-check record would be a bad message for want of its file.
            raise UserError(
                f"source {source.name} ({source.origin.render()}): claim-check-storage-uri "
                f"{uri} names no folder here (hint: it must be the folder the changefeed "
                "writes its claim-check files to, mounted at the same path)"
            )
        read = claim_store.ClaimStore(uri, claim_store.options(uri)).read
    return Unwrap(
        compression=o.large_message_handle_compression,
        read=read,
        storage_uri=uri,
        raw_value=o.claim_check_raw_value,
    )


def unwrapped(records: DataFrame, source: Source, unwrap: Unwrap) -> DataFrame:
    """`records` (events.RECORD_SCHEMA) with `pkey`, `pvalue` and `unwrap_error`, for a
    Canal-JSON or Debezium source."""
    if not unwrap.active:
        return records.select(
            *_PASSED,
            F.col("key").alias("pkey"),
            F.col("value").alias("pvalue"),
            F.lit(None).cast("STRING").alias("unwrap_error"),
        )
    assert source.protocol is not Protocol.OPEN_PROTOCOL
    body = partial(_unwrap_batches, unwrap=unwrap, debezium=source.protocol is Protocol.DEBEZIUM)
    return records.select(*_PASSED).mapInArrow(body, UNWRAPPED_SCHEMA)


def _unwrap_batches(batches: Iterator, unwrap: Unwrap, debezium: bool) -> Iterator:
    """mapInArrow body: each record's key and value undone, its own columns passed on."""
    import pyarrow as pa

    for rb in batches:
        keys = rb.column("key").to_pylist()
        values = rb.column("value").to_pylist()
        pkeys: list[bytes | None] = []
        pvalues: list[bytes | None] = []
        errors: list[str | None] = []
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            if debezium:
                pk, pv, err = unwrap.debezium(k, v)
            else:
                try:
                    pk, (pv, err) = k, unwrap.canal(v)
                except OSError as e:
                    raise unreadable_storage(rb, i, e) from None
            pkeys.append(pk)
            pvalues.append(pv)
            errors.append(err)
        yield pa.RecordBatch.from_arrays(
            [rb.column(n) for n in _PASSED]
            + [pa.array(pkeys, pa.binary()), pa.array(pvalues, pa.binary())]
            + [pa.array(errors, pa.string())],
            names=[*_PASSED, "pkey", "pvalue", "unwrap_error"],
        )


def unreadable_storage(rb, row: int, e: OSError) -> RuntimeError:
    """What a task raises when the claim-check storage cannot be read for the record at
    `row` of `rb`: the job fails, and the driver turns it into a UserError (`raised`), so
    nothing of the batch is staged and the next run reads it again. A storage that is down
    for a while must not make good records bad."""
    where = "/".join(str(rb.column(c)[row].as_py()) for c in ("topic", "partition", "offset"))
    return RuntimeError(
        f"{raised.PREFIX}{where}: the claim-check storage cannot be read ({e}); nothing of "
        "this batch was staged: run again once the storage can be reached (its credentials, "
        "endpoint and region come from the environment, docs/object-storage.md)"
    )
