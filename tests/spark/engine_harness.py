"""Build throw-away projects around recorded Kafka records and read back their Delta targets.

Used by the engine's end-to-end tests: records are written as capture files (DESIGN.md §1),
the project is loaded by the real loader and run by the real runner on the shared session.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path

from ticdc_sync.locations import target_location
from ticdc_sync.model import Project
from ticdc_sync.project import load_project

PROFILES = """\
test:
  target: dev
  outputs:
    dev:
      spark: {master: "local[2]"}
      warehouse: warehouse
      transport: {type: files, captures: captures}
"""


def write_captures(root: Path, topic: str, records: Iterable[tuple]) -> None:
    """records: (partition, offset, key: bytes|None, value: bytes|None[, timestamp])."""
    folder = root / "captures" / topic
    folder.mkdir(parents=True, exist_ok=True)
    by_part: dict[int, list[str]] = {}
    for rec in records:
        partition, offset, key, value = rec[:4]
        ts = rec[4] if len(rec) > 4 else 1700000000000 + offset
        line: dict = {"partition": partition, "offset": offset, "timestamp": ts}
        try:
            k = key.decode("utf-8") if key is not None else None
            v = value.decode("utf-8") if value is not None else None
            line.update(key=k, value=v)
        except UnicodeDecodeError:
            line.update(
                key=base64.b64encode(key).decode() if key is not None else None,
                value=base64.b64encode(value).decode() if value is not None else None,
                encoding="base64",
            )
        by_part.setdefault(partition, []).append(json.dumps(line, sort_keys=True))
    for p, lines in by_part.items():
        path = folder / f"part-{p}.jsonl"
        with path.open("a", encoding="utf-8") as f:
            for ln in lines:
                f.write(ln + "\n")


def make_project(
    root: Path,
    *,
    protocol: str,
    topic: str = "t",
    tables: str = '  - upstream: "shop.*"\n    name: "{table}"\n',
    schema_sql: str | None = None,
    options: str = "",
    defaults: str = "",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ticdc_sync.yml").write_text(f"name: test\nprofile: test\n{defaults}")
    (root / "profiles.yml").write_text(PROFILES)
    (root / "sources").mkdir(exist_ok=True)
    opts = f"    options:\n{options}" if options else ""
    (root / "sources" / "s.yml").write_text(
        f"sources:\n  - name: src\n    protocol: {protocol}\n    topics: [{topic}]\n{opts}"
    )
    (root / "tables").mkdir(exist_ok=True)
    (root / "tables" / "t.yml").write_text("tables:\n" + tables)
    if schema_sql:
        (root / "schema").mkdir(exist_ok=True)
        (root / "schema" / "shop.sql").write_text(schema_sql)
    return root


def load(root: Path) -> Project:
    return load_project(root)


def read_target(spark, project: Project, name: str, order_by: str = "1") -> list[dict]:
    from ticdc_sync.locations import warehouse_path

    loc = target_location(warehouse_path(project), name)
    df = spark.read.format("delta").load(loc)
    return [r.asDict() for r in df.orderBy(*[c.strip() for c in order_by.split(",")]).collect()]


def target_schema(spark, project: Project, name: str) -> list[tuple[str, str]]:
    from ticdc_sync.locations import warehouse_path

    loc = target_location(warehouse_path(project), name)
    df = spark.read.format("delta").load(loc)
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def canal_row(
    db: str, table: str, op: str, ts: int, data: dict, mysql_type: dict, pk: list[str], old=None
) -> bytes:
    """A TiCDC Canal-JSON row message with the TiDB extension (codec facts 1.1, 1.6)."""
    return json.dumps(
        {
            "id": 0,
            "database": db,
            "table": table,
            "pkNames": pk,
            "isDdl": False,
            "type": op,
            "es": ts >> 18,
            "ts": 0,
            "sql": "",
            "sqlType": {k: 12 for k in mysql_type},
            "mysqlType": mysql_type,
            "data": [data],
            "old": [old] if old else None,
            "_tidb": {"commitTs": ts},
        }
    ).encode()


def canal_watermark(ts: int) -> bytes:
    """A TiCDC Canal-JSON TIDB_WATERMARK message (codec facts 1.6)."""
    return json.dumps(
        {
            "id": 0,
            "database": "",
            "table": "",
            "pkNames": None,
            "isDdl": False,
            "type": "TIDB_WATERMARK",
            "es": ts >> 18,
            "ts": 0,
            "sql": "",
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"watermarkTs": ts},
        }
    ).encode()


def as_staged_columns(state, df):
    """`df` padded to the staging table's columns (without `source`): its own columns as
    they are, every other one NULL of its type. For staging hand-made events."""
    from pyspark.sql import functions as F

    full = state.events().drop("source").schema
    return df.select(
        *[
            (F.col(f"`{f.name}`") if f.name in df.columns else F.lit(None).cast(f.dataType)).alias(
                f.name
            )
            for f in full.fields
        ]
    )
