"""One micro-batch of one task, independent of Spark.

The Spark stage calls :func:`run_task_batch` with a :class:`TaskStateBackend` over Spark state;
tests call it with :class:`DictTaskState`. Per batch: restore the task's state, build its
processors and stores (buckets load lazily), process the records in order with stream-time
punctuation after each, fire due wall-clock punctuations, commit (flush caches), write back the
dirty buckets and the task's state.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from kspark.config import StreamsConfig
from kspark.runtime.changelog_entries import ChangelogEntries
from kspark.runtime.durable_state import DictTaskState, TaskStateBackend
from kspark.runtime.metrics import Metrics
from kspark.runtime.spill import SpillingState
from kspark.runtime.task import (
    FastPathAborted,
    Output,
    OutputRecord,
    SourceBatch,
    SourceRecord,
    Task,
    output_columns,
    output_count,
    output_records,
)
from kspark.topology.topology import SubTopology, Topology

__all__ = ["BatchResult", "DictTaskState", "TaskStateBackend", "run_task_batch", "wall_clock_now"]

log = logging.getLogger("kspark.runtime")

#: the causes of fast-path aborts already logged as a warning (each once per process)
_WARNED: set[str] = set()


def _log_abort(aborted: FastPathAborted, records: int) -> None:
    """Log that a batch runs again record by record: a warning the first time for its cause
    (the exception's type, or the reason a processor declined), DEBUG after that."""
    cause = aborted.__cause__
    reason = type(cause).__name__ if cause is not None else str(aborted).split(": ", 1)[-1]
    first = reason not in _WARNED
    _WARNED.add(reason)
    log.log(logging.WARNING if first else logging.DEBUG,
            "%s; the batch of %d records runs again record by record%s", aborted, records,
            " (later aborts of this cause are logged at DEBUG)" if first else "")


@dataclass
class BatchResult:
    #: what the task wrote, in order (see :attr:`output` and :meth:`output_columns`)
    parts: Output
    changelog: dict[str, ChangelogEntries]
    metrics: Metrics
    first_output_seq: int
    #: records handled by a processor's vectorised batch path (the rest: record by record)
    fast_records: int = 0

    @property
    def output(self) -> list[OutputRecord]:
        """Every record written, in order."""
        return output_records(self.parts)

    def output_columns(
        self,
    ) -> tuple[list[str], list[bytes | None], list[bytes | None], list[int]]:
        """Topic, key, value and timestamp of every record written, as columns."""
        return output_columns(self.parts)


def wall_clock_now() -> int:
    return int(time.time() * 1000)


def _touches_most_buckets(batch: SourceBatch, buckets: int) -> bool:
    """Whether the batch's keys are likely to touch most of each store's ``buckets``: at least
    twice as many distinct keys among its first records (which touch about 86 % of them when
    the stores are keyed by the records' keys)."""
    wanted = 2 * buckets
    if len(batch.keys) < wanted:
        return False
    seen: set[Any] = set()
    for key in batch.keys[: 64 * buckets].tolist():
        seen.add(key)
        if len(seen) >= wanted:
            return True
    return False


def run_task_batch(
    topology: Topology,
    sub: SubTopology,
    partition: int,
    records: Iterable[SourceRecord] | SourceBatch,
    state: TaskStateBackend,
    config: StreamsConfig,
    wall_clock: Callable[[], int] = wall_clock_now,
    *,
    fast_path: bool = True,
    changelog_stores: Collection[str] | None = None,
) -> BatchResult:
    """Run one batch of ``records`` (already in processing order) through one task.

    A :class:`SourceBatch` may be handled by a processor's vectorised path (``fast_path``),
    which gives exactly the record-by-record results; if that path fails, the batch is rerun
    record by record from the durable state. ``changelog_stores`` limits the changelog entries
    kept to those stores (``None``: all)."""
    saved = state.get_meta()
    previous = pickle.loads(saved) if saved is not None else {}
    spilling = SpillingState(state) if config.state_buckets_in_memory is not None else None
    if spilling is not None:
        state = spilling

    def new_task(metrics: Metrics) -> Task:
        task = Task(
            topology,
            sub,
            partition,
            config=config,
            metrics=metrics,
            wall_clock=wall_clock,
            loader=state,
            changelog_stores=changelog_stores,
            spill=spilling,
        )
        task.restore_state(previous)
        task.init()
        return task

    if isinstance(records, SourceBatch) and _touches_most_buckets(records, config.state_buckets):
        state.prefetch()
    metrics = Metrics()
    task = new_task(metrics)
    fast = 0
    try:
        if isinstance(records, SourceBatch):
            try:
                fast = task.process_batch(records, fast=fast_path)
            except FastPathAborted as aborted:
                _log_abort(aborted, len(records))
                if spilling is not None:
                    spilling.discard()
                metrics = Metrics()
                task = new_task(metrics)
                fast = task.process_batch(records, fast=False)
        else:
            for rec in records:
                task.process(rec)
                task.punctuate_stream_time()
        task.punctuate_wall_clock()
        task.maybe_close_idle()
        task.commit()
        output = task.drain_output_parts()
        for store in task.stores.values():
            for bucket, data in store.dirty_buckets().items():
                state.save_bucket(
                    store.name, bucket, None if data is None else pickle.dumps(data, protocol=5)
                )
            store.clear_dirty()
        if spilling is not None:
            if spilling.spills:
                metrics.merge({"state-buckets-spilled": spilling.spills})
            spilling.write_spilled()
    finally:
        if spilling is not None:
            spilling.discard()
    seq = previous.get("output_seq", 0)
    new_state = task.checkpoint_state()
    new_state["output_seq"] = seq + output_count(output)
    state.set_meta(pickle.dumps(new_state, protocol=5))
    return BatchResult(output, task.drain_changelog(), metrics, seq, fast)
