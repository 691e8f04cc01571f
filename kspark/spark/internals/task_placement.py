"""Where the stages' tasks run: the grouping values that spread kspark's tasks evenly over
Spark's shuffle partitions, and which tasks each partition then runs."""

from __future__ import annotations

from typing import Any


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3Hash`` of an ``int`` column value (what ``hash(col)`` and hash
    partitioning compute), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = seed & mask ^ k1
    h1 = (rotl(h1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def task_group_values(tasks: int, partitions: int | None = None) -> list[int]:
    """For each task ``p``, the smallest ``v >= 0`` with ``v % tasks == p`` that Spark's hash
    partitioning into ``partitions`` (default: ``tasks``) shuffle partitions places in
    partition ``p % partitions``.

    Grouping the stages by these values instead of the task number spreads the tasks evenly
    over the shuffle partitions (the task numbers themselves collide: with 4 partitions, tasks
    0, 1 and 3 all hash to partition 3, so one core runs three tasks); the stage
    (:class:`~kspark.spark.internals.stage.StageProcessor`) takes the task back as
    ``key % tasks``."""
    partitions = partitions or tasks
    out = []
    for p in range(tasks):
        v = p
        while spark_hash_int(v) % partitions != p % partitions:
            v += tasks
        out.append(v)
    return out


def partition_tasks(tasks: int, partitions: int, partition: int) -> list[int]:
    """The tasks that shuffle partition ``partition`` of ``partitions`` runs when the stages
    are grouped by :func:`task_group_values`: those ``p`` with ``p % partitions ==
    partition``."""
    return [p for p in range(tasks) if p % partitions == partition]


def task_group_column(partition: Any, tasks: int, partitions: int | None = None) -> Any:
    """The grouping column of the stages: ``partition`` mapped by :func:`task_group_values`
    (other values, if any, unchanged)."""
    from pyspark.sql import functions as F

    values = task_group_values(tasks, partitions)
    mapping = F.create_map(*[F.lit(x) for p, v in enumerate(values) for x in (p, v)])
    return F.coalesce(F.try_element_at(mapping, partition), partition)
