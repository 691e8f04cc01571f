"""What becomes of a micro-batch's output rows: the executors write the records of the sinks
that have a partition writer (Kafka topics, file topics) from the tasks that computed them, and
send the driver only counters; the driver writes the sinks that live with it (memory, Spark
tables and functions), publishes what the executors wrote, and merges the tasks' counters into
the app's metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kspark.errors import StreamsError
from kspark.io.location import PartitionWriter, TopicLocation
from kspark.io.schema import HEADERS_COLUMN, SINK_COLUMNS
from kspark.runtime.metrics import Metrics
from kspark.spark.internals.wire import (
    KIND_CHANGELOG,
    KIND_METRICS,
    KIND_RECORD,
    ROW_ARROW,
    unpack_output,
)

#: counter of the record rows the driver received (zero when every sink is written in place)
DRIVER_RECORDS = "driver.records.received"

#: partition writers and the topics each writes
Writers = list[tuple[PartitionWriter, list[str]]]


def partition_writers(sinks: Mapping[str, TopicLocation]) -> Writers:
    """The sinks' partition writers, each with its topics (topics sharing a writer object are
    written together)."""
    out: dict[int, tuple[PartitionWriter, list[str]]] = {}
    for topic, sink in sinks.items():
        writer = sink.partition_writer()
        if writer is not None:
            out.setdefault(id(writer), (writer, []))[1].append(topic)
    return list(out.values())


def _is_record(table: pa.Table) -> Any:
    kinds = pa.array([KIND_RECORD, KIND_CHANGELOG])
    return pc.fill_null(pc.is_in(table.column("kind"), value_set=kinds), False)


def observe_e2e_latency(metrics: Metrics, topic: str, rows: pa.Table) -> None:
    """:func:`observe_latency` of ``rows`` written to ``topic`` (changelog rows left out)."""
    stamps = rows.filter(pc.equal(rows.column("kind"), KIND_RECORD)).column("timestamp")
    observe_latency(metrics, topic, stamps.to_numpy())


def observe_latency(metrics: Metrics, topic: str, stamps: np.ndarray) -> None:
    """Kafka Streams' ``record-e2e-latency`` of records of timestamps ``stamps`` written to
    ``topic`` (now minus each timestamp, in ms): counters ``e2e-latency-sum:<topic>`` and
    ``e2e-latency-count:<topic>``, maximum and minimum ``e2e-latency:<topic>``."""
    if not len(stamps):
        return
    latency = int(time.time() * 1000) - stamps.astype(np.int64, copy=False)
    metrics.counters[f"e2e-latency-sum:{topic}"] += int(latency.sum())
    metrics.counters[f"e2e-latency-count:{topic}"] += len(latency)
    metrics.observe_max(f"e2e-latency:{topic}", int(latency.max()))
    metrics.observe_min(f"e2e-latency:{topic}", int(latency.min()))


#: the local properties of a micro-batch's Spark jobs naming the batch and the query (Spark's
#: ``MicroBatchExecution.BATCH_ID_KEY`` and ``StreamExecution.QUERY_ID_KEY``)
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def task_micro_batch(batch_id: int | None = None, run: str | None = None
                     ) -> tuple[int, str, int]:
    """In a Spark task: the micro-batch and run (the query's id) it computes, ``batch_id`` and
    ``run`` if given, else as Spark names them for a micro-batch's own jobs, and the task's
    partition."""
    from pyspark import TaskContext

    context = TaskContext.get()
    batch, query = batch_id, run
    if context is not None and batch is None:
        found = context.getLocalProperty(BATCH_ID_PROPERTY)
        batch = None if found is None else int(found)
    if context is not None and query is None:
        query = context.getLocalProperty(QUERY_ID_PROPERTY)
    if context is None or batch is None or query is None:
        raise StreamsError("kspark's sink writers run only in a task of a micro-batch of a "
                           "streaming query (Spark names the batch and the query there)")
    return batch, query, context.partitionId()


def write_in_tasks(writers: Writers, batch_id: int | None = None, run: str | None = None
                   ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function over the stages' output rows that writes each Spark
    partition's records of the ``writers``' topics from its task and passes on the other rows,
    with a ``metrics`` row of what it wrote. The micro-batch and its run (the query's id) are
    ``batch_id`` and ``run``, or if not given the task's (Spark gives them to the jobs a
    micro-batch runs itself, as a streaming query's own)."""

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batch, query, partition = task_micro_batch(batch_id, run)
        for writer, _ in writers:  # while the stage computes the records
            writer.begin(batch, query, partition)
        metrics = Metrics()
        written: list[str] = []
        try:
            table = unpack_output(pa.Table.from_batches(list(batches), schema=ROW_ARROW))
            records = _is_record(table)
            topics = table.column("topic")
            for writer, names in writers:
                tables = {}
                for name in names:
                    rows = table.filter(pc.and_(records, pc.equal(topics, name)))
                    if rows.num_rows:
                        tables[name] = rows.select(
                            [*SINK_COLUMNS, HEADERS_COLUMN] if writer.takes_headers
                            else SINK_COLUMNS)
                        observe_e2e_latency(metrics, name, rows)
                if tables:
                    metrics.merge(writer.write(batch, query, partition, tables))
                written.extend(names)
        finally:
            for writer, _ in writers:
                writer.end()
        mine = pc.fill_null(pc.is_in(topics, value_set=pa.array(written, pa.string())), False)
        rest = table.filter(pc.invert(pc.and_(records, mine)))
        yield from rest.to_batches()
        if metrics.has_figures():
            yield pa.RecordBatch.from_pylist([{
                "kind": KIND_METRICS, "value": metrics.to_json(),
                "timestamp": -1, "partition": partition, "offset": -1,
            }], schema=ROW_ARROW)

    return write_partition


def write_batch(table: pa.Table, batch_id: int, sinks: Mapping[str, TopicLocation],
                writers: Writers, run: str) -> dict[str, Metrics]:
    """On the driver, with the rows the tasks passed on (:data:`~.wire.ROW_COLUMNS`, packed
    rows included): write the records of each sink without a partition writer, publish each
    partition writer's batch, commit each location once for ``batch_id`` of run ``run``.
    Returns the batch's figures by task id (``""``: the sinks' writers and the driver)."""
    table = unpack_output(table)
    records = table.filter(_is_record(table))
    driver_sinks = {t: s for t, s in sinks.items() if s.partition_writer() is None}
    figures: dict[str, Metrics] = {"": Metrics()}
    for topic in pc.unique(records.column("topic")).to_pylist():
        if topic not in driver_sinks:
            raise StreamsError(
                f"batch {batch_id}: records for topic {topic!r} which has no sink location"
            )
    topic_column = records.column("topic")
    for topic, sink in driver_sinks.items():
        rows = records.filter(pc.equal(topic_column, topic))
        sink.write_table(batch_id, rows.select(SINK_COLUMNS))
        observe_e2e_latency(figures[""], topic, rows)
    for writer, _ in writers:
        writer.publish(batch_id, run)
    for sink in {id(s): s for s in sinks.values()}.values():
        sink.commit_batch(batch_id, run)
    figures[""].merge({DRIVER_RECORDS: records.num_rows})
    rows = table.filter(pc.fill_null(pc.equal(table.column("kind"), KIND_METRICS), False))
    for task, value in zip(rows.column("task").to_pylist(), rows.column("value").to_pylist()):
        figures.setdefault(task or "", Metrics()).merge_all(Metrics.from_json(value))
    return figures
