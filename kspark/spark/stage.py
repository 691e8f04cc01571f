"""One sub-topology as a Spark stateful operator: ``transformWithStateInPandas`` grouped by task.

Every stage reads and writes rows of the same layout (``kspark.io.schema.OUTPUT_DDL``). A stage
processes the record rows of its own source topics (and tick rows) with the same
:class:`~kspark.runtime.task.Task` the test driver runs, and passes every other row through, so
that the sub-topologies of a topology run as one chain of operators in one query, crossing
repartition topics inside the query.

Task state in Spark state, per task (the grouping key is the task's partition):
- ``task``: ValueState holding the pickled :meth:`Task.checkpoint_state` (stream time,
  punctuation due times, processors' own state, stores' metadata);
- ``buckets``: MapState ``(store, bucket) -> pickled bucket``, read on first use in a batch and
  written back only when dirty.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import pickle
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from kspark.config import StreamsConfig
from kspark.hashing import kafka_partition
from kspark.io.schema import KIND_CHANGELOG, KIND_METRICS, KIND_RECORD, TICK_TOPIC
from kspark.runtime.batch import run_task_batch
from kspark.runtime.task import SourceBatch
from kspark.spark.sources import PACKED_PREFIX, unpack_records
from kspark.state.changelog import ChangelogCodec

OUTPUT_COLUMNS = ["kind", "topic", "key", "value", "timestamp", "partition", "offset", "task"]
_TOPOLOGIES: dict[str, Any] = {}
#: repartition rows get offsets ``upstream_partition * UPSTREAM_STRIDE + seq``
UPSTREAM_STRIDE = 1 << 40


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3Hash`` of an ``int`` column value (what ``hash(col)`` and hash
    partitioning compute), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = seed & mask ^ k1
    h1 = (rotl(h1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def task_group_values(tasks: int) -> list[int]:
    """For each task ``p``, the smallest ``v >= 0`` with ``v % tasks == p`` that Spark's hash
    partitioning into ``tasks`` shuffle partitions places in partition ``p``.

    Grouping the stages by these values instead of the task number gives every task its own
    shuffle partition (the task numbers themselves collide: with 4 partitions, tasks 0, 1 and
    3 all hash to partition 3, so one core runs three tasks); :class:`StageProcessor` takes
    the task back as ``key % tasks``."""
    out = []
    for p in range(tasks):
        v = p
        while spark_hash_int(v) % tasks != p:
            v += tasks
        out.append(v)
    return out


def task_group_column(partition: Any, tasks: int) -> Any:
    """The grouping column of the stages: ``partition`` mapped by :func:`task_group_values`
    (other values, if any, unchanged)."""
    from pyspark.sql import functions as F

    values = task_group_values(tasks)
    mapping = F.create_map(*[F.lit(x) for p, v in enumerate(values) for x in (p, v)])
    return F.coalesce(mapping[partition], partition)


def _load_topology(blob: bytes, digest: str) -> Any:
    topo = _TOPOLOGIES.get(digest)
    if topo is None:
        from pyspark import cloudpickle

        topo = _TOPOLOGIES[digest] = cloudpickle.loads(blob)
    return topo


class SparkTaskState:
    """A task's durable state in Spark: ValueState ``task`` and MapState ``buckets``."""

    def __init__(self, meta: Any, buckets: Any) -> None:
        self.meta = meta
        self.buckets = buckets

    def get_meta(self) -> bytes | None:
        row = self.meta.get()
        return None if row is None else bytes(row[0])

    def set_meta(self, blob: bytes) -> None:
        self.meta.update((blob,))

    def load(self, store: str, bucket: int) -> Any | None:
        row = self.buckets.getValue((store, bucket))
        return None if row is None else pickle.loads(row[0])

    def save_bucket(self, store: str, bucket: int, blob: bytes | None) -> None:
        if blob is None:
            self.buckets.removeKey((store, bucket))
        else:
            self.buckets.updateValue((store, bucket), (blob,))


