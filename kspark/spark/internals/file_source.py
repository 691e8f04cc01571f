"""``kspark_files``: a directory of JSON-lines or Parquet files as a streaming source (Spark's
Python data source API), read in a stage of its own or where the first stage's tasks run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, cast

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from kspark.spark.internals.file_batches import (
    kspark_batch,
    parquet_batch,
    parquet_parts,
    parquet_row_groups,
)
from kspark.spark.internals.row_schema import ROW_DDL
from kspark.spark.internals.wire import (
    INPUT_ARROW,
    KIND_FILE,
    pack_records,
    record_rows,
    repeated,
    rows_of,
)

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
        return ROW_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return FileStreamReader(dict(self.options))


class FileRangeSource(DataSource):
    """``spark.readStream.format("kspark_file_ranges")``: a directory of files as one topic,
    each file's records read by the stages' tasks (:func:`file_range_rows`). Its rows are a
    few per file, made on the driver when the micro-batch's offsets are taken
    (:class:`FileRangeReader`), so the read stage runs no Python worker."""

    @classmethod
    def name(cls) -> str:
        return "kspark_file_ranges"

    def schema(self) -> str:
        return ROW_DDL

    def simpleStreamReader(self, schema: Any) -> SimpleDataSourceStreamReader:
        return FileRangeReader(dict(self.options))


class FileRangeReader(SimpleDataSourceStreamReader):
    """The range rows of the files a micro-batch takes, with the offsets of
    :class:`FileStreamReader` (at most ``max_files_per_trigger`` files a batch)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.files = FileStreamReader({**options, "read_in_stage": "true"})

    def initialOffset(self) -> dict:
        return self.files.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[Any], dict]:
        files = self.files
        end = files.latestOffset(start, files.getDefaultReadLimit())
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[Any]:
        files = self.files
        (part,) = files.partitions(start, end) or [_FilesPartition([])]
        return iter(list(files.read(part)))  # a list's iterator: Spark copies it

    def commit(self, end: dict) -> None:
        pass


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
        #: rows without a usable timestamp become records the task skips and counts (the
        #: deserialization handler log_and_continue) instead of stopping the read
        self.skip_invalid = options.get("handler") == "log_and_continue"

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
            (i, parquet_row_groups(path) if self.format == "parquet" else None)
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
        yield pack_records(batch) if self.pack else record_rows(batch)

    def read_range(self, partition: _FilePartition) -> tuple[Any, Any | None]:
        """The input batch of ``partition`` and, for Parquet rows read whole as values, the
        rows whose JSON its (null) values stand for (:func:`parquet_parts`), else ``None``:
        a task JSON-encodes only the rows of its own partitions."""
        from kspark.io.files import OFFSET_STRIDE

        if self.format == "parquet" and self.value_field is None:
            parts = parquet_parts(
                partition.path, partition.lo, partition.hi, self.key_field, None,
                self.timestamp_field, self.partitions_n, self.topic,
                partition.index * OFFSET_STRIDE, dictionary=self.pack, defer_rows=True)
            if parts is not None:
                return parts
        return self._read_batch(partition), None

    def _read_batch(self, partition: _FilePartition) -> Any:
        import pyarrow as pa

        from kspark.io.files import OFFSET_STRIDE, file_rows

        lo, hi = partition.lo, partition.hi
        if self.format == "parquet":
            batch = parquet_batch(
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
        elif self.format == "kspark":
            batch = kspark_batch(partition.path, lo, hi, self.partitions_n, self.topic,
                                  partition.index * OFFSET_STRIDE)
            if batch is not None:
                return batch

        keys, values, stamps, parts = file_rows(
            partition.path,
            self.format,
            self.key_field,
            self.value_field,
            self.timestamp_field,
            self.partitions_n,
            self.skip_invalid,
        )
        if hi is not None or lo:
            keys, values, stamps, parts = (c[lo:hi] for c in (keys, values, stamps, parts))
        n = len(keys)
        base = partition.index * OFFSET_STRIDE + lo
        return pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                repeated(self.topic, pa.string(), n),
                pa.array(parts, pa.int32()),
                pa.array(range(base, base + n), pa.int64()),
                pa.array(stamps, pa.int64()),
            ],
            schema=INPUT_ARROW,
        )

    def commit(self, end: dict) -> None:
        pass


def file_range_rows(options: dict[str, str], partition: Any, partitions: int, topic: str) -> Any:
    """Rows that stand for a file range's records, one per partition of the topic (each task
    reads the range itself, :mod:`kspark.spark.internals.file_ranges`, and keeps its own
    records): a stage then reads the file where its tasks run, and no record crosses Spark's
    shuffle. The row's ``key`` is the range as JSON, its offset the range's first."""
    import json

    from kspark.io.files import OFFSET_STRIDE

    spec = {"options": options, "path": partition.path, "index": partition.index,
            "lo": partition.lo, "hi": partition.hi}
    blob = json.dumps(spec, sort_keys=True).encode()
    first = partition.index * OFFSET_STRIDE + partition.lo
    return rows_of(KIND_FILE, topic, [blob] * partitions, range(partitions),
                   [first] * partitions, [0] * partitions)


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
