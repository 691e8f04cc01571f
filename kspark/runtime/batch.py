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
from typing import Any, Protocol

import numpy as np

from kspark.config import StreamsConfig
from kspark.runtime.changelog_entries import ChangelogEntries
from kspark.runtime.durable_state import DictTaskState, TaskStateBackend
from kspark.runtime.metrics import LATENESS_COUNT, LATENESS_MAX, LATENESS_SUM, Metrics
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


class SliceOutput(Protocol):
    """Where a task's output and changelog go after each slice of a batch but the last
    (``task.batch.max.records``): the Spark stage writes its sink topics' records into the
    task's open transaction at once, so that they are not held until the batch ends."""

    def write(self, output: Output, changelog: dict[str, ChangelogEntries]
              ) -> tuple[Output, dict[str, ChangelogEntries]]:
        """Take a slice's committed output and changelog entries; returns those it did not
        take, which stay in the batch's result."""

    def restart(self) -> None:
        """Forget everything taken so far: the batch runs again from its durable state."""


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


class _Kept:
    """The output and changelog entries of a batch's slices that its :class:`SliceOutput` did
    not take, in order."""

    def __init__(self) -> None:
        self.output: Output = []
        self.changelog: dict[str, ChangelogEntries] = {}

    def add(self, output: Output, changelog: dict[str, ChangelogEntries]) -> None:
        self.output.extend(output)
        for store, entries in changelog.items():
            kept = self.changelog.get(store)
            if kept is None:
                self.changelog[store] = entries
            else:
                kept.extend(entries)


def _process_batch(task: Task, records: SourceBatch, fast: bool, most: int | None,
                   sliced: SliceOutput | None, kept: _Kept) -> int:
    """:meth:`Task.process_batch` of ``records``, at most ``most`` at a time: each slice but
    the last is committed (its cached changes forwarded and logged) and its output and
    changelog handed to ``sliced`` (those it leaves go into ``kept``); the stores stay in
    memory, and the state is written once, after the batch."""
    n = len(records)
    if most is None or n <= most:
        return task.process_batch(records, fast=fast)
    handled = 0
    for start in range(0, n, most):
        handled += task.process_batch(records.slice(start, min(start + most, n)), fast=fast)
        if start + most < n:
            task.commit()
            output, changelog = task.drain_output_parts(), task.drain_changelog()
            if sliced is not None:
                output, changelog = sliced.write(output, changelog)
            kept.add(output, changelog)
    return handled


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


def _observe_lateness(metrics: Metrics, stream_time: int, timestamps: Any) -> None:
    """Kafka Streams' ``record-lateness`` of each record (stream time before it minus its
    timestamp, 0 when it advances stream time), records with a negative timestamp left out."""
    ts = np.asarray(timestamps, dtype=np.int64)
    ts = ts[ts >= 0]
    if not len(ts):
        return
    before = np.maximum.accumulate(np.concatenate(([stream_time], ts[:-1])))
    lateness = np.maximum(before - ts, 0)
    metrics.counters[LATENESS_SUM] += int(lateness.sum())
    metrics.counters[LATENESS_COUNT] += len(lateness)
    metrics.observe_max(LATENESS_MAX, float(lateness.max()))


#: the task state's entry with each store's buckets' entry counts and sizes in bytes
_STORE_SIZES = "store_sizes"


#: store -> bucket -> entries and bytes of what a batch wrote (``None``: deleted)
_Written = dict[str, dict[int, tuple[int, int] | None]]


def _store_sizes(task: Task, previous: dict[str, Any], written: _Written,
                 metrics: Metrics) -> dict[str, dict[int, tuple[int, int]]]:
    """Each store's buckets' entries and bytes after this batch, with gauges
    ``estimate-num-keys:<store>`` and ``state-bytes:<store>``."""
    sizes: dict[str, dict[int, tuple[int, int]]] = previous.get(_STORE_SIZES, {})
    for name in task.stores:
        buckets = sizes.setdefault(name, {})
        for bucket, size in written.get(name, {}).items():
            if size is None:
                buckets.pop(bucket, None)
            else:
                buckets[bucket] = size
        metrics.gauges[f"estimate-num-keys:{name}"] = sum(n for n, _ in buckets.values())
        metrics.gauges[f"state-bytes:{name}"] = sum(b for _, b in buckets.values())
    return sizes


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
    sliced: SliceOutput | None = None,
) -> BatchResult:
    """Run one batch of ``records`` (already in processing order) through one task.

    A :class:`SourceBatch` may be handled by a processor's vectorised path (``fast_path``),
    which gives exactly the record-by-record results; if that path fails, the batch is rerun
    record by record from the durable state. ``changelog_stores`` limits the changelog entries
    kept to those stores (``None``: all). A :class:`SourceBatch` longer than
    ``task.batch.max.records`` runs in slices, each committed, whose output and changelog go
    to ``sliced`` as each slice ends."""
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
        if spilling is not None:
            spilling.entry_counts = {n: s.bucket_entries for n, s in task.stores.items()}
        return task

    if isinstance(records, SourceBatch) and _touches_most_buckets(records, config.state_buckets):
        state.prefetch()
    metrics = Metrics()
    task = new_task(metrics)
    fast = 0
    written: _Written = {}
    most = config.task_batch_max_records
    kept = _Kept()
    try:
        if isinstance(records, SourceBatch):
            stream_time = task.stream_time
            try:
                fast = _process_batch(task, records, fast_path, most, sliced, kept)
            except FastPathAborted as aborted:
                _log_abort(aborted, len(records))
                if spilling is not None:
                    spilling.discard()
                if sliced is not None:
                    sliced.restart()
                metrics, kept = Metrics(), _Kept()
                task = new_task(metrics)
                fast = _process_batch(task, records, False, most, sliced, kept)
            _observe_lateness(metrics, stream_time, records.timestamps)
        else:
            stamps = []
            stream_time = task.stream_time
            for rec in records:
                stamps.append(rec.timestamp)
                task.process(rec)
                task.punctuate_stream_time()
            _observe_lateness(metrics, stream_time, stamps)
        task.punctuate_wall_clock()
        task.maybe_close_idle()
        task.commit()
        kept.add(task.drain_output_parts(), task.drain_changelog())
        output = kept.output
        for store in task.stores.values():
            sizes = written[store.name] = {}
            for bucket, data in store.dirty_buckets().items():
                packed = None if data is None else pickle.dumps(data, protocol=5)
                state.save_bucket(store.name, bucket, packed)
                sizes[bucket] = (None if data is None
                                 else (store.bucket_entries(data), len(packed or b"")))
            store.clear_dirty()
        if spilling is not None:
            if spilling.spills:
                metrics.merge({"state-buckets-spilled": spilling.spills})
            for (name, bucket), size in spilling.write_spilled().items():
                written.setdefault(name, {})[bucket] = size
    finally:
        if spilling is not None:
            spilling.discard()
    seq = previous.get("output_seq", 0)
    new_state = task.checkpoint_state()
    new_state["output_seq"] = seq + output_count(output)
    new_state[_STORE_SIZES] = _store_sizes(task, previous, written, metrics)
    state.set_meta(pickle.dumps(new_state, protocol=5))
    result = BatchResult(output, kept.changelog, metrics, seq, fast)
    # the task refers to itself (its processors' contexts): the buckets its stores loaded
    # would otherwise wait for the garbage collector, a full collection of them all
    for store in task.stores.values():
        store.unload()
    return result
