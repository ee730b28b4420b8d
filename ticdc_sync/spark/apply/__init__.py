"""Applying a target's planned steps (`executor`): its row segments typed, collapsed and
merged (`rows`, `row_typing`, `mode_rows`), the staged window read once for several targets
of a round (`shared_window`, `local_copies`), its DDL commits (`ddl_commit`), and its initial
load from a Dumpling export (`load`).

Imports `spark.staging`, `spark.transports`, `spark.runtime` and the pure floors; never the
entry points above it (`engine`, `runner`, `as_of`, `explain`, `capture`).
"""
