"""kspark's wire format on Spark: the one layout of the rows its sources give and its stages
read and write, the kinds of row, and how many records travel packed in one row.

Every row has the columns of :mod:`~kspark.spark.internals.row_schema`; its ``kind`` says what
it is:

- ``record``: one record of ``topic`` (key, value, timestamp, partition, offset, headers);
- ``packed``: many records of ``topic`` and ``partition`` as Arrow IPC bytes in ``key``
  (:func:`pack_records` for a source's records, :func:`pack_output` for a task's results);
- ``file``: a range of records that the task of ``partition`` reads itself (``key`` holds the
  range as JSON): a range of a file (:mod:`kspark.spark.internals.file_source`) or a Kafka
  partition's offset range (:func:`kspark.spark.internals.kafka_source.range_rows`);
- ``tick``: wall-clock time for the task of ``partition`` (timestamp in epoch ms);
- ``changelog``: one change of a store, for the changelog ``topic``;
- ``metrics``: a task's counters as JSON in ``value``.

User frames of Spark's Kafka connector have Kafka's columns (:data:`INPUT_COLUMNS`) and become
packed rows through :func:`pack_stream`.

A record's headers travel as the bytes of :func:`kspark.records.encode_headers` in a
``headers`` column: null where a record has none, and left out of the records a packed row
carries when none of them has any (so records without headers cost nothing more).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from kspark.spark.internals.row_schema import ROW_COLUMNS

KIND_RECORD = "record"
KIND_PACKED = "packed"
KIND_FILE = "file"
KIND_TICK = "tick"
KIND_CHANGELOG = "changelog"
KIND_METRICS = "metrics"
#: a row carrying a task's changelog records of one topic (as ``packed`` its sink records)
KIND_PACKED_CHANGELOG = "packed-changelog"
#: kinds of row that carry or stand for records of a source topic
RECORD_KINDS = (KIND_RECORD, KIND_PACKED, KIND_FILE)

ROW_ARROW = pa.schema([("kind", pa.string()), ("topic", pa.string()), ("key", pa.binary()),
                       ("value", pa.binary()), ("timestamp", pa.int64()),
                       ("partition", pa.int32()), ("offset", pa.int64()), ("task", pa.string()),
                       ("headers", pa.binary())])
#: numpy dtypes of :data:`ROW_COLUMNS` for rows built as columns
ROW_DTYPES = {
    "kind": object, "topic": object, "key": object, "value": object,
    "timestamp": np.int64, "partition": np.int32, "offset": np.int64, "task": object,
    "headers": object,
}

#: the columns of Spark's Kafka source (timestamp in epoch ms): records as readers give them
#: (a reader may add a ``headers`` column: :data:`HEADERS`, or Kafka's :data:`HEADER_LIST`)
INPUT_TYPES = [("key", "binary"), ("value", "binary"), ("topic", "string"),
               ("partition", "int"), ("offset", "long"), ("timestamp", "long")]
HEADERS = "headers"
#: Spark's type of the headers column of its Kafka source
HEADER_LIST = "array<struct<key:string,value:binary>>"
INPUT_COLUMNS = [c for c, _ in INPUT_TYPES]
INPUT_ARROW = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                         ("partition", pa.int32()), ("offset", pa.int64()),
                         ("timestamp", pa.int64())])

Columns = dict[str, np.ndarray]

#: most records in one packed row
PACK_ROWS = 100_000
_PACKED_FIELDS = ("key", "value", "timestamp", "offset")


def partition_slices(batch: Any) -> list[tuple[int, Any]]:
    """The records of input rows of one topic per partition, in order within each: columns key
    and value (dictionary-encoded), timestamp and offset."""
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
    """The columns of input rows that a task gets (:data:`_PACKED_FIELDS`, and the headers
    when some record has any), with keys and values dictionary-encoded where they repeat
    (:func:`_dictionary`): each distinct byte string travels once, and the task gets them as
    codes (see kspark.runtime.serialized.Encoded)."""
    fields = list(_PACKED_FIELDS)
    headers = header_bytes(batch)
    return pa.RecordBatch.from_arrays(
        [_dictionary(batch.column(f)) if f in ("key", "value") else batch.column(f)
         for f in fields] + ([] if headers is None else [headers]),
        names=fields + ([] if headers is None else [HEADERS]),
    )


def header_bytes(batch: Any) -> Any | None:
    """The ``headers`` column of ``batch`` as :func:`~kspark.records.encode_headers` bytes
    (null: none), converted from Kafka's list of (key, value) structs if need be; ``None``
    when the batch has no such column or no record has a header."""
    names = batch.schema.names
    if HEADERS not in names:
        return None
    column = batch.column(names.index(HEADERS))
    if column.null_count == len(column):
        return None
    if pa.types.is_binary(column.type):
        return column
    from kspark.records import encode_headers

    return pa.array([None if not h else encode_headers(tuple((p["key"], p["value"]) for p in h))
                     for h in column.to_pylist()], pa.binary())


def pack_records(batch: Any) -> Any:
    """Records of one topic (:data:`INPUT_ARROW`) as a few ``packed`` rows: per partition (the
    task), up to :data:`PACK_ROWS` records as Arrow IPC bytes in ``key`` (columns key, value,
    timestamp, offset). Spark then moves and converts a handful of rows
    per task instead of one per record (its ``transformWithStateInPandas`` input path costs
    several microseconds per row in Python); the order of records within a row is kept and
    every record keeps its offset. Key and value may come dictionary-encoded already
    (:func:`_parquet_batch` with ``dictionary=True``)."""
    import pyarrow.compute as pc

    topics = batch.column("topic")
    if not batch.num_rows or topics.null_count or len(pc.unique(topics)) != 1:
        return record_rows(batch)
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
            pa.array([KIND_PACKED] * rows, pa.string()),
            pa.array([topic] * rows, pa.string()),
            pa.array(blobs, pa.binary()),
            pa.nulls(rows, pa.binary()),
            pa.array([0] * rows, pa.int64()),
            pa.array(row_parts, pa.int32()),
            pa.array(firsts, pa.int64()),
            pa.nulls(rows, pa.string()),
            pa.nulls(rows, pa.binary()),
        ],
        schema=ROW_ARROW,
    )


def repeated(value: Any, type: Any, n: int) -> Any:
    """An Arrow array of ``n`` times ``value`` (of Arrow type ``type``), made without a list."""
    return pa.repeat(pa.scalar(value, type), n)


def rows_of(kind: str, topic: str | None, key: Any, partition: Any, offset: Any,
            timestamp: Any, value: Any = None) -> Any:
    """Rows of one ``kind`` and ``topic`` (:data:`ROW_ARROW`) from Arrow arrays or lists."""
    n = len(partition)
    return pa.RecordBatch.from_arrays(
        [
            repeated(kind, pa.string(), n),
            repeated(topic, pa.string(), n),
            pa.array(key, pa.binary()),
            pa.nulls(n, pa.binary()) if value is None else pa.array(value, pa.binary()),
            pa.array(timestamp, pa.int64()),
            pa.array(partition, pa.int32()),
            pa.array(offset, pa.int64()),
            pa.nulls(n, pa.string()),
            pa.nulls(n, pa.binary()),
        ],
        schema=ROW_ARROW,
    )


def ipc_bytes(batch: Any) -> bytes:
    """An Arrow record batch as the bytes of an Arrow IPC stream (what a packed row carries)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


