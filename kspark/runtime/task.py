"""A Task: one partition of one sub-topology, driven record by record.

The test driver and the Spark runtime run this same class; they differ only in where store
buckets come from (a :class:`~kspark.state.base.BucketLoader`) and in who drives the clocks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kspark.config import LOG_AND_CONTINUE, StreamsConfig
from kspark.errors import InvalidStateStoreError, SerializationError, StreamsError
from kspark.processor.api import ProcessorContext
from kspark.processor.punctuation import (
    Cancellable,
    PunctuationQueue,
    PunctuationSchedule,
    PunctuationType,
)
from kspark.records import Headers, Record, RecordMetadata
from kspark.runtime.metrics import Metrics
from kspark.state.base import BucketLoader, StoreBase
from kspark.topology.topology import ProcessorNode, SinkNode, SourceNode, SubTopology, Topology

log = logging.getLogger("kspark.task")


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
        self.output: list[OutputRecord] = []
        #: changelog entries since the last drain: store -> [(key, value, timestamp)]
        self.changelog: dict[str, list[tuple[Any, Any, int]]] = {}
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
        node = self.topology.nodes[name]
        if isinstance(node, SinkNode):
            self._write_sink(node, record)

    def _write_sink(self, node: SinkNode, record: Record) -> None:
        key_serde = node.key_serde or self.config.default_key_serde
        value_serde = node.value_serde or self.config.default_value_serde
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
        for _ in range(len(self.stores) + 1):
            dirty = [s for s in self.stores.values() if s.has_cached_changes()]
            if not dirty:
                return
            for store in dirty:
                self._run_in(self._current_node or "", self._timestamp, None, store.flush)
        if any(s.has_cached_changes() for s in self.stores.values()):
            raise StreamsError(f"task {self.task_id}: store caches did not settle at commit")

    def drain_output(self) -> list[OutputRecord]:
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
        log.warning("task %s: dropped record (%s): %s", self.task_id, reason, detail)

    def log_change(self, store: str, key: Any, value: Any, timestamp: int) -> None:
        entries = self.changelog.get(store)
        if entries is None:
            entries = self.changelog[store] = []
        entries.append((key, value, timestamp))
