"""The Spark runtime every job shares: the session and its JVM (`session`, `jvm_output`),
object storage (`storage`), settings scoped to a block and the userMetadata of each commit
(`conf`), job names, pools and progress (`labels`, `progress`), a session per target applied
side by side (`fanout`), bad input raised inside a job (`raised`), and what a Delta log says
(`delta_log`).

The lowest floor of `spark/`: imports no other folder of it.
"""
