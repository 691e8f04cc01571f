"""What becomes of a micro-batch's output rows: the executors write the records of the sinks
that have a partition writer (Kafka topics, file topics) from the tasks that computed them, and
send the driver only counters; the driver writes the sinks that live with it (memory, Spark
tables and functions), publishes what the executors wrote, and merges the tasks' counters into
the app's metrics."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kspark.errors import StreamsError
from kspark.io.location import PartitionWriter, TopicLocation
from kspark.io.schema import SINK_COLUMNS
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


def write_in_tasks(writers: Writers, batch_id: int, run: str
                   ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function over the stages' output rows that writes each Spark
    partition's records of the ``writers``' topics from its task and passes on the other rows,
    with a ``metrics`` row of what it wrote."""

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        for writer, _ in writers:  # while the stage computes the records
            writer.begin(batch_id, run, partition)
        counters: Counter[str] = Counter()
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
                        tables[name] = rows.select(SINK_COLUMNS)
                if tables:
                    counters.update(writer.write(batch_id, run, partition, tables))
                written.extend(names)
        finally:
            for writer, _ in writers:
                writer.end()
        mine = pc.fill_null(pc.is_in(topics, value_set=pa.array(written, pa.string())), False)
        rest = table.filter(pc.invert(pc.and_(records, mine)))
        yield from rest.to_batches()
        if counters:
            yield pa.RecordBatch.from_pylist([{
                "kind": KIND_METRICS, "value": json.dumps(dict(counters)).encode(),
                "timestamp": -1, "partition": partition, "offset": -1,
            }], schema=ROW_ARROW)

    return write_partition


def write_batch(table: pa.Table, batch_id: int, sinks: Mapping[str, TopicLocation],
                writers: Writers, run: str) -> Metrics:
    """On the driver, with the rows the tasks passed on (:data:`~.wire.ROW_COLUMNS`, packed
    rows included): write the records of each sink without a partition writer, publish each
    partition writer's batch, commit each location once for ``batch_id`` of run ``run``.
    Returns the tasks' counters of the batch."""
    table = unpack_output(table)
    records = table.filter(_is_record(table))
    driver_sinks = {t: s for t, s in sinks.items() if s.partition_writer() is None}
    for topic in pc.unique(records.column("topic")).to_pylist():
        if topic not in driver_sinks:
            raise StreamsError(
                f"batch {batch_id}: records for topic {topic!r} which has no sink location"
            )
    topic_column = records.column("topic")
    for topic, sink in driver_sinks.items():
        sink.write_table(batch_id, records.filter(pc.equal(topic_column, topic))
                         .select(SINK_COLUMNS))
    for writer, _ in writers:
        writer.publish(batch_id, run)
    for sink in {id(s): s for s in sinks.values()}.values():
        sink.commit_batch(batch_id, run)
    metrics = Metrics()
    metrics.merge({DRIVER_RECORDS: records.num_rows})
    is_metrics = pc.fill_null(pc.equal(table.column("kind"), KIND_METRICS), False)
    for value in table.filter(is_metrics).column("value").to_pylist():
        metrics.merge(json.loads(value))
    return metrics
