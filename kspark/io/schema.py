"""The layout of the records a sink writes: what every topic location's ``write_table`` gets.

(The rows between kspark's stages on Spark are :mod:`kspark.spark.internals.wire`'s.)"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from typing import Any

import pyarrow as pa

#: the columns of the output rows a sink writes, and their Arrow schema
SINK_COLUMNS = ["key", "value", "timestamp", "partition"]
SINK_SCHEMA = pa.schema(
    [("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64()),
     ("partition", pa.int32())]
)


#: the column of each output record's headers that a writer of headers
#: (:attr:`~kspark.io.location.PartitionWriter.takes_headers`) gets too: the bytes of
#: :func:`kspark.records.encode_headers`, null for none
HEADERS_COLUMN = "headers"


def sink_rows(table: pa.Table) -> list[tuple[bytes | None, bytes | None, int, int]]:
    """``(key, value, timestamp, partition)`` tuples of an Arrow table of output rows."""
    return list(zip(*(table.column(c).to_pylist() for c in SINK_COLUMNS)))


def sink_rows_with_headers(table: pa.Table) -> list[tuple[Any, Any, int, int, Any]]:
    """``(key, value, timestamp, partition, headers)`` tuples of an Arrow table of output rows
    (headers: a list of ``(name, bytes or None)`` as a Kafka producer takes them; ``None`` for
    none, or where the table has no :data:`HEADERS_COLUMN`)."""
    columns = [table.column(c).to_pylist() for c in SINK_COLUMNS]
    raw = (table.column(HEADERS_COLUMN) if HEADERS_COLUMN in table.column_names else None)
    if raw is None or raw.null_count == len(raw):
        return list(zip(*columns, repeat(None)))
    from kspark.records import decode_headers

    headers = [None if h is None else list(decode_headers(h)) for h in raw.to_pylist()]
    return list(zip(*columns, headers))


#: the output rows a writer turns into Python objects at a time (:func:`sink_row_chunks`)
CHUNK_ROWS = 20_000


def sink_row_chunks(table: pa.Table, rows: int = CHUNK_ROWS
                    ) -> Iterator[list[tuple[Any, Any, int, int, Any]]]:
    """:func:`sink_rows_with_headers` of ``table``, ``rows`` at a time."""
    for start in range(0, table.num_rows, rows):
        yield sink_rows_with_headers(table.slice(start, rows))