class StageProcessor(StatefulProcessor):
    """Runs the tasks of one sub-topology."""

    def __init__(
        self,
        topology_blob: bytes,
        sub_topology_id: int,
        config: StreamsConfig,
        topic_partitions: dict[str, int],
        changelog_topics: dict[str, str] | None = None,
    ) -> None:
        self.topology_blob = topology_blob
        self.digest = hashlib.sha256(topology_blob).hexdigest()
        self.sub_topology_id = sub_topology_id
        self.config = config
        self.topic_partitions = topic_partitions
        #: store -> changelog topic, for the stores whose changelog is written out
        self.changelog_topics = changelog_topics or {}
        #: number of tasks: the grouping key is the task or a value of ``task_group_values``
        self.tasks = max([*topic_partitions.values(), 1])

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.meta = handle.getValueState("task", "blob binary")
        self.buckets = handle.getMapState("buckets", "store string, bucket int", "blob binary")

    def close(self) -> None:
        pass

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        partition = int(key[0]) % self.tasks
        frame = _unpacked(pd.concat(list(rows), ignore_index=True))
        topology = _load_topology(self.topology_blob, self.digest)
        sub = topology.sub_topologies()[self.sub_topology_id]
        own = frame["topic"].isin(sub.source_topics) & (frame["kind"] == KIND_RECORD)
        ticks = frame["topic"] == TICK_TOPIC
        if own.all():
            mine = frame
        else:
            passthrough = frame[~own]
            if len(passthrough):
                yield passthrough[OUTPUT_COLUMNS]
            mine = frame[own]
        if not len(mine) and not ticks.any():
            return
        out = self._run_task(topology, sub, partition, mine)
        if len(out):  # pyspark 4.3 cannot convert an empty result frame to Arrow
            yield out

    def _run_task(
        self, topology: Any, sub: Any, partition: int, frame: pd.DataFrame
    ) -> pd.DataFrame:
        result = run_task_batch(
            topology,
            sub,
            partition,
            _ordered(frame, topology.internal_topics),
            SparkTaskState(self.meta, self.buckets),
            self.config,
            changelog_stores=self.changelog_topics.keys(),
        )
        task_id = f"{sub.id}_{partition}"
        base = partition * UPSTREAM_STRIDE + result.first_output_seq
        out = result.output
        count = len(out)
        keys = [o.key for o in out]
        topics = [o.topic for o in out]
        rows: dict[str, list[Any]] = {
            "kind": [KIND_RECORD] * count,
            "topic": topics,
            "key": keys,
            "value": [o.value for o in out],
            "timestamp": [o.timestamp for o in out],
            "partition": self._partitions_of(topics, keys),
            "offset": list(range(base, base + count)),
            "task": [task_id] * count,
        }
        if self.changelog_topics:
            self._changelog_rows(topology, result.changelog, rows, task_id, partition)
        counters = {k: v for k, v in result.metrics.counters.items() if v}
        if counters:
            metrics_row = (
                KIND_METRICS,
                None,
                None,
                json.dumps(counters).encode(),
                -1,
                partition,
                -1,
                task_id,
            )
            for column, value in zip(OUTPUT_COLUMNS, metrics_row):
                rows[column].append(value)
        return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)

    def _partitions_of(self, topics: list[str], keys: list[bytes | None]) -> list[int]:
        """The partition of each output record (Kafka's default partitioner by key), hashing
        each distinct key once."""
        out = []
        memo: dict[tuple[bytes, int], int] = {}
        counts = self.topic_partitions
        for topic, key in zip(topics, keys):
            n = counts.get(topic, 1)
            if key is None or n == 1:
                out.append(0)
                continue
            part = memo.get((key, n))
            if part is None:
                part = memo[(key, n)] = kafka_partition(key, n)
            out.append(part)
        return out

    def _changelog_rows(
        self,
        topology: Any,
        changelog: dict[str, list],
        rows: dict[str, list],
        task_id: str,
        partition: int,
    ) -> None:
        """Append the batch's committed changes of each written-out store as changelog rows
        (partition = the task's partition, as Kafka Streams' changelogs are co-partitioned)."""
        for store, entries in changelog.items():
            topic = self.changelog_topics.get(store)
            if topic is None:
                continue
            codec = ChangelogCodec.for_builder(topology.store_builders[store])
            for key, value, ts in entries:
                for column, item in zip(
                    OUTPUT_COLUMNS,
                    (
                        KIND_CHANGELOG,
                        topic,
                        codec.encode_key(key),
                        codec.encode_value(value),
                        ts,
                        partition,
                        -1,
                        task_id,
                    ),
                ):
                    rows[column].append(item)


