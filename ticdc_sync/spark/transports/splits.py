"""The input split size that lets a read of capture files finish soonest on the cores it has.

Spark cuts each file into chunks of at most `spark.sql.files.maxPartitionBytes` (128 MiB)
and packs the chunks, largest first, into one task each until a task would exceed that
size. On few cores this default can leave a last wave with one busy core: six capture
files of 145 MB on 2 cores become six 128 MB chunks and one task of the six 17 MB tails,
so the seventh task runs alone for about a seventh of the job. This module replays
Spark's packing for candidate sizes and picks the one whose tasks, handed to the cores in
order, finish first. It is pure arithmetic: it must not import pyspark or touch files.
"""

from __future__ import annotations

from collections.abc import Sequence

MIB = 1024 * 1024
SPARK_DEFAULT = 128 * MIB
# Spark's `spark.sql.files.openCostInBytes`: what opening a file costs, counted in bytes.
OPEN_COST = 4 * MIB
# What starting a task costs, counted in bytes like the open cost.
TASK_COST = 4 * MIB
# Tasks larger than this are never chosen: a task's memory grows with its split (the
# staging write buffers a Parquet row group per task), so tasks stay near Spark's default
# however large the files are. A first cap of 2x the default let the driver's peak memory
# grow with the backlog (benchmarks/README.md); one task per file still fits files a
# little over the default.
LARGEST = SPARK_DEFAULT * 5 // 4


def pack(sizes: Sequence[int], max_split: int) -> list[int]:
    """Bytes per task when Spark reads files of `sizes` with `max_split` as its split size
    (FilePartition.getFilePartitions: chunks sorted largest first, a task closed when the
    next chunk would take it past `max_split`; each chunk also counts `OPEN_COST`)."""
    chunks = sorted(
        (min(max_split, size - start) for size in sizes for start in range(0, size, max_split)),
        reverse=True,
    )
    tasks: list[int] = []
    filled = 0
    for chunk in chunks:
        if filled and filled + chunk > max_split:
            tasks.append(filled)
            filled = 0
        filled += chunk + OPEN_COST
    if filled:
        tasks.append(filled)
    return tasks


def finish(tasks: Sequence[int], cores: int) -> int:
    """When the last of `tasks` (costs, in the order Spark hands them out) ends on `cores`
    cores, each core taking the next task as soon as it is free."""
    free = [0] * max(1, cores)
    for cost in tasks:
        i = free.index(min(free))
        free[i] += cost
    return max(free)


def best_split(sizes: Sequence[int], cores: int) -> int:
    """The split size (bytes) whose read of files of `sizes` ends first on `cores` cores;
    Spark's default among the candidates, and the default on a tie (then fewer tasks).

    Candidates: the default, the largest file (one task per file), and the total cut
    into k tasks per core (k = 1..8), each at most `LARGEST`."""
    sizes = [s for s in sizes if s > 0]
    if not sizes or cores < 1:
        return SPARK_DEFAULT
    total = sum(sizes) + OPEN_COST * len(sizes)
    candidates = {SPARK_DEFAULT, max(sizes)}
    candidates |= {-(-total // (k * cores)) for k in range(1, 9)}
    candidates = {min(LARGEST, max(OPEN_COST, c)) for c in candidates}

    def cost(split: int) -> tuple[int, int, bool]:
        # What Spark then uses (FilePartition.maxSplitBytes): never more than a core's share.
        tasks = pack(sizes, min(split, max(OPEN_COST, total // cores)))
        return finish([t + TASK_COST for t in tasks], cores), len(tasks), split != SPARK_DEFAULT

    return min(sorted(candidates), key=cost)
