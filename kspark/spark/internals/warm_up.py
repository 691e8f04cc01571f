"""Python workers started while the driver plans an app's first micro-batch.

A Spark session's first stage that runs Python starts the executors' Python worker daemon and
forks its workers, which import pandas, pyarrow and kspark: seconds of work, on cores that sit
idle while the driver loads the app's sources and plans its query. ``StreamsApp.start`` hands
that work to a small job of its own on a thread of its own, once per SparkContext, so that the
query's first stages find the workers running (docs/performance.md, "Kafka end to end").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

#: the job group of the job that starts the workers
JOB_GROUP = "kspark-python-workers"

#: application ids of the SparkContexts whose workers have been started this way
_started: set[str] = set()
_lock = threading.Lock()


def start_python_workers(spark: Any) -> threading.Thread | None:
    """Start a Python worker on each of the session's task slots, with the code of kspark's
    stages imported, from a job run on a daemon thread; the first call for a SparkContext does
    it, later calls return ``None``. A failure is logged: the query then starts its workers
    itself."""
    sc = spark.sparkContext
    with _lock:
        if sc.applicationId in _started:
            return None
        _started.add(sc.applicationId)
    slots = max(1, int(sc.defaultParallelism))

    def run() -> None:
        try:
            sc.setJobGroup(JOB_GROUP, "kspark: start the Python workers", interruptOnCancel=True)
            sc.parallelize(range(slots), slots).foreachPartition(_import_stage_code)
        except Exception as exc:
            log.info("starting the Python workers ahead of the query failed (the query starts "
                     "them itself): %s", exc)

    thread = threading.Thread(target=run, name=JOB_GROUP, daemon=True)
    thread.start()
    return thread


def _import_stage_code(rows: Iterable[Any]) -> None:
    from kspark.spark.internals.worker_daemon import preload

    preload()
