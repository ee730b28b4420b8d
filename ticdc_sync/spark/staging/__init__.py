"""Staging: a source's records decoded (`decode`) and appended to the staging table
(`table`) one commit a poll (`batch`), what that commit added (`staged_batch`), bad records
kept (`quarantine`), the schema history (`schema_history`), the state tables opened together
(`state`), and the staging table's trims (`trim`) and compaction, run beside the polls
(`maintenance`).

Imports `spark.transports`, `spark.runtime` and the pure floors; never `spark.apply`.
"""
