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

A worker gives the memory its task freed back to the system when the task ends
(:func:`release_memory`): a worker Spark keeps for later tasks would otherwise hold its largest
task's heap while the other stages' workers run (docs/performance.md, "Where kspark's memory
goes"). The task's output reaches the JVM before that: the task ends there without waiting
for the release (docs/performance.md, "The sessions job at 5 k clicks a second, taken apart").
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable
from typing import Any

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


def release_memory() -> None:
    """Collect the garbage a task left and give the free memory of the C heap (``malloc_trim``)
    and of pyarrow's memory pool back to the system."""
    import pyarrow

    gc.collect()
    pyarrow.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _releasing(task: Callable[..., Any]) -> Callable[..., Any]:
    """``task`` (``pyspark.worker.main(infile, outfile)``: one task) followed by
    :func:`release_memory` (a task that fails ends its worker, ``SystemExit``). The task's last
    output (its end-of-stream mark, which Spark's daemon flushes only when ``main`` returns)
    goes to the JVM first: the task ends there without waiting for the release."""

    def run_task(infile: Any, outfile: Any) -> Any:
        result = task(infile, outfile)
        outfile.flush()
        release_memory()
        return result

    return run_task


def _libc() -> Any:
    """glibc (which has ``malloc_trim``), or None on a system without it."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def main() -> None:
    import pyspark.worker
    from pyspark.daemon import manager

    preload()
    pyspark.worker.main = _releasing(pyspark.worker.main)  # the daemon calls it per task
    gc.freeze()  # the imported objects stay shared with the workers (no copy-on-write by gc)
    gc.set_threshold(*GC_THRESHOLD)  # inherited by the forked workers
    manager()


if __name__ == "__main__":
    main()