#: rows of a column looked at to decide whether dictionary-encoding it pays
_SAMPLE = 4096


def _dictionary(column: Any) -> Any:
    """``column`` dictionary-encoded (as it is if it already is), unless its first
    :data:`_SAMPLE` values are nearly all distinct (a changelog's keys, say): encoding such a
    column hashes every value to save next to nothing, and a task that needs its values
    factorized does it itself."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        return column
    sample = column.slice(0, _SAMPLE)
    if len(sample) == _SAMPLE and pc.count_distinct(sample).as_py() > 0.9 * _SAMPLE:
        return column
    return pc.dictionary_encode(column)


def record_rows(batch: Any) -> Any:
    """Records (:data:`INPUT_ARROW`, key and value possibly dictionary-encoded) as one
    ``record`` row each (:data:`ROW_ARROW`)."""
    n = batch.num_rows
    column = {f.name: c.cast(f.type) for c, f in zip(batch.columns, INPUT_ARROW)}
    headers = header_bytes(batch)
    return pa.RecordBatch.from_arrays(
        [repeated(KIND_RECORD, pa.string(), n), column["topic"], column["key"],
         column["value"], column["timestamp"], column["partition"], column["offset"],
         pa.nulls(n, pa.string()), pa.nulls(n, pa.binary()) if headers is None else headers],
        schema=ROW_ARROW,
    )


def pack_stream(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function (to the rows' schema) over records in Kafka's columns
    (:data:`INPUT_COLUMNS`) of the other sources (Kafka, a DataFrame of Spark's Kafka
    connector): up to :data:`PACK_ROWS` records at a time, packed by :func:`pack_records`, so
    that they too cross the shuffle and the stages' Python input as a handful of rows per
    task."""

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
    topic, partition), row by row in order; key and value dictionary-encoded where they repeat."""
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    return records_of(topics, partitions, tables)


def concat_records(tables: list[Any]) -> Any:
    """Tables of records as one; a column dictionary-encoded in some of them (see
    :func:`task_records`) and not in others is decoded in all."""
    if len(tables) == 1:
        return tables[0]
    if any(HEADERS in t.schema.names for t in tables):  # null headers where a table has none
        tables = [t if HEADERS in t.schema.names
                  else t.append_column(HEADERS, pa.nulls(t.num_rows, pa.binary()))
                  for t in tables]
    if any(t.schema != tables[0].schema for t in tables[1:]):
        tables = [_plain(t) for t in tables]
    return pa.concat_tables(tables)


def _plain(table: Any) -> Any:
    """``table`` without dictionary-encoded columns."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
    return table


