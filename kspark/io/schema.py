"""The layout of the records a sink writes: what every topic location's ``write_table`` gets.

(The rows between kspark's stages on Spark are :mod:`kspark.spark.internals.wire`'s.)"""

from __future__ import annotations

import pyarrow as pa

#: the columns of the output rows a sink writes, and their Arrow schema
SINK_COLUMNS = ["key", "value", "timestamp", "partition"]
SINK_SCHEMA = pa.schema(
    [("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64()),
     ("partition", pa.int32())]
)


def sink_rows(table: pa.Table) -> list[tuple[bytes | None, bytes | None, int, int]]:
    """``(key, value, timestamp, partition)`` tuples of an Arrow table of output rows."""
    return list(zip(*(table.column(c).to_pylist() for c in SINK_COLUMNS)))
