"""Reading targets as of one TiDB TSO without a JVM: what a request means and which Delta
version of each target holds the state at or before it (`as_of`), a consistent snapshot of
every target (`snapshot`), and sync points (`sync_points`). The Spark reader that adds the
staged changes after that version, the public entry point, is `ticdc_sync.spark.as_of`.

Imports the floors below it (`run`'s engine interface for sync points, `plan`,
`warehouse`, `project`, `codecs`, `ddl`, `core`); never `spark` or `commands`.
"""
