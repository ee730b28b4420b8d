"""`run` without Spark: the run loop and the engine interface it drives.

`engine` is the interface `spark/` implements. `loop` stages each poll on a thread of its
own and applies due targets in worker threads; `schedule` decides which targets are due and
how stale each is; `results` is what a run reports.

Imports the floors below it (`plan`, `warehouse`, `project`, `codecs`, `ddl`, `core`);
never `read`, `spark` or `commands`.
"""
