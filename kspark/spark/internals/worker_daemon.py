"""Spark's Python worker daemon (``spark.python.daemon.module``) with the modules of kspark's
stages imported once, before it forks its workers.

Spark's own daemon (``pyspark.daemon``) forks a worker per task slot, and each worker then
imports pandas, pyarrow and kspark when it unpickles its first function: a second or more of
CPU per worker, on every executor, paid again whenever a worker is replaced. Imported here, the
forked workers share them. The daemon then runs as Spark's does.

Its workers collect garbage less often than Python's default (:data:`GC_THRESHOLD`): a
micro-batch creates its tasks' state and records by the hundred thousand objects, few of them
in reference cycles, and the default (a young collection every 700 allocations, which
sometimes become full ones) spends a noticeable share of a task's CPU on them
(docs/performance.md, "Ten million keys").
"""

from __future__ import annotations

import gc

#: the workers' garbage collection thresholds (``gc.set_threshold``)
GC_THRESHOLD = (200_000, 20, 100)


def preload() -> None:
    """Import what the stages' workers use (their functions unpickle against these)."""
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.worker  # noqa: F401

    import kspark.spark.internals.batch_output
    import kspark.spark.internals.file_source
    import kspark.spark.internals.kafka_source
    import kspark.spark.internals.stage_rows  # noqa: F401


def main() -> None:
    from pyspark.daemon import manager

    preload()
    gc.freeze()  # the imported objects stay shared with the workers (no copy-on-write by gc)
    gc.set_threshold(*GC_THRESHOLD)  # inherited by the forked workers
    manager()


if __name__ == "__main__":
    main()
