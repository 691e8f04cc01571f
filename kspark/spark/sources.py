"""kspark's streaming sources, written with Spark's Python data source API."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from kspark.io.schema import INPUT_ARROW, INPUT_DDL, TICK_TOPIC


class _FilePartition(InputPartition):
    def __init__(self, path: str, index: int) -> None:
        self.path = path
        self.index = index


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
        limit = options.get("max_files_per_trigger")
        self.max_files = int(limit) if limit else None

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
        return [
            _FilePartition(os.path.join(self.path, files[i]), i)
            for i in range(start["files"], end["files"])
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        from kspark.io.files import OFFSET_STRIDE, file_rows

        keys, values, stamps, parts = file_rows(
            partition.path,
            self.format,
            self.key_field,
            self.value_field,
            self.timestamp_field,
            self.partitions_n,
        )
        n = len(keys)
        base = partition.index * OFFSET_STRIDE
        yield pa.RecordBatch.from_arrays(
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
