"""kspark's streaming sources, written with Spark's Python data source API."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any, cast

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from kspark.io.schema import INPUT_ARROW, INPUT_DDL, TICK_TOPIC

#: a read task of a Parquet file is cut in two (to give idle cores work) only if it has more
#: than this many rows: each part decodes the whole row groups it touches
PARQUET_SPLIT_ROWS = 100_000


class _FilePartition(InputPartition):
    def __init__(self, path: str, index: int, lo: int = 0, hi: int | None = None) -> None:
        self.path = path
        self.index = index
        #: rows ``[lo, hi)`` of the file (``hi=None``: to the end)
        self.lo = lo
        self.hi = hi


class _FilesPartition(InputPartition):
    def __init__(self, files: list[_FilePartition]) -> None:
        self.files = files


class FileSource(DataSource):
    """``spark.readStream.format("kspark_files")``: a directory of files as one topic."""

    @classmethod
    def name(cls) -> str:
        return "kspark_files"

    def schema(self) -> str:
        return INPUT_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return FileStreamReader(dict(self.options))


class FileStreamReader(DataSourceStreamReader):
    """Offsets are ``{"files": n}``: the first n data files of the directory in name order."""

    def __init__(self, options: dict[str, str]) -> None:
        self.path = options["path"]
        self.format = options.get("format", "jsonl")
        self.key_field = options.get("key_field", "key")
        self.value_field = options.get("value_field")
        self.timestamp_field = options.get("timestamp_field", "timestamp")
        self.partitions_n = int(options.get("partitions", "1"))
        self.topic = options["topic"]
        #: read each range in the stages' tasks (see :func:`file_range_rows`), not here
        self.in_stage = options.get("read_in_stage", "false").lower() == "true"
        self.options = {k: v for k, v in options.items() if k != "read_in_stage"}
        limit = options.get("max_files_per_trigger")
        self.max_files = int(limit) if limit else None
        #: records travel to the tasks packed many to a row (see :func:`pack_records`)
        self.pack = options.get("pack", "true").lower() != "false"
        #: read tasks the cluster runs at once (the app passes Spark's default parallelism)
        self.parallelism = max(1, int(options.get("parallelism", "1")))

    def _files(self) -> list[str]:
        from kspark.io.files import list_data_files

        if not os.path.isdir(self.path):
            raise FileNotFoundError(
                f"source directory {self.path!r} of topic {self.topic!r} does not exist"
            )
        return list_data_files(self.path)

    def initialOffset(self) -> dict:
        return {"files": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        n = len(self._files())
        if isinstance(limit, ReadMaxFiles):
            n = min(n, start["files"] + max(1, limit.max_files))
        return {"files": n}

    def reportLatestOffset(self) -> dict:
        return {"files": len(self._files())}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        files = self._files()
        paths = {i: os.path.join(self.path, files[i]) for i in range(start["files"], end["files"])}
        if self.in_stage:  # no reading here: one task writes a row per file and partition
            files_read = [_FilePartition(path, i) for i, path in paths.items()]
            return [_FilesPartition(files_read)] if files_read else []
        groups = [
            (i, _parquet_row_groups(path) if self.format == "parquet" else None)
            for i, path in paths.items()
        ]
        plan = plan_reads(groups, self.parallelism)
        return [_FilePartition(paths[i], i, lo, hi) for i, lo, hi in plan]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if self.in_stage:
            for part in cast(_FilesPartition, partition).files:
                yield file_range_rows(self.options, part, self.partitions_n, self.topic)
            return
        batch = self._read_batch(cast(_FilePartition, partition))
        yield pack_records(batch) if self.pack else batch

    def _read_batch(self, partition: _FilePartition) -> Any:
        import pyarrow as pa

        from kspark.io.files import OFFSET_STRIDE, file_rows

        lo, hi = partition.lo, partition.hi
        if self.format == "parquet":
            batch = _parquet_batch(
                partition.path,
                lo,
                hi,
                self.key_field,
                self.value_field,
                self.timestamp_field,
                self.partitions_n,
                self.topic,
                partition.index * OFFSET_STRIDE,
                dictionary=self.pack,
            )
            if batch is not None:
                return batch

        keys, values, stamps, parts = file_rows(
            partition.path,
            self.format,
            self.key_field,
            self.value_field,
            self.timestamp_field,
            self.partitions_n,
        )
        if hi is not None or lo:
            keys, values, stamps, parts = (c[lo:hi] for c in (keys, values, stamps, parts))
        n = len(keys)
        base = partition.index * OFFSET_STRIDE + lo
        return pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array([self.topic] * n, pa.string()),
                pa.array(parts, pa.int32()),
                pa.array(range(base, base + n), pa.int64()),
                pa.array(stamps, pa.int64()),
            ],
            schema=INPUT_ARROW,
        )

    def commit(self, end: dict) -> None:
        pass


#: topic prefix of a row that carries many records of one topic and partition (see
#: :func:`pack_records`); the task's stage unpacks it (:func:`unpack_records`)
PACKED_PREFIX = "__kspark_packed__:"
#: topic prefix of a row that stands for the records of one partition in a range of a file;
#: the task's stage reads them (:func:`read_file_range`)
FILE_PREFIX = "__kspark_file__:"
#: most records in one packed row
PACK_ROWS = 100_000
_PACKED_FIELDS = ("key", "value", "timestamp", "offset")


def file_range_rows(options: dict[str, str], partition: Any, partitions: int, topic: str) -> Any:
    """Rows that stand for a file range's records, one per partition of the topic (each task
    reads the range itself, :func:`read_file_range`, and keeps its own records): a stage then
    reads the file where its tasks run, and no record crosses Spark's shuffle. The row's
    ``key`` is the range as JSON, its offset the range's first."""
    import json

    import pyarrow as pa

    from kspark.io.files import OFFSET_STRIDE
    from kspark.io.schema import INPUT_ARROW

    spec = {"options": options, "path": partition.path, "index": partition.index,
            "lo": partition.lo, "hi": partition.hi}
    blob = json.dumps(spec, sort_keys=True).encode()
    first = partition.index * OFFSET_STRIDE + partition.lo
    return pa.RecordBatch.from_arrays(
        [
            pa.array([blob] * partitions, pa.binary()),
            pa.nulls(partitions, pa.binary()),
            pa.array([FILE_PREFIX + topic] * partitions, pa.string()),
            pa.array(range(partitions), pa.int32()),
            pa.array([first] * partitions, pa.int64()),
            pa.array([0] * partitions, pa.int64()),
        ],
        schema=INPUT_ARROW,
    )


