"""One sub-topology as a Spark stateful operator: ``transformWithStateInPandas`` grouped by task.

This module holds what Spark unpickles in every Python worker (and in the driver-side runner
that reads the state schema at query planning), so it imports nothing heavy; the row work of a
batch is in :mod:`kspark.spark.internals.stage_rows`.

Every stage reads and writes rows of the same layout (``kspark.io.schema.OUTPUT_DDL``). A stage
processes the record rows of its own source topics (and tick rows) with the same
:class:`~kspark.runtime.task.Task` the test driver runs, and passes every other row through, so
that the sub-topologies of a topology run as one chain of operators in one query, crossing
repartition topics inside the query.

Task state in Spark state, per task (the grouping key is a value ``v`` with
``v % tasks ==`` the task's partition, see
:func:`~kspark.spark.internals.task_placement.task_group_values`):
- ``task``: ValueState holding the pickled :meth:`Task.checkpoint_state` (stream time,
  punctuation due times, processors' own state, stores' metadata);
- ``buckets``: MapState ``(store, bucket) -> pickled bucket``, read on first use in a batch and
  written back only when dirty; a task whose buckets are small keeps them in ``task`` instead
  (:class:`SparkTaskState`).
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from kspark.spark.internals.task_placement import partition_tasks

if TYPE_CHECKING:
    import pandas as pd

    from kspark.config import StreamsConfig
    from kspark.spark.internals.file_ranges import FileRangeRecords
    from kspark.spark.internals.task_sinks import TaskSinks

_TOPOLOGIES: dict[str, Any] = {}

# State schemas as types, not DDL strings: pyspark sends a DDL string to the JVM to be parsed
# (with Spark's SQL parser) every time a task opens its state, i.e. per task and micro-batch.
_BLOB = StructType([StructField("blob", BinaryType())])
_BUCKET_KEY = StructType([StructField("store", StringType()), StructField("bucket", IntegerType())])


def _load_topology(blob: bytes, digest: str) -> Any:
    topo = _TOPOLOGIES.get(digest)
    if topo is None:
        from pyspark import cloudpickle

        topo = _TOPOLOGIES[digest] = cloudpickle.loads(blob)
    return topo


#: the start of a task value that holds the task's buckets too (a pickled task state starts
#: with pickle's protocol byte ``0x80``)
_INLINE = b"KSPI\x01"
#: the start of such a value compressed with zstd (then the length of what it holds)
_INLINE_ZSTD = b"KSPI\x02"
_LENGTH = 8
#: task values at least this long are compressed (Spark's state server copies a binary value
#: to its Python worker byte by byte: a smaller value is read faster)
COMPRESS_FROM = 16 << 10
#: a task whose micro-batch changed at least half of its buckets keeps them in its task value
#: while they total at most this many times ``state.inline.max.bytes``
CHANGED_INLINE_FACTOR = 16


@functools.cache
def _zstd() -> Any:
    import pyarrow as pa

    return pa.Codec("zstd", compression_level=1)


def pack_task_value(meta: bytes, buckets: dict[tuple[str, int], bytes]) -> bytes:
    """The ValueState ``task`` holding the task state ``meta`` and every bucket's blob
    (compressed when long)."""
    body = b"".join((len(meta).to_bytes(_LENGTH, "big"), meta,
                     pickle.dumps(buckets, protocol=5)))
    if len(body) < COMPRESS_FROM:
        return _INLINE + body
    return b"".join((_INLINE_ZSTD, len(body).to_bytes(_LENGTH, "big"),
                     _zstd().compress(body, asbytes=True)))


def unpack_task_value(value: bytes) -> tuple[bytes, dict[tuple[str, int], bytes] | None]:
    """The task state of a ValueState ``task`` and the buckets it holds (``None``: they are in
    the MapState ``buckets``)."""
    head = len(_INLINE)
    if value.startswith(_INLINE_ZSTD):
        size = int.from_bytes(value[head:head + _LENGTH], "big")
        body = memoryview(_zstd().decompress(memoryview(value)[head + _LENGTH:],
                                             decompressed_size=size, asbytes=True))
    elif value.startswith(_INLINE):
        body = memoryview(value)[head:]
    else:
        return value, None
    end = _LENGTH + int.from_bytes(body[:_LENGTH], "big")
    return bytes(body[_LENGTH:end]), pickle.loads(body[end:])


class SparkTaskState:
    """A task's durable state in Spark: ValueState ``task`` and MapState ``buckets``.

    A task whose buckets together are at most ``inline_max_bytes`` (pickled) keeps them in its
    ValueState with its task state (:func:`pack_task_value`): one read and one write of Spark
    state a micro-batch instead of one per bucket; so does a task whose micro-batch changed at
    least half of its buckets while they are at most :data:`CHANGED_INLINE_FACTOR` times that
    (each would be written anyway). A task moves its buckets to the MapState when they grow
    past that, and back when a micro-batch that read all of them finds them small again
    (docs/semantics.md §6)."""

    def __init__(self, meta: Any, buckets: Any, inline_max_bytes: int = 0) -> None:
        self.meta = meta
        self.buckets = buckets
        self.inline_max_bytes = inline_max_bytes
        #: every bucket's blob, when known (held in the task value, or read from the MapState
        #: at once by :meth:`prefetch`), with this batch's saves (a task that runs the batch
        #: again, record by record, loads the same state)
        self._known: dict[tuple[str, int], bytes] | None = None
        #: whether the buckets are in the task value
        self._inline = False
        #: buckets saved while all were known: written at :meth:`set_meta` (``None``: removed)
        self._saved: dict[tuple[str, int], bytes | None] = {}

    def get_meta(self) -> bytes | None:
        row = self.meta.get()
        if row is None:  # a new task: nothing stored anywhere
            self._known, self._inline = {}, True
            return None
        meta, inline = unpack_task_value(bytes(row[0]))
        if inline is not None:
            self._known, self._inline = inline, True
        return meta

    def load(self, store: str, bucket: int) -> Any | None:
        if self._known is not None:
            blob = self._known.get((store, bucket))
            return None if blob is None else pickle.loads(blob)
        row = self.buckets.getValue((store, bucket))
        return None if row is None else pickle.loads(row[0])

    def prefetch(self) -> None:
        """Every bucket of the task in one pass over the MapState (a few calls to Spark's state
        server instead of one per bucket)."""
        if self._known is None:
            self._known = {(key[0], int(key[1])): value[0]
                           for key, value in self.buckets.iterator()}

    def save_bucket(self, store: str, bucket: int, blob: bytes | None) -> None:
        key = (store, bucket)
        if self._known is None:
            self._write(key, blob)
            return
        if blob is None:
            self._known.pop(key, None)
        else:
            self._known[key] = blob
        self._saved[key] = blob

    def _keeps_inline(self, known: dict[tuple[str, int], bytes]) -> bool:
        """Whether the buckets ``known`` (all of the task's) go in the task value."""
        total, limit = sum(map(len, known.values())), self.inline_max_bytes
        return total <= limit or (total <= limit * CHANGED_INLINE_FACTOR
                                  and 2 * len(self._saved) >= len(known))

    def set_meta(self, blob: bytes) -> None:
        known = self._known
        if known is not None and self._keeps_inline(known):
            if not self._inline:
                self.buckets.clear()
            self.meta.update((pack_task_value(blob, known),))
            self._inline = True
        else:
            if self._inline:  # grown past the limit: every bucket moves to the MapState
                assert known is not None
                self._saved = dict(known)
            for key, saved in self._saved.items():
                self._write(key, saved)
            self.meta.update((blob,))
            self._inline = False
        self._saved = {}

    def _write(self, key: tuple[str, int], blob: bytes | None) -> None:
        if blob is None:
            self.buckets.removeKey(key)
        else:
            self.buckets.updateValue(key, (blob,))


class StageProcessor(StatefulProcessor):
    """Runs the tasks of one sub-topology."""

    def __init__(
        self,
        topology_blob: bytes,
        sub_topology_id: int,
        config: StreamsConfig,
        topic_partitions: dict[str, int],
        changelog_topics: dict[str, str] | None = None,
        kafka_reads: dict[str, dict[str, str]] | None = None,
        tasks: int | None = None,
        global_topics_after: frozenset[str] = frozenset(),
        task_sinks: TaskSinks | None = None,
        spark_partitions: int | None = None,
    ) -> None:
        self.topology_blob = topology_blob
        self.digest = hashlib.sha256(topology_blob).hexdigest()
        self.sub_topology_id = sub_topology_id
        self.config = config
        self.topic_partitions = topic_partitions
        #: store -> changelog topic, for the stores whose changelog is written out
        self.changelog_topics = changelog_topics or {}
        #: number of tasks: the grouping key is the task or a value of ``task_group_values``
        self.tasks = tasks or max([*topic_partitions.values(), 1])
        #: global stores' topics that a later stage keeps too (their rows pass through)
        self.global_topics_after = global_topics_after
        #: file range -> its records, per partition until taken (this Spark task's reads; the
        #: processor is unpickled per Spark task, and ``close`` forgets them)
        self._file_ranges: dict[bytes, FileRangeRecords] = {}
        #: topic -> options of the ``kspark_kafka`` source whose ranges the stages read
        self.kafka_reads = kafka_reads or {}
        #: the sink topics this stage's tasks write right after they ran (``None``: none)
        self.task_sinks = task_sinks
        #: Spark partitions of the stage (which runs which tasks: :func:`partition_tasks`)
        self.spark_partitions = spark_partitions or self.tasks
        self._sinks_opened = False

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.meta = handle.getValueState("task", _BLOB)
        self.buckets = handle.getMapState("buckets", _BUCKET_KEY, _BLOB)

    def close(self) -> None:
        self._file_ranges = {}
        if self.task_sinks is not None and self._sinks_opened:
            self._sinks_opened = False
            self.task_sinks.close_all()

    def _open_sinks(self) -> None:
        """At the Spark task's first kspark task: the sink writers of all its tasks start
        opening, so that the later tasks find theirs open."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if self.task_sinks is None or self._sinks_opened or context is None:
            return
        self._sinks_opened = True
        here = partition_tasks(self.tasks, self.spark_partitions, context.partitionId())
        self.task_sinks.open([f"{self.sub_topology_id}_{p}" for p in here])

    def file_records(self, blob: bytes, partition: int) -> Any | None:
        """The records of ``partition`` in the range of a range row (``None``: none): a file
        range is read once per Spark task, for all the tasks it runs; a Kafka range (one
        partition's) by the task of its partition."""
        from kspark.spark.internals.kafka_source import is_kafka_range

        if is_kafka_range(blob):
            return self._kafka_records(blob)
        records = self._file_ranges.get(blob)
        if records is None:
            from kspark.spark.internals.file_ranges import read_file_range

            records = self._file_ranges[blob] = read_file_range(blob)
        return records.pop(partition, None)

    def _kafka_records(self, blob: bytes) -> Any | None:
        import json

        from kspark.kafka.reader import OffsetRange
        from kspark.spark.internals.kafka_source import KafkaStreamReader
        from kspark.spark.internals.wire import task_records

        spec = json.loads(blob)
        options = self.kafka_reads.get(spec["kafka"])
        if options is None:
            raise ValueError(f"a Kafka range row of topic {spec['kafka']!r}, which this query "
                             f"does not read from Kafka in its stages")
        rng = OffsetRange(*spec["range"])
        batch = KafkaStreamReader(options).read_range_batch(rng, spec["kafka"])
        return task_records(batch) if batch.num_rows else None

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        from kspark.spark.internals.stage_rows import stage_batch

        topology = _load_topology(self.topology_blob, self.digest)
        self._open_sinks()
        yield from stage_batch(
            self,
            topology,
            int(key[0]) % self.tasks,
            rows,
            SparkTaskState(self.meta, self.buckets, self.config.state_inline_max_bytes),
        )
