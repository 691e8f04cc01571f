"""A Task: one partition of one sub-topology, driven record by record.

The test driver and the Spark runtime run this same class; they differ only in where store
buckets come from (a :class:`~kspark.state.base.BucketLoader`) and in who drives the clocks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kspark import serdes as _serdes
from kspark.config import LOG_AND_CONTINUE, StreamsConfig
from kspark.drop_log import DROPS
from kspark.errors import InvalidStateStoreError, SerializationError, StreamsError
from kspark.processor.api import ProcessorContext
from kspark.processor.punctuation import (
    Cancellable,
    PunctuationQueue,
    PunctuationSchedule,
    PunctuationType,
)
from kspark.record_columns import RecordColumns
from kspark.records import Headers, Record, RecordMetadata
from kspark.runtime.metrics import Metrics
from kspark.state.base import BucketLoader, StoreBase
from kspark.topology.topology import ProcessorNode, SinkNode, SourceNode, SubTopology, Topology


@dataclass(slots=True)
class SourceRecord:
    """A serialized input record and where it came from."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(slots=True)
class OutputRecord:
    """A serialized record written by a sink (or a changelog / dead-letter record)."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers = ()


@dataclass(slots=True)
class OutputBlock:
    """Serialized records of one sink written at once, as columns (none has headers)."""

    topic: str
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]

    def __len__(self) -> int:
        return len(self.timestamps)

    def records(self) -> list[OutputRecord]:
        topic = self.topic
        return [OutputRecord(topic, k, v, t)
                for k, v, t in zip(self.keys, self.values, self.timestamps)]


#: what a task writes, in order: single records and blocks of records
Output = list["OutputRecord | OutputBlock"]


def output_records(output: Output) -> list[OutputRecord]:
    """Every record of ``output``, blocks opened up."""
    out: list[OutputRecord] = []
    for part in output:
        if isinstance(part, OutputBlock):
            out.extend(part.records())
        else:
            out.append(part)
    return out


def output_count(output: Output) -> int:
    """How many records ``output`` holds."""
    return sum(len(part) if isinstance(part, OutputBlock) else 1 for part in output)


def output_columns(output: Output
                   ) -> tuple[list[str], list[bytes | None], list[bytes | None], list[int]]:
    """Topic, key, value and timestamp of every record of ``output`` (headers left out), as
    columns, without an object per record of a block."""
    topics: list[str] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    stamps: list[int] = []
    for part in output:
        if isinstance(part, OutputBlock):
            topics.extend([part.topic] * len(part))
            keys.extend(part.keys)
            values.extend(part.values)
            stamps.extend(part.timestamps)
        else:
            topics.append(part.topic)
            keys.append(part.key)
            values.append(part.value)
            stamps.append(part.timestamp)
    return topics, keys, values, stamps


#: a column of byte strings as ``(codes, distinct byte strings)``: ``uniques[codes[i]]``, or
#: null where ``codes[i] == -1`` (each distinct byte string once in ``uniques``)
Encoded = tuple[np.ndarray, np.ndarray]


class SourceBatch:
    """Serialized input records of one task in processing order, as columns.

    ``topic`` names the topic of every record when they share one; otherwise ``topics`` holds
    each record's topic. The Spark stage builds one per task and micro-batch without creating a
    Python object per record; :meth:`records` yields :class:`SourceRecord` objects for the
    record-by-record path.
    """

    __slots__ = ("encoded_keys", "encoded_values", "keys", "offsets", "partitions", "timestamps",
                 "topic", "topics", "values")

    def __init__(
        self,
        timestamps: np.ndarray,
        partitions: np.ndarray,
        offsets: np.ndarray,
        keys: np.ndarray,
        values: np.ndarray,
        topic: str | None,
        topics: list[str] | None = None,
        encoded_keys: Encoded | None = None,
        encoded_values: Encoded | None = None,
    ) -> None:
        self.timestamps = np.asarray(timestamps, dtype=np.int64)
        self.partitions = np.asarray(partitions, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.keys = keys
        self.values = values
        self.topic = topic
        self.topics = topics
        #: ``keys`` and ``values`` as codes into their distinct byte strings, when the source
        #: gives them so (``codes[i] == -1``: null); saves hashing every byte string again
        self.encoded_keys = encoded_keys
        self.encoded_values = encoded_values

    @classmethod
    def from_records(cls, records: Iterable[SourceRecord]) -> SourceBatch:
        """Columns of ``records`` (headers are not kept: use the records themselves then)."""
        recs = list(records)
        topics = [r.topic for r in recs]
        single = topics[0] if topics and all(t == topics[0] for t in topics) else None
        keys = np.empty(len(recs), dtype=object)
        keys[:] = [r.key for r in recs]
        values = np.empty(len(recs), dtype=object)
        values[:] = [r.value for r in recs]
        return cls(
            np.array([r.timestamp for r in recs], dtype=np.int64),
            np.array([r.partition for r in recs], dtype=np.int64),
            np.array([r.offset for r in recs], dtype=np.int64),
            keys,
            values,
            single if single is not None or not recs else None,
            None if single is not None or not recs else topics,
        )

    def __len__(self) -> int:
        return len(self.timestamps)

    def topic_at(self, i: int) -> str:
        return self.topic if self.topic is not None else self.topics[i]  # type: ignore[index]

    def metadata(self, i: int) -> RecordMetadata:
        return RecordMetadata(self.topic_at(i), int(self.partitions[i]), int(self.offsets[i]))

    def record(self, i: int) -> SourceRecord:
        return SourceRecord(
            self.topic_at(i),
            int(self.partitions[i]),
            int(self.offsets[i]),
            int(self.timestamps[i]),
            self.keys[i],
            self.values[i],
        )

    def records(self) -> Iterator[SourceRecord]:
        topics = [self.topic] * len(self) if self.topic is not None else self.topics
        yield from map(
            SourceRecord,
            topics,
            self.partitions.tolist(),
            self.offsets.tolist(),
            self.timestamps.tolist(),
            self.keys,
            self.values,
        )


class FastPathAborted(Exception):
    """A vectorised batch path failed after changing state: rerun the batch record by record
    from the durable state (which reproduces the exact error, if it is one)."""


#: serdes whose ``deserialize`` is a pure function of the bytes: decoded once per distinct value
_PURE_SERDES = (_serdes.String, _serdes.Long, _serdes.Double, _serdes.Bytes, _serdes.Json)
_IMMUTABLE = (str, int, float, bool, bytes, type(None))
_FLAT_CONTAINERS = (dict, list)


def _is_flat(value: Any) -> bool:
    """Immutable, or a dict or list whose items are immutable (a shallow copy is a deep one)."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return True
    if kind is dict:
        return all(type(v) in _IMMUTABLE for v in value.values())
    if kind is list:
        return all(type(v) in _IMMUTABLE for v in value)
    return False


