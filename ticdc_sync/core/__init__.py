"""The ground floor: the vocabulary every other folder shares.

Types (`datatypes`, `upstream`: tables, columns, keys, versions), the project model the YAML
files load into (`model`), errors, the staged event model (`events`, `staged`, `window`:
markers and tallies), SQL text (`sqlgen`, `sqlgen_history`), durations, secrets, capture
lines, what a terminal shows (`console`, `progress`, `interrupts`), and Delta tables and
object-store files read without a JVM (`lake`, through delta-rs).

Must not import any other folder of ticdc_sync, nor pyspark, py4j or delta-spark.
"""
