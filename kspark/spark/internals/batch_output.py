"""What the driver does with a micro-batch's output rows: each sink topic's records to its
location, one commit per location, and the tasks' counters merged into the app's metrics."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from kspark.errors import StreamsError
from kspark.io.location import TopicLocation
from kspark.io.schema import SINK_COLUMNS
from kspark.runtime.metrics import Metrics
from kspark.spark.internals.wire import KIND_CHANGELOG, KIND_METRICS, KIND_RECORD, unpack_output


def write_batch(table: pa.Table, batch_id: int, sinks: Mapping[str, TopicLocation],
                run_id: Callable[[], str]) -> Metrics:
    """Write the records of the stages' output ``table`` (:data:`~.wire.ROW_COLUMNS`, packed
    rows included) to ``sinks`` (topic -> location) and commit each location once for
    ``batch_id`` of run ``run_id()``. Returns the tasks' counters of the batch."""
    table = unpack_output(table)
    kinds = table.column("kind")
    is_record = pc.is_in(kinds, value_set=pa.array([KIND_RECORD, KIND_CHANGELOG]))
    records = table.filter(pc.fill_null(is_record, False))
    for topic in pc.unique(records.column("topic")).to_pylist():
        if topic not in sinks:
            raise StreamsError(
                f"batch {batch_id}: records for topic {topic!r} which has no sink location"
            )
    topic_column = records.column("topic")
    for topic, sink in sinks.items():
        sink.write_table(batch_id, records.filter(pc.equal(topic_column, topic))
                         .select(SINK_COLUMNS))
    run = run_id()
    for sink in {id(s): s for s in sinks.values()}.values():
        sink.commit_batch(batch_id, run)
    metrics = Metrics()
    is_metrics = pc.fill_null(pc.equal(kinds, KIND_METRICS), False)
    for value in table.filter(is_metrics).column("value").to_pylist():
        metrics.merge(json.loads(value))
    return metrics