class DecodedColumn:
    """A deserialized key or value column: ``codes`` index ``uniques`` (-1: ``None``)."""

    __slots__ = ("codes", "flat", "immutable", "raw", "serde", "uniques")

    def __init__(
        self,
        codes: np.ndarray,
        uniques: list[Any],
        raw: Any,
        serde: Any,
        immutable: bool,
        flat: bool = False,
    ) -> None:
        self.codes = codes
        self.uniques = uniques
        self.raw = raw
        self.serde = serde
        self.immutable = immutable
        #: every value is immutable or a dict or list of immutable items: a shallow copy is
        #: a fresh object equal to a new decode
        self.flat = flat

    def value(self, i: int) -> Any:
        """The deserialized value of record ``i`` (a fresh object unless immutable)."""
        code = self.codes[i]
        if code < 0:
            return None
        if self.immutable:
            return self.uniques[code]
        if self.flat:
            value = self.uniques[code]
            return value.copy() if type(value) in _FLAT_CONTAINERS else value
        return self.serde.deserialize(self.raw[i])


def decode_column(raw: Any, serde: Any, *, dedupe: bool, encoded: Encoded | None = None
                  ) -> DecodedColumn | None:
    """Deserialize a column once per distinct byte string (pure built-in serdes only). With
    ``dedupe``, byte strings that decode to equal values must be distinct values (else
    ``None``). ``None`` also when a value does not decode (the record path reports it).
    ``encoded`` (the same column as codes, see :data:`Encoded`) gives the same result faster."""
    import pandas as pd

    if type(serde) not in _PURE_SERDES:
        return None
    if encoded is None:
        codes, uniq = pd.factorize(np.asarray(raw, dtype=object), use_na_sentinel=True)
    else:
        # the codes renumbered in order of first appearance, as factorizing the bytes does
        raw_codes, raw_uniques = encoded
        valid = raw_codes >= 0
        codes = np.full(len(raw_codes), -1, dtype=np.int64)
        codes[valid], first = pd.factorize(raw_codes[valid])
        uniq = raw_uniques[first]
    try:
        decoded = [serde.deserialize(u) for u in uniq]
    except SerializationError:
        return None
    codes = codes.astype(np.int64, copy=False)
    nulls = [i for i, d in enumerate(decoded) if d is None]
    if nulls:
        codes = np.where(np.isin(codes, nulls), -1, codes)
    immutable = all(type(d) in _IMMUTABLE for d in decoded)
    flat = not immutable and all(_is_flat(d) for d in decoded)
    if dedupe:
        try:
            distinct = {d for d in decoded if d is not None}
        except TypeError:
            return None
        if len(distinct) != len(decoded) - len(nulls):
            return None
    return DecodedColumn(codes, decoded, raw, serde, immutable, flat)


