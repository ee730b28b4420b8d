"""The warehouse as the engine left it, read without a JVM: where each table lives
(`locations`), the state a plan starts from (`state`, read from the tables by `read` through
delta-rs), the run lease (`lease`), and how far staged events may be trimmed (`retention`).

Imports only `core`, `ddl`, `codecs` and `project`: never the plan, the run loop, the
readers, Spark or the commands.
"""
