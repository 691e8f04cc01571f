"""The rows that carry many records at once between kspark's stages (Arrow IPC in a binary
column), and the rows that stand for a file range read where the stage's tasks run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: topic prefix of a row that carries many records of one topic and partition (see
#: :func:`pack_records`); the task's stage unpacks it (:func:`unpack_records`)
PACKED_PREFIX = "__kspark_packed__:"
#: topic prefix of a row that stands for the records of one partition in a range of a file;
#: the task's stage reads them (:func:`read_file_range`)
FILE_PREFIX = "__kspark_file__:"
#: most records in one packed row
PACK_ROWS = 100_000
_PACKED_FIELDS = ("key", "value", "timestamp", "offset")


def partition_slices(batch: Any) -> list[tuple[int, Any]]:
    """The records of input rows of one topic per partition, in order within each: columns key
    and value (dictionary-encoded), timestamp and offset."""
    import numpy as np
    import pyarrow as pa

    n = batch.num_rows
    parts = batch.column("partition").to_numpy(zero_copy_only=False)
    # a stable sort of small integers is a radix sort in numpy
    small = parts.astype(np.int16) if parts.min() >= 0 and parts.max() < 1 << 15 else parts
    order = np.argsort(small, kind="stable")
    sorted_parts = parts[order]
    cuts = np.flatnonzero(np.diff(sorted_parts)).tolist()
    inner = task_records(batch)
    return [
        (int(sorted_parts[lo]), inner.take(pa.array(order[lo:hi])))
        for lo, hi in zip([0, *(c + 1 for c in cuts)], [*(c + 1 for c in cuts), n])
    ]


def task_records(batch: Any) -> Any:
    """The columns of input rows that a task gets (:data:`_PACKED_FIELDS`), with keys and
    values dictionary-encoded: each distinct byte string travels once, and the task gets them
    as codes (see kspark.runtime.task.Encoded)."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [_dictionary(batch.column(f)) if f in ("key", "value") else batch.column(f)
         for f in _PACKED_FIELDS],
        names=list(_PACKED_FIELDS),
    )


def pack_records(batch: Any) -> Any:
    """Input rows of one topic as a few rows: per partition (the task), up to
    :data:`PACK_ROWS` records as Arrow IPC bytes in ``key`` (columns key, value, timestamp,
    offset), topic ``PACKED_PREFIX + topic``. Spark then moves and converts a handful of rows
    per task instead of one per record (its ``transformWithStateInPandas`` input path costs
    several microseconds per row in Python); the order of records within a row is kept and
    every record keeps its offset. Key and value may come dictionary-encoded already
    (:func:`_parquet_batch` with ``dictionary=True``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kspark.io.schema import INPUT_ARROW

    topics = batch.column("topic")
    if not batch.num_rows or topics.null_count or len(pc.unique(topics)) != 1:
        return _plain(batch)
    topic = topics[0].as_py()
    blobs, row_parts, firsts = [], [], []
    for part, records in partition_slices(batch):
        for at in range(0, records.num_rows, PACK_ROWS):
            chunk = records.slice(at, PACK_ROWS)
            blobs.append(ipc_bytes(chunk))
            row_parts.append(part)
            firsts.append(chunk.column(3)[0].as_py())
    rows = len(blobs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(blobs, pa.binary()),
            pa.nulls(rows, pa.binary()),
            pa.array([PACKED_PREFIX + topic] * rows, pa.string()),
            pa.array(row_parts, pa.int32()),
            pa.array(firsts, pa.int64()),
            pa.array([0] * rows, pa.int64()),
        ],
        schema=INPUT_ARROW,
    )


def ipc_bytes(batch: Any) -> bytes:
    """An Arrow record batch as the bytes of an Arrow IPC stream (what a packed row carries)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _dictionary(column: Any) -> Any:
    """``column`` dictionary-encoded (as it is if it already is)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)


def _plain(batch: Any) -> Any:
    """``batch`` with dictionary-encoded columns decoded (:data:`INPUT_ARROW`'s types)."""
    import pyarrow as pa

    from kspark.io.schema import INPUT_ARROW

    if not any(pa.types.is_dictionary(f.type) for f in batch.schema):
        return batch
    return pa.RecordBatch.from_arrays(
        [c.cast(f.type) for c, f in zip(batch.columns, INPUT_ARROW)], schema=INPUT_ARROW
    )


def pack_stream(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function over input rows (:data:`INPUT_DDL`) of the other sources (Kafka,
    a DataFrame of Spark's Kafka connector, memory): up to :data:`PACK_ROWS` rows at a time,
    packed by :func:`pack_records`, so that they too cross the shuffle and the stages' Python
    input as a handful of rows per task."""
    import pyarrow as pa

    def packed(pending: list[Any]) -> Iterator[Any]:
        return map(pack_records, pa.Table.from_batches(pending).combine_chunks().to_batches())

    pending: list[Any] = []
    rows = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        if rows >= PACK_ROWS:
            yield from packed(pending)
            pending, rows = [], 0
    if rows:
        yield from packed(pending)


def unpack_records(topics: list[str], partitions: list[int], blobs: list[bytes]) -> Any:
    """The records of packed rows as one Arrow table (columns key, value, timestamp, offset,
    topic, partition), row by row in order; key and value are dictionary-encoded."""
    import pyarrow as pa

    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    return records_of(topics, partitions, tables)


def records_of(topics: list[str], partitions: list[int], tables: list[Any]) -> Any:
    """Records that rows stand for (``tables[i]`` for row ``i`` of topic ``topics[i]``, with
    its prefix, and partition ``partitions[i]``) as one Arrow table: columns key, value,
    timestamp, offset, topic, partition."""
    import numpy as np
    import pyarrow as pa

    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    sizes = [t.num_rows for t in tables]
    names = [t.split(":", 1)[1] for t in topics]
    topic_idx = np.repeat(np.arange(len(names), dtype=np.int32), sizes)
    table = table.append_column("topic", pa.DictionaryArray.from_arrays(
        pa.array(topic_idx), pa.array(names, pa.string())).cast(pa.string()))
    return table.append_column(
        "partition", pa.array(np.repeat(np.asarray(partitions, dtype=np.int32), sizes))
    )
