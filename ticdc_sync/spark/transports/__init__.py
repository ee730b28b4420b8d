"""Where a source's records come from: capture files or Kafka (`sources`), Kafka's batch reads
and offset look-ups (`kafka`), and the split size of a read of capture files (`splits`).

Imports `spark.runtime` and the pure floors only.
"""
