"""Reading targets as of one TiDB TSO without a JVM: what a request means, which targets did
not exist upstream then (left out of a read, with why) and which Delta version of each
other target holds the state at or before it (`as_of`), a consistent snapshot of
every target (`snapshot`), and sync points (`sync_points`). The Spark reader that adds the
staged changes after that version, the public entry point, is `ticdc_sync.spark.as_of`.

Imports the floors below it (`run`'s engine interface for sync points, `plan`,
`warehouse`, `project`, `codecs`, `ddl`, `core`); never `spark` or `commands`.
"""
