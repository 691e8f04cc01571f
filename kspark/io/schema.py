"""The record layout every kspark source produces (that of Spark's native Kafka source, with the
timestamp in epoch milliseconds) and the layout of the runtime's output rows."""

from __future__ import annotations

import pyarrow as pa

#: columns of every source: a user with Spark's native Kafka connector can pass its DataFrame
INPUT_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp"]
#: (column, Spark type) of :data:`INPUT_COLUMNS`
INPUT_TYPES = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "long"),
    ("timestamp", "long"),
]
INPUT_DDL = ", ".join(f"{c} {t}" for c, t in INPUT_TYPES)
INPUT_ARROW = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
    ]
)

TICK_TOPIC = "__kspark_tick"

#: rows leaving a task: records for sinks and repartition topics, changelog entries, metrics
OUTPUT_DDL = (
    "kind string, topic string, key binary, value binary, timestamp long, "
    "partition int, offset long, task string"
)
KIND_RECORD = "record"
KIND_CHANGELOG = "changelog"
KIND_METRICS = "metrics"
KIND_ERROR = "error"

#: the columns of the output rows a sink writes, and their Arrow schema
SINK_COLUMNS = ["key", "value", "timestamp", "partition"]
SINK_SCHEMA = pa.schema(
    [("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64()),
     ("partition", pa.int32())]
)


def sink_rows(table: pa.Table) -> list[tuple[bytes | None, bytes | None, int, int]]:
    """``(key, value, timestamp, partition)`` tuples of an Arrow table of output rows."""
    return list(zip(*(table.column(c).to_pylist() for c in SINK_COLUMNS)))
