"""`warehouse._first_meta`: the column metadata a schema is inferred from is the first row's
(by commit_ts, then position) that carries some, read from a staging-shaped table that
delta-rs wrote (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from ticdc_sync.core.lake import LakeTable
from ticdc_sync.warehouse import read as warehouse

META = pa.map_(pa.string(), pa.string())


def _events(loc: Path, rows: list[dict]) -> LakeTable:
    schema = pa.schema(
        [
            ("source", pa.string()),
            ("kind", pa.string()),
            ("db", pa.string()),
            ("tbl", pa.string()),
            ("commit_ts", pa.int64()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("idx", pa.int32()),
            ("col_meta", META),
            ("pk_names", pa.list_(pa.string())),
        ]
    )
    full = [
        {"source": "s", "kind": "row", "db": "d", "tbl": "t", "idx": 0, "pk_names": ["id"], **r}
        for r in rows
    ]
    # Two commits, so the first row is not simply the first one written.
    write_deltalake(str(loc), pa.Table.from_pylist(full[2:], schema))
    write_deltalake(str(loc), pa.Table.from_pylist(full[:2], schema), mode="append")
    return LakeTable(str(loc))


def test_the_first_row_in_commit_order_gives_the_metadata(tmp_path: Path) -> None:
    events = _events(
        tmp_path / "events",
        [
            {"commit_ts": 9, "partition": 0, "offset": 1, "col_meta": [("id", "int")]},
            {"commit_ts": 5, "partition": 1, "offset": 4, "col_meta": [("id", "bigint")]},
            {"commit_ts": 5, "partition": 2, "offset": 0, "col_meta": [("id", "smallint")]},
            {
                "commit_ts": 1,
                "partition": 0,
                "offset": 0,
                "tbl": "other",
                "col_meta": [("x", "int")],
            },  # fmt: skip
            {
                "commit_ts": 2,
                "partition": 0,
                "offset": 2,
                "kind": "ddl",
                "col_meta": [("y", "int")],
            },  # fmt: skip
        ],
    )
    got = warehouse._first_meta(events, "s", "d", "t")
    assert got is not None
    assert dict(got["col_meta"]) == {"id": "bigint"}
    assert got["pk_names"] == ["id"]
    assert warehouse._first_meta(events, "s", "d", "missing") is None


def test_a_first_row_without_metadata_falls_back_to_the_next_that_has_some(
    tmp_path: Path,
) -> None:
    events = _events(
        tmp_path / "events",
        [
            {"commit_ts": 3, "partition": 0, "offset": 0, "col_meta": None},
            {"commit_ts": 3, "partition": 0, "offset": 1, "col_meta": []},
            {"commit_ts": 8, "partition": 0, "offset": 5, "col_meta": [("id", "int")]},
            {"commit_ts": 4, "partition": 1, "offset": 2, "col_meta": [("id", "bigint")]},
        ],
    )
    got = warehouse._first_meta(events, "s", "d", "t")
    assert got is not None
    assert dict(got["col_meta"]) == {"id": "bigint"}
