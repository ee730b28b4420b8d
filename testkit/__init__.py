"""Test kit: faithful TiCDC encoders, a history generator with ground truth, capture files.

Modules: `encode` (Canal-JSON / Open Protocol / Debezium encoders and a partition-placing
producer), `history` (seeded TiCDC-like histories with their true final tables),
`captures` (DESIGN.md §1 capture files), `example` (regenerates projects_example/shop).
Pure Python; never imports pyspark.
"""

from testkit.encode import (
    DdlChange,
    EncoderOptions,
    Record,
    RowChange,
    TopicProducer,
    make_encoder,
    make_tso,
)

__all__ = [
    "DdlChange",
    "EncoderOptions",
    "Record",
    "RowChange",
    "TopicProducer",
    "make_encoder",
    "make_tso",
]
