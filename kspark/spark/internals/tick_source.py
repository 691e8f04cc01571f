"""``kspark_ticks``: a row per task each interval of wall-clock time (Spark's Python data source
API), so micro-batches keep running for wall-clock punctuation and idle closing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from kspark.spark.internals.row_schema import ROW_DDL

#: the tick source's offsets are ``{TICK_OFFSET: n}``
TICK_OFFSET = "tick"


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
        return ROW_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TickStreamReader(dict(self.options))


class TickStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.interval = int(options["interval_ms"])
        self.tasks = [int(t) for t in options["tasks"].split(",")]

    def _now_tick(self) -> int:
        return int(time.time() * 1000) // self.interval

    def initialOffset(self) -> dict:
        return {TICK_OFFSET: self._now_tick()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {TICK_OFFSET: self._now_tick()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if end[TICK_OFFSET] <= start[TICK_OFFSET]:
            return []
        return [_TickPartition(end[TICK_OFFSET], self.tasks, self.interval)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kspark.spark.internals.wire import KIND_TICK, rows_of

        partition = cast(_TickPartition, partition)
        n = len(partition.tasks)
        yield rows_of(KIND_TICK, None, [None] * n, partition.tasks, [partition.tick] * n,
                      [partition.tick * partition.interval] * n)

    def commit(self, end: dict) -> None:
        pass