def _unpacked(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its packed rows (:func:`kspark.spark.sources.pack_records`) replaced by
    the records they carry."""
    topics = frame["topic"]
    packed = topics.str.startswith(PACKED_PREFIX, na=False).to_numpy(dtype=bool)
    if not packed.any():
        return frame
    rows = frame[packed]
    table = unpack_records(
        rows["topic"].tolist(), rows["partition"].tolist(), rows["key"].tolist()
    )
    records = pd.DataFrame(
        {
            "kind": KIND_RECORD,
            "topic": table.column("topic").to_numpy(zero_copy_only=False),
            "key": table.column("key").to_numpy(zero_copy_only=False),
            "value": table.column("value").to_numpy(zero_copy_only=False),
            "timestamp": table.column("timestamp").to_numpy(),
            "partition": table.column("partition").to_numpy(),
            "offset": table.column("offset").to_numpy(),
            "task": None,
        },
        columns=OUTPUT_COLUMNS,
    )
    if packed.all():
        return records
    return pd.concat([frame[~packed][OUTPUT_COLUMNS], records], ignore_index=True)


def _ordered(frame: pd.DataFrame, repartition_topics: Collection[str] = ()) -> SourceBatch:
    """Records of each topic-partition in offset order; across topics, the one whose next
    record has the smallest timestamp goes first (as a Kafka Streams task chooses). Built as
    columns, without a Python object per record.

    A repartition topic's rows come from several upstream tasks, each in its own offset range
    (``upstream * UPSTREAM_STRIDE + seq``) and written side by side within the micro-batch;
    each upstream task's rows are merged by timestamp like a topic of their own, as they
    would interleave on a Kafka partition, rather than one upstream task after another."""
    topics = frame["topic"].to_numpy(dtype=object)
    offsets = frame["offset"].to_numpy(dtype=np.int64)
    stamps = frame["timestamp"].to_numpy(dtype=np.int64)
    names = pd.unique(topics)
    split = [n for n in names if n in repartition_topics]
    if len(names) <= 1 and not split:
        order = None if _ascending(offsets) else np.argsort(offsets, kind="stable")
        topic = str(names[0]) if len(names) else ""
        return _batch(frame, order, topic, None)
    runs = []
    for name in sorted(names):
        idx = np.flatnonzero(topics == name)
        idx = idx[np.argsort(offsets[idx], kind="stable")]
        if name in split:
            upstream = offsets[idx] // UPSTREAM_STRIDE
            cuts = np.flatnonzero(upstream[1:] != upstream[:-1]) + 1
            runs.extend(np.split(idx, cuts))
        else:
            runs.append(idx)
    if len(runs) == 1:
        order = runs[0]
        topic = str(names[0])
        return _batch(frame, None if _ascending(order) else order, topic, None)
    heads = [(int(stamps[run[0]]), i, 0) for i, run in enumerate(runs)]
    heapq.heapify(heads)
    merged: list[int] = []
    while heads:
        _, i, j = heapq.heappop(heads)
        run = runs[i]
        merged.append(int(run[j]))
        if j + 1 < len(run):
            heapq.heappush(heads, (int(stamps[run[j + 1]]), i, j + 1))
    order = np.array(merged, dtype=np.int64)
    if len(names) == 1:
        return _batch(frame, order, str(names[0]), None)
    return _batch(frame, order, None, topics[order].tolist())


def _ascending(values: np.ndarray) -> bool:
    return len(values) < 2 or bool((values[1:] >= values[:-1]).all())


def _batch(
    frame: pd.DataFrame, order: np.ndarray | None, topic: str | None, topics: list[str] | None
) -> SourceBatch:
    def column(name: str, dtype: Any = None) -> np.ndarray:
        values = frame[name].to_numpy(dtype=dtype)
        return values if order is None else values[order]

    return SourceBatch(
        column("timestamp", np.int64),
        column("partition", np.int64),
        column("offset", np.int64),
        column("key", object),
        column("value", object),
        topic,
        topics,
    )
