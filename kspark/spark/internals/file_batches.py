"""A file range's records as Arrow batches in kspark's input layout (:data:`~.wire.INPUT_ARROW`):
rows of a Parquet file (key, value and timestamp fields, or whole rows as values) and files that
kspark's sinks wrote. :mod:`.file_source` plans the ranges; this reads them."""

from __future__ import annotations

from typing import Any

from kspark.spark.internals.arrow_json import json_rows
from kspark.spark.internals.wire import INPUT_ARROW, repeated


def parquet_row_groups(path: str) -> list[int] | None:
    """Rows of each row group of a Parquet file (``None``: unreadable here, read() reports)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    except Exception:
        return None


def _read_rows(path: str, lo: int, hi: int | None, columns: list[str]) -> Any:
    """Rows ``[lo, hi)`` of ``columns`` of a Parquet file, reading only the row groups they
    are in."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    meta = pf.metadata
    first, at = 0, 0
    groups: list[int] = []
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if at + rows > lo and (hi is None or at < hi):
            if not groups:
                first = at
            groups.append(g)
        at += rows
    table = pf.read_row_groups(groups, columns=columns)
    return table.slice(lo - first, None if hi is None else hi - lo)


def _encoded(column: Any, encode: Any, *, text: bool = False) -> tuple[Any, Any]:
    """``(indices, encoded uniques as an Arrow binary array)`` of an Arrow column: ``encode``
    runs once per distinct value (as ``to_pylist`` gives it); nulls stay null in the indices.
    With ``text`` (``encode`` gives ``str(v)`` as UTF-8), a string column's uniques are its
    bytes as they are, without a Python object each."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.combine_chunks())
    if text and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return encoded.indices, encoded.dictionary.cast(pa.binary())
    uniques = [encode(v) for v in encoded.dictionary.to_pylist()]
    return encoded.indices, pa.array(uniques, pa.binary())


def _partitions_of(uniques: Any, partitions: int) -> Any:
    """Kafka's partition of each key of an Arrow binary array without nulls, from its
    buffers."""
    import numpy as np

    from kspark.hashing import kafka_partitions_packed

    _, offsets, data = uniques.buffers()
    start = uniques.offset
    offsets = np.frombuffer(offsets, dtype=np.int32)[start:start + len(uniques) + 1]
    data = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
    return kafka_partitions_packed(data, offsets, partitions)


def parquet_batch(
    path: str,
    lo: int,
    hi: int | None,
    key_field: str,
    value_field: str | None,
    timestamp_field: str,
    partitions: int,
    topic: str,
    base: int,
    *,
    dictionary: bool = False,
) -> Any | None:
    """Rows ``[lo, hi)`` of a Parquet file as one input batch, decoding each distinct key and
    value once; exactly what :func:`kspark.io.files.file_rows` gives (with ``dictionary``, key
    and value dictionary-encoded, for :func:`pack_records`). ``None`` when the file
    needs the row-by-row reader (non-integer or null timestamps, nested columns, or an error to
    report with the row). Whole rows as values are written by
    :func:`~kspark.spark.internals.arrow_json.json_rows`."""
    parts = parquet_parts(path, lo, hi, key_field, value_field, timestamp_field, partitions,
                           topic, base, dictionary=dictionary)
    return None if parts is None else parts[0]


def parquet_parts(
    path: str,
    lo: int,
    hi: int | None,
    key_field: str,
    value_field: str | None,
    timestamp_field: str,
    partitions: int,
    topic: str,
    base: int,
    *,
    dictionary: bool = False,
    defer_rows: bool = False,
) -> tuple[Any, Any | None] | None:
    """:func:`parquet_batch` and ``None``; with ``defer_rows`` and whole rows as values, the
    batch's values are null and the rows come second, for ``json_rows`` of those that are used."""
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    if timestamp_field not in schema.names:
        return None
    columns = schema.names if value_field is None else [
        c for c in dict.fromkeys((key_field, value_field, timestamp_field)) if c in schema.names]
    try:
        table = _read_rows(path, lo, hi, columns)
        stamps_col = table.column(timestamp_field)
        if not pa.types.is_integer(stamps_col.type) or stamps_col.null_count:
            return None
        n = table.num_rows
        stamps = pa.array(stamps_col.to_numpy().astype(np.int64), pa.int64())
        if key_field in table.column_names:
            key_idx, key_array = _encoded(
                table.column(key_field), lambda v: str(v).encode("utf-8"), text=True
            )
            keys = _expand(key_idx, key_array, dictionary)
            if partitions == 1:
                parts = np.zeros(n, dtype=np.int32)
            else:
                per_key = np.zeros(max(len(key_array), 1), dtype=np.int32)
                per_key[:len(key_array)] = _partitions_of(key_array, partitions)
                idx = key_idx.to_numpy(zero_copy_only=False)
                parts = np.where(np.isnan(idx), 0, per_key[np.nan_to_num(idx).astype(np.int64)])
                parts = parts.astype(np.int32)
        else:
            keys = pa.nulls(n, pa.binary())
            parts = np.zeros(n, dtype=np.int32)
        deferred = None
        if value_field is None and defer_rows:
            if json_rows(table.slice(0, 0)) is None:
                return None
            values, deferred = pa.nulls(n, pa.binary()), table
        elif value_field is None:
            values = json_rows(table)
            if values is None:
                return None
            values = values.cast(pa.binary())
        elif value_field in table.column_names:
            value_idx, value_array = _encoded(
                table.column(value_field), lambda v: json.dumps(v, default=str).encode()
            )
            values = _expand(value_idx, value_array, dictionary)
        else:
            values = pa.nulls(n, pa.binary())
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    topics = pc.take(pa.array([topic], pa.string()), pa.array(np.zeros(n, dtype=np.int32)))
    columns = [
        keys,
        values,
        topics,
        pa.array(parts, pa.int32()),
        pa.array(np.arange(base + lo, base + lo + n, dtype=np.int64)),
        stamps,
    ]
    batch = pa.RecordBatch.from_arrays(columns, names=INPUT_ARROW.names) if dictionary else (
        pa.RecordBatch.from_arrays(columns, schema=INPUT_ARROW))
    return batch, deferred


def kspark_batch(path: str, lo: int, hi: int | None, partitions: int, topic: str,
                  base: int) -> Any | None:
    """Records ``[lo, hi)`` of a file that kspark's sinks wrote (format "kspark"), read in
    columns by Arrow (:func:`~kspark.io.record_files.read_record_file`): exactly what
    :func:`kspark.io.files.file_rows` gives. ``None`` when the file needs the row-by-row reader
    (a malformed line, a missing field or a partition out of range: it reports them with their
    line)."""
    import numpy as np
    import pyarrow as pa

    from kspark.io.record_files import read_record_table

    table = read_record_table(path, partitions)
    if table is None:
        return None
    table = table.slice(lo, None if hi is None else hi - lo)
    n = table.num_rows
    return pa.RecordBatch.from_arrays([
        table.column("key").combine_chunks(),
        table.column("value").combine_chunks(),
        repeated(topic, pa.string(), n),
        table.column("partition").combine_chunks().cast(pa.int32()),
        pa.array(np.arange(base + lo, base + lo + n, dtype=np.int64)),
        table.column("timestamp").combine_chunks(),
    ], schema=INPUT_ARROW)


def _expand(indices: Any, uniques: Any, dictionary: bool) -> Any:
    """The column of ``uniques[indices]`` (an Arrow binary array; nulls stay null): a
    dictionary array, or taken."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if dictionary:
        return pa.DictionaryArray.from_arrays(indices, uniques)
    return pc.take(uniques, indices)