class BatchView:
    """What a processor's vectorised ``process_batch`` sees of one task's batch: decoded keys
    and values, timestamps, and hooks to run single records the exact way and to forward
    results in the context of a given record."""

    def __init__(
        self,
        task: Task,
        node: str,
        batch: SourceBatch,
        keys: DecodedColumn,
        values: DecodedColumn,
    ) -> None:
        self.task = task
        self.node = node
        self.batch = batch
        self.keys = keys
        self.values = values
        self.timestamps = batch.timestamps
        #: the task's stream time after each record
        self.stream_times = np.maximum.accumulate(
            np.maximum(batch.timestamps, task.stream_time)
        )

    def __len__(self) -> int:
        return len(self.batch)

    def captures_changelog(self, store: str) -> bool:
        return self.task.captures_changelog(store)

    def stores_of_other_nodes(self, store: str) -> bool:
        """Whether any other processor of the sub-topology is connected to ``store``."""
        topo = self.task.topology
        for name in self.task.sub_topology.nodes:
            node = topo.nodes[name]
            if name != self.node and isinstance(node, ProcessorNode) and store in node.stores:
                return True
        return False

    def _enter(self, i: int) -> RecordMetadata:
        self.task.stream_time = int(self.stream_times[i])
        return self.batch.metadata(i)

    def process_exact(self, i: int, process: Callable[[Record], None]) -> None:
        """Run record ``i`` through ``process`` as the record-by-record path would deliver it."""
        rec = Record(self.keys.value(i), self.values.value(i), int(self.timestamps[i]))
        self.task._run_in(self.node, rec.timestamp, self._enter(i), lambda: process(rec))

    def run_at(self, i: int, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` in the processor's context while record ``i`` is being processed."""
        return self.task._run_in(self.node, int(self.timestamps[i]), self._enter(i), fn)

    def forward_at(self, i: int, records: list[Record]) -> None:
        """Forward ``records`` from the processor while record ``i`` is being processed."""
        self.forward_groups([i], [records])

    def forward_each(self, positions: np.ndarray, records: list[Record]) -> None:
        """Forward each record from the processor while the record at its position
        (``positions``, nondecreasing) is being processed."""
        if not records:
            return
        if self.task.sink_chain(self.node) is not None and all(
            r.timestamp is not None for r in records
        ):
            self.task.forward_all(self.node, records)  # the sink does not see the position
            return
        cuts = np.flatnonzero(positions[1:] != positions[:-1]) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(records)]
        self.forward_groups(
            positions[starts].tolist(), [records[a:b] for a, b in zip(starts, ends)]
        )

    def forward_columns(self, positions: np.ndarray, columns: RecordColumns) -> None:
        """:meth:`forward_each` of ``columns.records()``; into a sink chain without making
        the records where its operators map columns (:meth:`Task.forward_columns`)."""
        if not len(columns):
            return
        if self.task.sink_chain(self.node) is not None:
            self.task.forward_columns(self.node, columns)  # the sink does not see the position
            return
        self.forward_each(positions, columns.records())

    def forward_groups(self, positions: list[int], groups: list[list[Record]]) -> None:
        """For each position ``i`` in increasing order, forward its group of records from the
        processor while record ``i`` is being processed."""
        task, node, batch = self.task, self.node, self.batch
        forward = task.forward
        stamps = self.timestamps[positions].tolist()
        stream_times = self.stream_times[positions].tolist()
        parts = batch.partitions[positions].tolist()
        offsets = batch.offsets[positions].tolist()
        previous = task._current_node, task._timestamp, task._metadata
        try:
            for k, i in enumerate(positions):
                task.stream_time = stream_times[k]
                task._current_node, task._timestamp = node, stamps[k]
                task._metadata = RecordMetadata(batch.topic_at(i), parts[k], offsets[k])
                for rec in groups[k]:
                    forward(node, rec)
        finally:
            task._current_node, task._timestamp, task._metadata = previous


def _describe_key(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 100 else text[:97] + "..."


class Task:
    """Processors, stores, stream time and punctuation of one task."""

    def __init__(
        self,
        topology: Topology,
        sub_topology: SubTopology,
        partition: int,
        *,
        config: StreamsConfig,
        metrics: Metrics,
        wall_clock: Callable[[], int],
        loader: BucketLoader | None = None,
        changelog_stores: Collection[str] | None = None,
    ) -> None:
        self.topology = topology
        self.sub_topology = sub_topology
        self.partition = partition
        self.task_id = f"{sub_topology.id}_{partition}"
        self.config = config
        self.application_id = config.application_id
        self.metrics = metrics
        self.wall_clock_ms = wall_clock
        self.loader = loader
        self.stream_time = -1
        #: wall-clock time of the last input record, and how far idle closing moved time
        self.last_input_wall_ms: int | None = None
        self.idle_advanced_to = -1
        #: records written by sinks (and dead-letter records) since the last drain
        self.output: Output = []
        #: changelog entries since the last drain: store -> [(key, value, timestamp)]
        self.changelog: dict[str, list[tuple[Any, Any, int]]] = {}
        #: the stores whose changelog entries are kept (``None``: all)
        self.changelog_stores = None if changelog_stores is None else frozenset(changelog_stores)
        self._restored_dues: dict[str, tuple[str, int, int]] = {}
        self._processor_state: dict[str, dict[str, Any]] = {}
        self._stream_queue = PunctuationQueue()
        self._wall_queue = PunctuationQueue()
        self._current_node: str | None = None
        self._failed_node: str | None = None
        self._timestamp = -1
        self._metadata: RecordMetadata | None = None
        self._children: dict[str, list[str]] = {}
        self._source_by_topic: dict[str, SourceNode] = {}
        self.processors: dict[str, Any] = {}
        #: sink node name -> (node, key serde, value serde)
        self._sinks: dict[str, tuple[SinkNode, Any, Any]] = {}
        #: node -> its :meth:`sink_chain`
        self._chains: dict[str, tuple[list[tuple[str, Any]], str] | None] = {}
        self.stores: dict[str, StoreBase] = {}
        self._initialized = False

    # -- lifecycle ---------------------------------------------------------------------------
    def restore_state(self, state: dict[str, Any] | None) -> None:
        """Restore what :meth:`checkpoint_state` returned; call before :meth:`init`."""
        if not state:
            return
        self.stream_time = state.get("stream_time", -1)
        self.last_input_wall_ms = state.get("last_input_wall_ms")
        self.idle_advanced_to = state.get("idle_advanced_to", -1)
        self._restored_dues = dict(state.get("punctuations", {}))
        self._processor_state = {k: dict(v) for k, v in state.get("processors", {}).items()}
        self._store_meta = state.get("stores", {})

    def checkpoint_state(self) -> dict[str, Any]:
        """Small state persisted with the task: stream time, punctuation due times, processors'
        own state and each store's metadata."""
        dues = {}
        for queue in (self._stream_queue, self._wall_queue):
            for s in queue.schedules():
                dues[s.key] = (s.type.value, s.interval, s.due)
        return {
            "stream_time": self.stream_time,
            "last_input_wall_ms": self.last_input_wall_ms,
            "idle_advanced_to": self.idle_advanced_to,
            "punctuations": dues,
            "processors": self._processor_state,
            "stores": {name: store.meta() for name, store in self.stores.items()},
        }

    def init(self) -> None:
        """Build stores and processors and call each processor's ``init``."""
        topo = self.topology
        store_meta = getattr(self, "_store_meta", {})
        for name in self.sub_topology.stores:
            store = topo.store_builders[name].build(num_buckets=self.config.state_buckets)
            store.init(self, self.loader)
            if name in store_meta:
                store.restore_meta(store_meta[name])
            if name in topo.source_stores:
                store.read_only = True
            self.stores[name] = store
        for name in self.sub_topology.nodes:
            node = topo.nodes[name]
            self._children[name] = topo.children(name)
            if isinstance(node, SourceNode):
                for t in node.topics:
                    self._source_by_topic[t] = node
        for name in self.sub_topology.nodes:
            node = topo.nodes[name]
            if isinstance(node, ProcessorNode):
                processor = node.supplier()
                self.processors[name] = processor
        for name, processor in self.processors.items():
            self._run_in(
                name, -1, None, lambda p=processor, n=name: p.init(ProcessorContext(self, n))
            )
        self._initialized = True

    def close(self) -> None:
        for name, processor in self.processors.items():
            self._run_in(name, self._timestamp, None, processor.close)
        for store in self.stores.values():
            store.close()

    # -- processing --------------------------------------------------------------------------
    def source_node(self, topic: str) -> SourceNode:
        node = self._source_by_topic.get(topic)
        if node is None:
            for n in self.sub_topology.nodes:
                candidate = self.topology.nodes[n]
                if (
                    isinstance(candidate, SourceNode)
                    and candidate.pattern
                    and candidate.pattern.fullmatch(topic)
                ):
                    self._source_by_topic[topic] = node = candidate
                    break
            else:
                raise StreamsError(f"task {self.task_id}: no source reads topic {topic!r}")
        return node

    def process(self, rec: SourceRecord) -> None:
        """Deserialize and process one input record through the sub-topology."""
        node = self.source_node(rec.topic)
        try:
            key = (node.key_serde or self.config.default_key_serde).deserialize(rec.key)
            value = (node.value_serde or self.config.default_value_serde).deserialize(rec.value)
        except SerializationError as exc:
            self._deserialization_failed(rec, node, exc)
            return
        if rec.timestamp < 0:
            raise StreamsError(
                f"task {self.task_id}: invalid (negative) timestamp {rec.timestamp} at topic "
                f"{rec.topic!r} partition {rec.partition} offset {rec.offset}"
            )
        if rec.timestamp > self.stream_time:
            self.stream_time = rec.timestamp
        if self.config.close_on_idle_ms is not None:
            self.last_input_wall_ms = self.wall_clock_ms()
        self.metrics.counters["process-total"] += 1
        metadata = RecordMetadata(rec.topic, rec.partition, rec.offset)
        record = Record(key, value, rec.timestamp, rec.headers)
        self._metadata = metadata
        try:
            for child in self._children[node.name]:
                self._deliver(child, record)
        except Exception as exc:
            raise self._wrap(
                exc,
                f"processing record at topic {rec.topic!r} partition "
                f"{rec.partition} offset {rec.offset} key {_describe_key(key)} "
                f"timestamp {rec.timestamp}",
            ) from exc

    def process_batch(self, batch: SourceBatch, fast: bool = True) -> int:
        """Process ``batch`` (in order), with stream-time punctuation after each record.

        With ``fast``, a processor that reads the source directly may handle the whole batch at
        once (``process_batch(view)``), producing exactly what the record-by-record path would;
        returns the number of records it handled that way (0: record by record). Raises
        :class:`FastPathAborted` if that path failed after changing state."""
        if fast and len(batch):
            handled = self._process_batch_fast(batch)
            if handled is not None:
                return handled
        for rec in batch.records():
            self.process(rec)
            self.punctuate_stream_time()
        return 0

    def _process_batch_fast(self, batch: SourceBatch) -> int | None:
        if batch.topic is None or self._stream_queue.schedules():
            return None
        node = self.source_node(batch.topic)
        children = self._children[node.name]
        fasts = [getattr(self.processors.get(c), "process_batch", None) for c in children]
        if (
            not children
            or None in fasts
            or int(batch.timestamps.min()) < 0
            or not self._separate_branches(children)
        ):
            return None
        keys = decode_column(batch.keys, node.key_serde or self.config.default_key_serde,
                             dedupe=True, encoded=batch.encoded_keys)
        if keys is None:
            return None
        values = decode_column(
            batch.values, node.value_serde or self.config.default_value_serde, dedupe=False,
            encoded=batch.encoded_values,
        )
        if values is None:
            return None
        # each branch sees the batch as the record-by-record path shows it to that child; the
        # branches share no node and no sink topic, so running them one after another keeps
        # every topic's order
        views = [BatchView(self, child, batch, keys, values) for child in children]
        initial_stream_time = self.stream_time
        final_stream_time = int(views[0].stream_times[-1])
        counts = []
        try:
            for fast, view in zip(fasts, views):
                handled = fast(view)
                if handled is None and counts:
                    raise FastPathAborted(
                        f"task {self.task_id}: {view.node} declined the batch after "
                        f"{children[0]} took it"
                    )
                if handled is None:
                    break
                counts.append(handled)
        except FastPathAborted:
            raise
        except Exception as exc:
            raise FastPathAborted(f"task {self.task_id}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._metadata = None
        if not counts:
            self.stream_time = initial_stream_time
            return None
        handled = min(counts)
        self.stream_time = final_stream_time
        if self.config.close_on_idle_ms is not None:
            self.last_input_wall_ms = self.wall_clock_ms()
        self.metrics.counters["process-total"] += len(batch)
        return handled

    def _separate_branches(self, children: list[str]) -> bool:
        """Whether the sub-graphs below ``children`` share no node and no sink topic."""
        if len(children) == 1:
            return True
        seen: set[str] = set()
        topics: set[str] = set()
        for child in children:
            branch, todo = set(), [child]
            while todo:
                name = todo.pop()
                if name not in branch:
                    branch.add(name)
                    todo.extend(self._children.get(name, ()))
            sinks = {
                n.topic for n in map(self.topology.nodes.get, branch) if isinstance(n, SinkNode)
            }
            if branch & seen or sinks & topics:
                return False
            seen |= branch
            topics |= sinks
        return True

    def _deserialization_failed(
        self, rec: SourceRecord, node: SourceNode, exc: SerializationError
    ) -> None:
        where = (
            f"topic {rec.topic!r} partition {rec.partition} offset {rec.offset} "
            f"(source {node.name!r})"
        )
        if self.config.deserialization_handler != LOG_AND_CONTINUE:
            raise StreamsError(f"Deserialization error at {where}: {exc}") from exc
        self.record_dropped(
            "deserialization-error", f"skipped undecodable record at {where}: {exc}"
        )
        if self.config.dead_letter_topic:
            headers = (
                *rec.headers,
                ("__kspark.error", str(exc).encode()),
                ("__kspark.origin", f"{rec.topic}/{rec.partition}/{rec.offset}".encode()),
            )
            self.output.append(
                OutputRecord(
                    self.config.dead_letter_topic, rec.key, rec.value, rec.timestamp, headers
                )
            )

    def _wrap(self, exc: Exception, where: str) -> StreamsError:
        if isinstance(exc, StreamsError) and getattr(exc, "located", False):
            return exc
        node = self._failed_node or self._current_node or "?"
        self._failed_node = None
        err = StreamsError(
            f"task {self.task_id}, processor {node!r}: {type(exc).__name__}: {exc} (while {where})"
        )
        err.located = True  # type: ignore[attr-defined]
        return err

    def forward(self, from_node: str, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` from ``from_node`` to its children (or the named child)."""
        if record.timestamp is None:
            record = record.with_timestamp(self._timestamp)
        children = self._children[from_node]
        if child_name is not None:
            if child_name not in children:
                raise StreamsError(
                    f"processor {from_node!r} has no child {child_name!r}; children: {children}"
                )
            children = [child_name]
        for child in children:
            self._deliver(child, record)

    def forward_all(self, from_node: str, records: list[Record]) -> None:
        """:meth:`forward` each of ``records`` (all timestamped) from ``from_node``, in order.
        Through a straight chain of stateless operators into a sink (:meth:`sink_chain`) the
        whole list goes at once, with the same output."""
        chain = self.sink_chain(from_node)
        if chain is None or any(r.timestamp is None for r in records):
            for record in records:
                self.forward(from_node, record)
            return
        mappers, sink = chain
        self._write_sink(sink, self._mapped(mappers, records))

    def forward_columns(self, from_node: str, columns: RecordColumns) -> None:
        """:meth:`forward_all` of ``columns.records()``. Operators of the sink chain that map
        columns (``map_columns``) take them as they are; the records are made only for the
        first operator that does not, and never when all of them do."""
        chain = self.sink_chain(from_node)
        if chain is None:
            self.forward_all(from_node, columns.records())
            return
        mappers, sink = chain
        for i, (name, processor) in enumerate(mappers):
            if getattr(processor, "map_columns", None) is None:
                self._write_sink(sink, self._mapped(mappers[i:], columns.records()))
                return
            columns = self._in_node(name, processor.map_columns, columns)
        node, key_serde, value_serde = self._sink(sink)  # type: ignore[misc]  # a sink node
        try:
            keys = key_serde.serialize_all(columns.keys)
            values = value_serde.serialize_all(columns.values)
        except SerializationError:
            self._write_sink(sink, columns.records())  # the first record's error
            raise
        self.output.append(OutputBlock(node.topic, keys, values, columns.timestamps.tolist()))

    def _mapped(self, mappers: list[tuple[str, Any]], records: list[Record]) -> list[Record]:
        """``records`` through each operator's ``map_batch`` in turn."""
        for name, processor in mappers:
            records = self._in_node(name, processor.map_batch, records)
        return records

    def _in_node(self, name: str, fn: Callable[[Any], Any], arg: Any) -> Any:
        """``fn(arg)``; a failure is reported as processor ``name``'s."""
        try:
            return fn(arg)
        except Exception:
            if self._failed_node is None:
                self._failed_node = name
            raise

    def sink_chain(self, node: str) -> tuple[list[tuple[str, Any]], str] | None:
        """The stateless operators (``map_batch``) and the sink below ``node`` when its output
        goes down one straight line of them into a sink (every node on it with one child)."""
        if node in self._chains:
            return self._chains[node]
        mappers: list[tuple[str, Any]] = []
        chain = None
        name = node
        while len(self._children.get(name, ())) == 1:
            name = self._children[name][0]
            processor = self.processors.get(name)
            if processor is None:
                if isinstance(self.topology.nodes.get(name), SinkNode):
                    chain = (mappers, name)
                break
            if getattr(processor, "map_batch", None) is None:
                break
            mappers.append((name, processor))
        self._chains[node] = chain
        return chain

    def _sink(self, name: str) -> tuple[SinkNode, Any, Any] | None:
        sink = self._sinks.get(name)
        if sink is None:
            node = self.topology.nodes[name]
            if not isinstance(node, SinkNode):
                return None
            sink = self._sinks[name] = (
                node,
                node.key_serde or self.config.default_key_serde,
                node.value_serde or self.config.default_value_serde,
            )
        return sink

    def _write_sink(self, name: str, records: list[Record]) -> None:
        sink = self._sink(name)
        assert sink is not None
        node, key_serde, value_serde = sink
        try:
            keys = key_serde.serialize_all([r.key for r in records])
            values = value_serde.serialize_all([r.value for r in records])
        except SerializationError:
            for record in records:  # raises the first record's error, as record by record
                self._deliver(name, record)
            raise
        topic = node.topic
        if any(r.headers for r in records):
            self.output.extend(
                OutputRecord(topic, k, v, r.timestamp, r.headers)  # type: ignore[arg-type]
                for k, v, r in zip(keys, values, records)
            )
        else:
            self.output.append(
                OutputBlock(topic, keys, values, [r.timestamp for r in records])  # type: ignore[arg-type]
            )

    def _deliver(self, name: str, record: Record) -> None:
        processor = self.processors.get(name)
        if processor is not None:
            previous, previous_ts = self._current_node, self._timestamp
            self._current_node, self._timestamp = name, record.timestamp
            try:
                processor.process(record)
            except Exception:
                if self._failed_node is None:
                    self._failed_node = name
                raise
            finally:
                self._current_node, self._timestamp = previous, previous_ts
            return
        sink = self._sink(name)
        if sink is None:
            return
        node, key_serde, value_serde = sink
        try:
            key = key_serde.serialize(record.key)
            value = value_serde.serialize(record.value)
        except SerializationError as exc:
            raise SerializationError(f"sink {node.name!r} (topic {node.topic!r}): {exc}") from exc
        self.output.append(OutputRecord(node.topic, key, value, record.timestamp, record.headers))

    def _run_in(
        self, node: str, timestamp: int, metadata: RecordMetadata | None, fn: Callable[[], Any]
    ) -> Any:
        previous = self._current_node, self._timestamp, self._metadata
        self._current_node, self._timestamp, self._metadata = node, timestamp, metadata
        try:
            return fn()
        finally:
            self._current_node, self._timestamp, self._metadata = previous

    # -- punctuation -------------------------------------------------------------------------
    def schedule(
        self,
        node: str,
        slot: int,
        interval: int,
        type: PunctuationType,
        callback: Callable[[int], Any],
    ) -> Cancellable:
        if type is PunctuationType.STREAM_TIME:
            due, queue = 0, self._stream_queue
        else:
            due, queue = self.wall_clock_ms() + interval, self._wall_queue
        schedule = PunctuationSchedule(node, slot, type, interval, due, callback)
        restored = self._restored_dues.pop(schedule.key, None)
        if restored is not None and restored[0] == type.value and restored[1] == interval:
            schedule.due = restored[2]
        queue.add(schedule)
        return schedule.handle

    def _fire(self, schedule: PunctuationSchedule, now: int) -> None:
        self.metrics.counters["punctuate-total"] += 1
        try:
            self._run_in(schedule.node, now, None, lambda: schedule.callback(now))
        except Exception as exc:
            self._failed_node = self._failed_node or schedule.node
            raise self._wrap(exc, f"punctuating {schedule.type.name} at {now}") from exc

    def punctuate_stream_time(self) -> bool:
        """Fire due stream-time schedules; only once the task has a stream time."""
        if self.stream_time < 0:
            return False
        return self._stream_queue.may_punctuate(self.stream_time, self._fire)

    def punctuate_wall_clock(self, now: int | None = None) -> bool:
        return self._wall_queue.may_punctuate(
            self.wall_clock_ms() if now is None else now, self._fire
        )

    def maybe_close_idle(self, now: int | None = None) -> bool:
        """Opt-in idle closing (``window.close.on.idle.ms``): once the task's input has been
        idle that long, stream time follows the wall clock from the last record on
        (``stream_time + idle time``), so windows close and final results are emitted on a
        quiet stream. Records that arrive later for windows closed this way are late."""
        limit = self.config.close_on_idle_ms
        if limit is None or self.last_input_wall_ms is None or self.stream_time < 0:
            return False
        now = self.wall_clock_ms() if now is None else now
        idle = now - self.last_input_wall_ms
        if idle < limit:
            return False
        target = self.stream_time + idle
        if target <= self.idle_advanced_to:
            return False
        self.idle_advanced_to = target
        self.last_input_wall_ms = now
        self.stream_time = target
        for name, processor in self.processors.items():
            advance = getattr(processor, "advance_stream_time", None)
            if advance is not None:
                self._run_in(name, target, None, lambda a=advance: a(target))
        self.punctuate_stream_time()
        return True

    def next_wall_clock_due(self) -> int | None:
        schedules = self._wall_queue.schedules()
        return min((s.due for s in schedules), default=None)

    # -- commit ------------------------------------------------------------------------------
    def commit(self) -> None:
        """Flush every store's cache (forwarding cached changes downstream) until all are clean."""
        DROPS.flush_due(self.task_id)
        for _ in range(len(self.stores) + 1):
            dirty = [s for s in self.stores.values() if s.has_cached_changes()]
            if not dirty:
                return
            for store in dirty:
                self._run_in(self._current_node or "", self._timestamp, None, store.flush)
        if any(s.has_cached_changes() for s in self.stores.values()):
            raise StreamsError(f"task {self.task_id}: store caches did not settle at commit")

    def drain_output(self) -> list[OutputRecord]:
        return output_records(self.drain_output_parts())

    def drain_output_parts(self) -> Output:
        """What :meth:`drain_output` gives, with blocks of records left as they are."""
        out, self.output = self.output, []
        return out

    def drain_changelog(self) -> dict[str, list[tuple[Any, Any, int]]]:
        out, self.changelog = self.changelog, {}
        return out

    # -- what processors and stores call -----------------------------------------------------
    def get_state_store(self, node: str, name: str) -> StoreBase:
        store = self.stores.get(name)
        if store is None:
            raise InvalidStateStoreError(
                f"processor {node!r} cannot access store {name!r}: not in task {self.task_id} "
                f"(stores: {sorted(self.stores)})"
            )
        pnode = self.topology.nodes.get(node)
        if isinstance(pnode, ProcessorNode) and name not in pnode.stores:
            raise InvalidStateStoreError(
                f"processor {node!r} has no access to store {name!r}; connect it with "
                f"add_state_store(builder, {node!r}) or connect_processor_and_state_stores"
            )
        return store

    def record_metadata(self) -> RecordMetadata | None:
        return self._metadata

    def processor_state(self, node: str) -> dict[str, Any]:
        state = self._processor_state.get(node)
        if state is None:
            state = self._processor_state[node] = {}
        return state

    def record_timestamp(self) -> int:
        return self._timestamp

    def record_dropped(self, reason: str, detail: str) -> None:
        self.metrics.dropped(reason)
        DROPS.dropped(self.task_id, reason, detail)

    def captures_changelog(self, store: str) -> bool:
        """Whether changelog entries of ``store`` are kept (and so must be exact)."""
        return self.changelog_stores is None or store in self.changelog_stores

    def log_change(self, store: str, key: Any, value: Any, timestamp: int) -> None:
        if self.changelog_stores is not None and store not in self.changelog_stores:
            return
        entries = self.changelog.get(store)
        if entries is None:
            entries = self.changelog[store] = []
        entries.append((key, value, timestamp))