def read_file_range(blob: bytes) -> FileRangeRecords:
    """The records of the file range of a :func:`file_range_rows` row."""
    import json

    spec = json.loads(blob)
    reader = FileStreamReader(spec["options"])
    batch = reader._read_batch(_FilePartition(spec["path"], spec["index"], spec["lo"], spec["hi"]))
    return FileRangeRecords(batch)


class FileRangeRecords:
    """The records of a file range, copied out per partition when a task asks for them (as
    :func:`partition_slices` gives them): a Spark task copies only the records of the tasks it
    runs, not those of every partition in the file."""

    def __init__(self, batch: Any) -> None:
        self._partitions = batch.column("partition").to_numpy(zero_copy_only=False)
        self._records = _task_records(batch)
        self._taken: set[int] = set()

    def pop(self, partition: int, default: Any = None) -> Any:
        """The records of ``partition`` in order, once (``default``: none, or taken before)."""
        import numpy as np
        import pyarrow as pa

        if partition in self._taken:
            return default
        self._taken.add(partition)
        rows = np.flatnonzero(self._partitions == partition)
        return self._records.take(pa.array(rows)) if len(rows) else default


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
    inner = _task_records(batch)
    return [
        (int(sorted_parts[lo]), inner.take(pa.array(order[lo:hi])))
        for lo, hi in zip([0, *(c + 1 for c in cuts)], [*(c + 1 for c in cuts), n])
    ]


def _task_records(batch: Any) -> Any:
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


