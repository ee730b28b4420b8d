"""One Spark job against an S3 warehouse, run by tests/s3 in a fresh process.

    python -m tests.s3.spark_job ACTION[,ACTION...] WAREHOUSE [PROJECT]
        (write, probe, leftover; example: PROJECT's targets against its expected rows)

The session is the one ticdc-sync builds for an output whose warehouse is WAREHOUSE
(`build_session`), configured only through the environment the test hands over. `write`
creates a target with the statements a run issues (`sqlgen`: CREATE, INSERT, MERGE),
`read` reads it back, `probe` shows what S3A's file creation guarantees on this server.
Several actions share one process (one JVM start). Prints one line `RESULT <json>`, the
result of each action by name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ticdc_sync.core import sqlgen
from ticdc_sync.core.model import Output
from ticdc_sync.spark.runtime.session import build_session
from ticdc_sync.warehouse.locations import join_uri, target_location

TARGET = "shop.orders"
COLUMNS = [("id", "INT"), ("name", "STRING")]
SOURCE_SCHEMA = f"id INT, name STRING, {sqlgen.COMMIT_TS} BIGINT, {sqlgen.OP_COL} STRING"


def session(warehouse: str):
    output = Output(name="s3-test", spark_master="local[1]", warehouse=warehouse)
    spark = build_session(
        output,
        app_name="ticdc-sync-s3-test",
        kafka=False,
        extra_conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "spark.default.parallelism": "1",
            "spark.driver.memory": "1g",
            # A JVM that lives for a few statements: quick compilation beats peak speed.
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def table_state(spark, ref: str) -> dict:
    rows = spark.sql(f"SELECT id, name, {sqlgen.COMMIT_TS} FROM {ref} ORDER BY id").collect()
    history = spark.sql(f"DESCRIBE HISTORY {ref}").orderBy("version").collect()
    return {
        "rows": [list(r) for r in rows],
        "operations": [[h.version, h.operation] for h in history],
    }


def write(spark, warehouse: str) -> dict:
    ref = sqlgen.table_ref(target_location(warehouse, TARGET))
    spark.sql(sqlgen.create_table_sql(ref, COLUMNS))
    names = [n for n, _ in COLUMNS]
    spark.createDataFrame(
        [(1, "a", 10, "I"), (2, "b", 10, "I"), (3, "c", 10, "I")], SOURCE_SCHEMA
    ).createOrReplaceTempView("batch1")
    spark.sql(sqlgen.insert_sql(ref, "batch1", names))
    # Update 2, delete 3, insert 4; the stale update of 1 (commit_ts 5 < 10) must not land.
    spark.createDataFrame(
        [(1, "stale", 5, "U"), (2, "B", 20, "U"), (3, None, 20, "D"), (4, "d", 20, "I")],
        SOURCE_SCHEMA,
    ).createOrReplaceTempView("batch2")
    spark.sql(sqlgen.merge_sql(ref, "batch2", ["id"], names))
    return table_state(spark, ref)


def example(spark, warehouse: str, project_root: str) -> dict:
    """How the example project's targets (its `s3` target, whose warehouse is WAREHOUSE)
    differ from its expected rows: [] when exact."""
    from tests.example_tables import differences
    from ticdc_sync.project import load_project

    project = load_project(Path(project_root), "s3")
    assert project.output.warehouse == warehouse, (project.output.warehouse, warehouse)
    return {"differences": differences(spark, project)}


def _second_close(spark, path: str, conditional: bool) -> str:
    """Open two writers of one new file, close both; what the second close did."""
    jvm = spark._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark._jsc.hadoopConfiguration())

    def open_one():
        if not conditional:
            return fs.create(p, False)  # what Delta's S3SingleDriverLogStore calls
        builder = fs.createFile(p).create()
        builder.must("fs.option.create.conditional.overwrite", True)
        return builder.build()

    first, second = open_one(), open_one()  # both pass the existence check
    first.write(bytearray(b"first"))
    second.write(bytearray(b"second"))
    first.close()  # S3A uploads on close
    try:
        second.close()
    except Exception as e:  # py4j's error: the Java exception's text is what matters
        text = str(e)
        return "refused: " + ("412" if "412" in text else text[:500])
    return "succeeded"


def probe(spark, warehouse: str) -> dict:
    base = join_uri(warehouse, "_probe")
    plain = f"{base}/plain.json"
    conditional = f"{base}/conditional.json"
    fs_text = spark.sparkContext.textFile  # read back what the file holds after both writers
    return {
        "plain": _second_close(spark, plain, conditional=False),
        "plain_content": fs_text(plain).collect(),
        "conditional": _second_close(spark, conditional, conditional=True),
        "conditional_content": fs_text(conditional).collect(),
    }


LEFTOVER = "shop.leftover"  # a table whose create was killed before its first commit


def leftover(spark, warehouse: str) -> dict:
    """Create a state table where a killed create left only `_delta_log/` folder markers
    (the test puts them there), as a run does (`state_table.ensure_table`)."""
    from delta.tables import DeltaTable

    from ticdc_sync.spark.staging.state_table import ensure_table

    location = target_location(warehouse, LEFTOVER)
    ensure_table(spark, location, "id INT")
    ref = sqlgen.table_ref(location)
    history = spark.sql(f"DESCRIBE HISTORY {ref}").orderBy("version").collect()
    return {
        "is_delta": DeltaTable.isDeltaTable(spark, location),
        "operations": [[h.version, h.operation] for h in history],
    }


ACTIONS = {
    "write": write,
    "probe": probe,
    "example": example,
    "leftover": leftover,
}


def main(argv: list[str]) -> int:
    actions, warehouse, *rest = argv
    spark = session(warehouse)
    try:
        result = {a: ACTIONS[a](spark, warehouse, *rest) for a in actions.split(",")}
    finally:
        spark.stop()
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
