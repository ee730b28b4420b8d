"""The split-size choice for capture reads: Spark's packing replayed, and a size that
never finishes later than Spark's default in that replay."""

from __future__ import annotations

import random

from ticdc_sync.spark.transports.splits import (
    MIB,
    OPEN_COST,
    SPARK_DEFAULT,
    best_split,
    finish,
    pack,
)


def test_packing_replays_spark_on_the_benchmark_layout():
    # Six 145 MB files at 128 MiB: six full chunks, then the six tails in one task.
    sizes = [145_000_000] * 6
    tasks = pack(sizes, SPARK_DEFAULT)
    assert len(tasks) == 7
    assert tasks[:6] == [SPARK_DEFAULT + OPEN_COST] * 6
    assert tasks[6] == 6 * (145_000_000 - SPARK_DEFAULT + OPEN_COST)


def test_cores_take_tasks_in_order_as_they_free_up():
    assert finish([10, 10, 10], 2) == 20
    assert finish([10, 1, 1, 1], 2) == 10
    assert finish([5], 4) == 5


def test_the_lone_last_wave_is_avoided_with_one_task_per_file():
    sizes = [145_000_000] * 6
    split = best_split(sizes, 2)
    tasks = pack(sizes, split)
    assert len(tasks) == 6
    assert finish(tasks, 2) < finish(pack(sizes, SPARK_DEFAULT), 2)


def test_the_default_stays_where_it_is_already_best():
    assert best_split([SPARK_DEFAULT] * 4, 2) == SPARK_DEFAULT
    assert best_split([3 * MIB], 8) == SPARK_DEFAULT
    assert best_split([], 2) == SPARK_DEFAULT


def test_the_choice_never_finishes_later_than_the_default():
    rng = random.Random(7)
    for _ in range(300):
        sizes = [rng.randint(1, 400 * MIB) for _ in range(rng.randint(1, 40))]
        cores = rng.choice([1, 2, 3, 4, 8, 16])
        share = max(OPEN_COST, (sum(sizes) + OPEN_COST * len(sizes)) // cores)

        def end(split: int, sizes=sizes, cores=cores, share=share) -> int:
            return finish(pack(sizes, min(split, share)), cores)

        chosen = best_split(sizes, cores)
        # Within the per-task cost the choice also weighs (4 MiB a task).
        slack = 4 * MIB * len(pack(sizes, min(chosen, share)))
        assert end(chosen) <= end(SPARK_DEFAULT) + slack, (sizes, cores)
        assert chosen <= SPARK_DEFAULT * 5 // 4