def plan_reads(
    files: list[tuple[int, list[int] | None]], parallelism: int
) -> list[tuple[int, int, int | None]]:
    """The read tasks of a micro-batch: ``(file, first row, end row)`` per task, in file and row
    order; an end of ``None`` reads to the end of the file.

    ``files`` gives each file's row group sizes (``None``: not Parquet, or unreadable here, so
    read whole). Consecutive row groups of a file share a task up to an even share of the
    batch's rows per core; while fewer tasks than ``parallelism`` would run, the largest task of
    more than :data:`PARQUET_SPLIT_ROWS` rows is cut in two. Row groups are never cut otherwise,
    because every task decodes the whole row groups it touches."""
    total = sum(sum(groups) for _, groups in files if groups)
    share = max(PARQUET_SPLIT_ROWS, -(-total // parallelism))
    tasks: list[list[Any]] = []
    for index, groups in files:
        if not groups:
            tasks.append([index, 0, None])
            continue
        lo = at = 0
        for rows in groups:
            if at > lo and at + rows - lo > share:
                tasks.append([index, lo, at])
                lo = at
            at += rows
        tasks.append([index, lo, at])
    while len(tasks) < parallelism:
        sized = [t for t in tasks if t[2] is not None and t[2] - t[1] > PARQUET_SPLIT_ROWS]
        if not sized:
            break
        big = max(sized, key=lambda t: t[2] - t[1])
        mid = (big[1] + big[2]) // 2
        at = tasks.index(big)
        tasks[at : at + 1] = [[big[0], big[1], mid], [big[0], mid, big[2]]]
    whole = {index: sum(groups) for index, groups in files if groups}
    return [(index, lo, None if hi == whole.get(index) else hi) for index, lo, hi in tasks]


def _parquet_row_groups(path: str) -> list[int] | None:
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


def _encoded(column: Any, encode: Any) -> tuple[Any, list[Any]]:
    """``(indices, encoded uniques)`` of an Arrow column: ``encode`` runs once per distinct
    value (as ``to_pylist`` gives it); ``None`` values stay ``None``."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.combine_chunks())
    uniques = [None if v is None else encode(v) for v in encoded.dictionary.to_pylist()]
    return encoded.indices, uniques


def _parquet_batch(
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
    needs the row-by-row reader (whole rows as values, non-integer or null timestamps, nested
    columns, or an error to report with the row)."""
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kspark.hashing import kafka_partitions
    from kspark.io.schema import INPUT_ARROW

    if value_field is None:
        return None
    schema = pq.read_schema(path)
    if timestamp_field not in schema.names:
        return None
    columns = [c for c in dict.fromkeys((key_field, value_field, timestamp_field))
               if c in schema.names]
    try:
        table = _read_rows(path, lo, hi, columns)
        stamps_col = table.column(timestamp_field)
        if not pa.types.is_integer(stamps_col.type) or stamps_col.null_count:
            return None
        n = table.num_rows
        stamps = pa.array(stamps_col.to_numpy().astype(np.int64), pa.int64())
        if key_field in table.column_names:
            key_idx, key_bytes = _encoded(
                table.column(key_field), lambda v: str(v).encode("utf-8")
            )
            keys = _expand(key_idx, key_bytes, dictionary)
            if partitions == 1:
                parts = np.zeros(n, dtype=np.int32)
            else:
                per_key = np.zeros(max(len(key_bytes), 1), dtype=np.int32)
                known = [i for i, k in enumerate(key_bytes) if k is not None]
                per_key[known] = kafka_partitions([key_bytes[i] for i in known], partitions)
                idx = key_idx.to_numpy(zero_copy_only=False)
                parts = np.where(np.isnan(idx), 0, per_key[np.nan_to_num(idx).astype(np.int64)])
                parts = parts.astype(np.int32)
        else:
            keys = pa.nulls(n, pa.binary())
            parts = np.zeros(n, dtype=np.int32)
        if value_field in table.column_names:
            value_idx, value_bytes = _encoded(
                table.column(value_field), lambda v: json.dumps(v, default=str).encode()
            )
            values = _expand(value_idx, value_bytes, dictionary)
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
    return pa.RecordBatch.from_arrays(columns, names=INPUT_ARROW.names) if dictionary else (
        pa.RecordBatch.from_arrays(columns, schema=INPUT_ARROW))


def _expand(indices: Any, uniques: list[Any], dictionary: bool) -> Any:
    """The column of ``uniques[indices]`` (nulls stay null): a dictionary array, or taken."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pa.array(uniques, pa.binary())
    if dictionary:
        return pa.DictionaryArray.from_arrays(indices, values)
    return pc.take(values, indices)


class _TickPartition(InputPartition):
    def __init__(self, tick: int, tasks: list[int], interval: int) -> None:
        self.tick, self.tasks, self.interval = tick, tasks, interval


class TickSource(DataSource):
    """``kspark_ticks``: one row per task every ``interval_ms`` of wall-clock time, so that
    micro-batches run (and wall-clock punctuations fire) while the input is idle."""

    @classmethod
    def name(cls) -> str:
        return "kspark_ticks"

    def schema(self) -> str:
        return INPUT_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TickStreamReader(dict(self.options))


class TickStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.interval = int(options["interval_ms"])
        self.tasks = [int(t) for t in options["tasks"].split(",")]

    def _now_tick(self) -> int:
        return int(time.time() * 1000) // self.interval

    def initialOffset(self) -> dict:
        return {"tick": self._now_tick()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"tick": self._now_tick()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if end["tick"] <= start["tick"]:
            return []
        return [_TickPartition(end["tick"], self.tasks, self.interval)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        partition = cast(_TickPartition, partition)
        n = len(partition.tasks)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([None] * n, pa.binary()),
                pa.array([None] * n, pa.binary()),
                pa.array([TICK_TOPIC] * n, pa.string()),
                pa.array(partition.tasks, pa.int32()),
                pa.array([partition.tick] * n, pa.int64()),
                pa.array([partition.tick * partition.interval] * n, pa.int64()),
            ],
            schema=INPUT_ARROW,
        )

    def commit(self, end: dict) -> None:
        pass
