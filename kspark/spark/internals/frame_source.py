"""An ``io.frame`` topic (:class:`~kspark.io.frame.FrameTopic`) as rows of the wire format: the
named columns turned into records (key and value bytes, epoch-ms timestamp, the key's
partition, an offset that orders each task's records), packed many to a row."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from kspark.errors import BadInputError
from kspark.hashing import kafka_partition
from kspark.io.files import INVALID_TIMESTAMP
from kspark.io.frame import FrameTopic
from kspark.spark.internals.row_schema import ROW_DDL
from kspark.spark.internals.wire import INPUT_ARROW, pack_stream

#: rows of one arriving chunk at most (the offset keeps a chunk's order below this)
_CHUNK = 1_000_000
_SCALARS = (str, int, float, bool, bytes)


def frame_source_frame(spec: FrameTopic, topic: str, skip_invalid: bool) -> Any:
    """The rows of ``spec``'s frame as records of ``topic`` (see the module's documentation)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    frame = spec.frame
    if not isinstance(frame, DataFrame) or not frame.isStreaming:
        raise TypeError(f"io.frame topic {topic!r}: a streaming DataFrame is needed, got {frame!r}")
    value = F.struct(*frame.columns) if spec.value is None else F.col(spec.value)
    picked = frame.select(
        (F.col(spec.key) if spec.key else F.lit(None)).alias("k"),
        value.alias("v"),
        F.col(spec.timestamp).alias("t"),
        (F.col(spec.order_by) if spec.order_by else F.lit(None)).alias("o"),
    )
    names = {"k": spec.key or "", "v": spec.value or "", "t": spec.timestamp,
             "o": spec.order_by or ""}
    encode = _Encoder(topic, spec.partitions, names, skip_invalid)
    return picked.mapInArrow(lambda batches: pack_stream(encode(batches)), ROW_DDL)


class _Encoder:
    """Arrow batches of the picked columns (k, v, t, o) to records (:data:`INPUT_ARROW`)."""

    def __init__(self, topic: str, partitions: int, names: dict[str, str],
                 skip_invalid: bool) -> None:
        self.topic, self.partitions, self.names = topic, partitions, names
        self.skip_invalid = skip_invalid

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
        batch_name = "this micro-batch" if batch_id is None else f"micro-batch {batch_id}"
        position = itertools.count()
        for batch in batches:
            arrived = int(time.time() * 1000)
            rows = batch.to_pylist()
            columns: dict[str, list[Any]] = {n: [] for n in INPUT_ARROW.names}
            for i, row in enumerate(rows):
                where = (f"io.frame topic {self.topic!r}, row {next(position)} of Spark "
                         f"partition {part} of {batch_name}")
                key, stamp, problem = self._key(row), self._stamp(row["t"]), None
                if isinstance(key, str):
                    problem, key = f"key column {self.names['k']!r}: {key}", None
                elif isinstance(stamp, str):
                    problem = f"timestamp column {self.names['t']!r}: {stamp}"
                value = json.dumps(row["v"], default=str).encode()
                if problem is not None:
                    if not self.skip_invalid:
                        raise BadInputError(f"{where}: {problem}")
                    stamp, value = INVALID_TIMESTAMP, json.dumps(row, default=str).encode()
                order = self._stamp(row["o"]) if row["o"] is not None else arrived
                columns["key"].append(key)
                columns["value"].append(value)
                columns["topic"].append(self.topic)
                columns["partition"].append(
                    0 if key is None or self.partitions == 1
                    else kafka_partition(key, self.partitions))
                columns["offset"].append((order if isinstance(order, int) else arrived)
                                         * _CHUNK + i % _CHUNK)
                columns["timestamp"].append(stamp)
            yield pa.RecordBatch.from_pydict(columns, schema=INPUT_ARROW)

    @staticmethod
    def _key(row: dict[str, Any]) -> bytes | str | None:
        """The key's bytes, ``None``, or (as text) why it has none."""
        key = row["k"]
        if key is None:
            return None
        if isinstance(key, bytes):
            return key
        if isinstance(key, _SCALARS):
            return str(key).encode("utf-8")
        return f"a {type(key).__name__} is not a key: {json.dumps(key, default=str)[:80]}"

    @staticmethod
    def _stamp(value: Any) -> int | str:
        """Epoch ms of a timestamp or a whole number, or (as text) why it is none."""
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            return int(value.timestamp() * 1000)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        return f"not a timestamp or whole epoch ms: {value!r:.80}"