def records_of(topics: list[str], partitions: list[int], tables: list[Any]) -> Any:
    """Records that rows stand for (``tables[i]`` for row ``i`` of topic ``topics[i]`` and
    partition ``partitions[i]``) as one Arrow table: columns key, value, timestamp, offset,
    topic, partition."""
    table = concat_records(tables)
    sizes = [t.num_rows for t in tables]
    topic_idx = np.repeat(np.arange(len(topics), dtype=np.int32), sizes)
    table = table.append_column("topic", pa.DictionaryArray.from_arrays(
        pa.array(topic_idx), pa.array(topics, pa.string())).cast(pa.string()))
    return table.append_column(
        "partition", pa.array(np.repeat(np.asarray(partitions, dtype=np.int32), sizes))
    )


#: the columns of a packed output row's records (see :func:`pack_output`; and ``headers`` when
#: some record has any)
_OUTPUT_PACKED = pa.schema([("key", pa.binary()), ("value", pa.binary()),
                            ("timestamp", pa.int64()), ("partition", pa.int32()),
                            ("offset", pa.int64())])
_OUTPUT_HEADERS = _OUTPUT_PACKED.append(pa.field(HEADERS, pa.binary()))


def pack_output(columns: Columns, read_topics: Collection[str]) -> Columns:
    """A task's output rows with the records of each topic no stage reads (the app's sinks)
    packed into one ``packed`` row, and its changelog records into one ``packed-changelog``
    row per topic: Arrow IPC bytes in ``key`` (columns key, value, timestamp, partition,
    offset). Spark then converts a row per topic and task instead of one per result; the
    writers expand them in place (:func:`unpack_output`), so each sink gets its records in the
    same order. Records of topics a stage reads stay rows, grouped by their own partition."""
    kinds, topics = columns["kind"], columns["topic"]
    if not len(kinds):
        return columns
    groups = []
    for kind, packed_kind in ((KIND_RECORD, KIND_PACKED), (KIND_CHANGELOG, KIND_PACKED_CHANGELOG)):
        rows = kinds == kind
        groups += [(rows, t, packed_kind) for t in pd.unique(topics[rows])
                   if t is not None and t not in read_topics]
    if not groups:
        return columns
    keep = np.ones(len(kinds), dtype=bool)
    packed: dict[str, list[Any]] = {name: [] for name in ROW_COLUMNS}
    has_headers = pd.notna(columns["headers"])
    for rows, topic, packed_kind in groups:
        idx = np.flatnonzero(rows & (topics == topic))
        keep[idx] = False
        schema = _OUTPUT_HEADERS if has_headers[idx].any() else _OUTPUT_PACKED
        batch = pa.RecordBatch.from_arrays(
            [pa.array(columns[f.name][idx], f.type) for f in schema], schema=schema)
        first = int(idx[0])
        for name, value in (("kind", packed_kind), ("topic", str(topic)),
                            ("key", ipc_bytes(batch)), ("value", None),
                            ("timestamp", -1), ("partition", columns["partition"][first]),
                            ("offset", columns["offset"][first]),
                            ("task", columns["task"][first]), ("headers", None)):
            packed[name].append(value)
    return {
        name: np.concatenate([columns[name][keep], np.array(packed[name], dtype=dtype)])
        for name, dtype in ROW_DTYPES.items()
    }


def unpack_output(table: pa.Table) -> pa.Table:
    """The stages' output ``table`` (the rows' columns) with each ``packed`` row replaced,
    where it stands, by the records it carries."""
    import pyarrow.compute as pc

    packed_kinds = pa.array([KIND_PACKED, KIND_PACKED_CHANGELOG])
    flags = pc.fill_null(pc.is_in(table.column("kind"), value_set=packed_kinds), False)
    at = np.flatnonzero(flags.to_numpy(zero_copy_only=False))
    if not len(at):
        return table
    pieces, prev = [], 0
    kinds, topics, blobs, tasks = (table.column(c) for c in ("kind", "topic", "key", "task"))
    for row in at.tolist():
        if row > prev:
            pieces.append(table.slice(prev, row - prev))
        inner = pa.ipc.open_stream(blobs[row].as_py()).read_all()
        n = inner.num_rows
        kind = KIND_RECORD if kinds[row].as_py() == KIND_PACKED else KIND_CHANGELOG
        pieces.append(pa.table({
            "kind": repeated(kind, pa.string(), n),
            "topic": repeated(topics[row].as_py(), pa.string(), n),
            **{name: inner.column(name) for name in _OUTPUT_PACKED.names},
            "task": repeated(tasks[row].as_py(), pa.string(), n),
            HEADERS: (inner.column(HEADERS) if HEADERS in inner.schema.names
                      else pa.nulls(n, pa.binary())),
        }).cast(table.schema))
        prev = row + 1
    if prev < table.num_rows:
        pieces.append(table.slice(prev))
    return pa.concat_tables(pieces)
