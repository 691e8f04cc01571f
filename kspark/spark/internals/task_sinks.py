"""The sink topics a stage writes itself: each kspark task's records of them (and of its stores'
changelogs), right after the task ran, through their :class:`~kspark.io.location.TaskWriter`
(for Kafka: one transaction per task and batch, the unit Kafka Streams' tasks commit in),
instead of passing them on as rows to a writer in the query's last stage. Spark then converts
no row of them, the query needs no writer worker for them, and each task's output is visible as
soon as the task is done rather than when the last task of its Spark task is."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kspark.io.location import TaskWriter, TopicLocation
from kspark.runtime.metrics import Metrics
from kspark.spark.internals.batch_output import (
    observe_latency,
    partition_writers,
    task_micro_batch,
)
from kspark.spark.internals.task_placement import partition_tasks
from kspark.topology.internals.plan import ExecutionPlan
from kspark.topology.topology import Topology

#: a topic's records as a task writer takes them: ``(key, value, timestamp, partition,
#: headers)``
Rows = list[tuple[Any, Any, int, int, Any]]
#: records a task writer is given at a time: a topic's rows are made as it takes them, so that
#: a large batch never exists as row tuples all at once
CHUNK = 20_000


@dataclass
class TopicRecords:
    """A task's records of one topic: their timestamps, and the rows a writer takes one list
    at a time (made as it takes them, once)."""

    stamps: Sequence[int]
    chunks: Iterable[Rows]

    def __len__(self) -> int:
        return len(self.stamps)


def chunked(count: int, make: Callable[[int, int], Rows]) -> Iterator[Rows]:
    """``make(start, stop)`` for the records ``0`` to ``count``, :data:`CHUNK` at a time."""
    for start in range(0, count, CHUNK):
        yield make(start, min(start + CHUNK, count))


class TaskSinks:
    """The task writers of a stage and the topics each writes (pickled with the stage)."""

    def __init__(self, writers: Sequence[tuple[TaskWriter, Collection[str]]]) -> None:
        self.writers = [(writer, frozenset(topics)) for writer, topics in writers]
        #: every topic the stage writes itself
        self.topics = frozenset(t for _, topics in self.writers for t in topics)
        self._batch: tuple[int, str] | None = None
        #: (task, writer index) of the writes begun and not ended by a final write
        self._begun: set[tuple[str, int]] = set()

    def for_stage(self, sub: Any, changelogs: Mapping[str, str], dead_letter_topic: str | None,
                  topic_extractors: bool) -> TaskSinks | None:
        """These sinks, for a stage of sub-topology ``sub`` that may write to some of them (its
        sinks, its stores' changelogs, the dead-letter topic, a topic extractor's choice)."""
        written = {*sub.sink_topics, *(changelogs[s] for s in sub.stores if s in changelogs)}
        if dead_letter_topic:
            written.add(dead_letter_topic)
        return self if topic_extractors or written & self.topics else None

    def open(self, tasks: Collection[str]) -> None:
        """Before ``tasks`` run (the tasks of a Spark task, or one of them): their writers
        start opening, in threads (a task's once)."""
        batch, run, _ = task_micro_batch()
        self._batch = (batch, run)
        for writer, _ in self.writers:
            for task in tasks:
                writer.open_task(batch, run, task)

    def write(self, task: str, records: Mapping[str, TopicRecords],
              changelogs: Mapping[str, TopicRecords], metrics: Metrics,
              final: bool = True) -> None:
        """Write the task's ``records`` and ``changelogs`` (by topic), each writer's in one
        transaction (ended by the ``final`` write of the task's batch), and count what was
        written (and the records' end-to-end latency) in ``metrics``."""
        if self._batch is None:
            raise RuntimeError("TaskSinks.write before open")
        batch, run = self._batch
        for topic, rows in records.items():
            observe_latency(metrics, topic, np.asarray(rows.stamps, dtype=np.int64))
        for i, (writer, topics) in enumerate(self.writers):
            mine = {t: rows.chunks for part in (records, changelogs) for t, rows in part.items()
                    if t in topics and len(rows)}
            begun = (task, i) in self._begun
            if mine or (final and begun):
                metrics.merge(writer.write_task(batch, run, task, mine, final))
                if final:
                    self._begun.discard((task, i))
                elif not begun:
                    self._begun.add((task, i))

    def abort(self, task: str) -> None:
        """Forget what task ``task`` wrote of its batch so far: it runs the batch again."""
        for i, (writer, _) in enumerate(self.writers):
            if (task, i) in self._begun:
                self._begun.discard((task, i))
                writer.abort_task(task)

    @contextmanager
    def running(self, task: str) -> Iterator[None]:
        """While task ``task`` runs: its writers open (if not opened ahead), and are closed
        after it, written with or not."""
        self.open([task])
        try:
            yield
        finally:
            self.close(task)

    def close(self, task: str) -> None:
        """After task ``task``, written or not."""
        self._begun = {begun for begun in self._begun if begun[0] != task}
        for writer, _ in self.writers:
            writer.close_task(task)

    def close_all(self) -> None:
        """When the Spark task ends: what was opened for tasks that did not run is closed."""
        self._batch = None
        self._begun = set()
        for writer, _ in self.writers:
            writer.close_tasks()

    def split(self, topics: list[str], keys: list[Any], values: list[Any], stamps: list[int],
              partitions: list[int], headers: list[Any] | None
              ) -> tuple[dict[str, TopicRecords], np.ndarray]:
        """The records of the topics written here, by topic in output order, and the mask of
        the other records."""
        names = pd.Series(topics, dtype=object)
        mine = names.isin(self.topics).to_numpy(dtype=bool)
        if not mine.any():
            return {}, ~mine
        out: dict[str, TopicRecords] = {}
        for topic in pd.unique(names[mine]):
            idx = np.flatnonzero((names == topic).to_numpy()).tolist()

            def rows(start: int, stop: int, idx: list[int] = idx) -> Rows:
                return [(keys[i], values[i], stamps[i], partitions[i],
                         list(headers[i]) if headers is not None and headers[i] else None)
                        for i in idx[start:stop]]

            out[str(topic)] = TopicRecords([stamps[i] for i in idx], chunked(len(idx), rows))
        return out, ~mine


def stage_sinks(sinks: Mapping[str, TopicLocation], topology: Topology, plan: ExecutionPlan,
                spark_partitions: int) -> tuple[TaskSinks | None, dict[str, TopicLocation]]:
    """The sinks the stages write themselves (those with a :class:`TaskWriter` that no stage
    reads: a record of a topic a stage reads travels on as a row), with every task's writer
    taken over from an earlier instance of the app, and the other sinks."""
    read = {t for sub in topology.sub_topologies() for t in sub.source_topics}
    writers = []
    for writer, topics in partition_writers(sinks):
        if isinstance(writer, TaskWriter):
            own = [t for t in topics if t not in read]
            if own:
                writers.append((writer, own))
    if not writers:
        return None, dict(sinks)
    tasks = {f"{sub.id}_{p}": q for sub in plan.stages for q in range(spark_partitions)
             for p in partition_tasks(plan.tasks, spark_partitions, q)}
    for writer, _ in writers:
        writer.take_over(tasks)
    out = TaskSinks(writers)
    return out, {t: s for t, s in sinks.items() if t not in out.topics}
