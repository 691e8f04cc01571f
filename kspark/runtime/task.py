"""A Task: one partition of one sub-topology, driven record by record or a batch at a time.

The test driver and the Spark runtime run this same class; they differ only in where store
buckets come from (a :class:`~kspark.state.BucketLoader`) and in who drives the clocks.
Forwarding, punctuation, timestamp extraction and the batch path's view have modules of their
own (:mod:`kspark.runtime.forwarding`, ``punctuator``, ``extraction``, ``batch_view``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from functools import partial
from itertools import repeat
from typing import Any, Final

from kspark.config import StreamsConfig
from kspark.drop_log import DROPS
from kspark.errors import InvalidStateStoreError, SerializationError, StreamsError
from kspark.processor.api import ProcessorContext
from kspark.processor.batch import BatchProcessor, SerializedBatchProcessor, StreamTimeFollower
from kspark.processor.punctuation import Cancellable, PunctuationSchedule, PunctuationType
from kspark.record_columns import RecordColumns
from kspark.records import Headers, Record, RecordMetadata
from kspark.runtime.bad_records import skip_or_fail
from kspark.runtime.batch_view import BatchView, FastPathAborted, separate_branches
from kspark.runtime.changelog_entries import ChangelogEntries
from kspark.runtime.commit import flush_caches
from kspark.runtime.context import RecordContext
from kspark.runtime.decoding import decode_batch
from kspark.runtime.extraction import PARTITION_TIMES, extracted_timestamp
from kspark.runtime.forwarding import Forwarding, SinkChain
from kspark.runtime.metrics import Metrics
from kspark.runtime.punctuator import Punctuator
from kspark.runtime.serialized import (
    Encoded,
    Output,
    OutputBlock,
    OutputRecord,
    SourceBatch,
    SourceRecord,
    output_columns,
    output_count,
    output_records,
)
from kspark.serdes import deserializer_of
from kspark.state.internals.base import BucketLoader, BucketSpill, StoreBase
from kspark.topology.topology import ProcessorNode, SourceNode, SubTopology, Topology

__all__ = ["BatchView", "Encoded", "FastPathAborted", "Output", "OutputBlock", "OutputRecord",
           "SourceBatch", "SourceRecord", "Task", "output_columns", "output_count",
           "output_records"]


#: a source node, its key and value deserializers and its children
_SourceInput = tuple[SourceNode, Callable[[Any], Any], Callable[[Any], Any], list[str]]
_PROCESS_TOTAL: Final = "process-total"


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
        spill: BucketSpill | None = None,
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
        #: where stores put buckets they let go of (``state.buckets.in.memory``)
        self.spill = spill
        self.stream_time = -1
        #: wall-clock time of the last input record, and how far idle closing moved time
        self.last_input_wall_ms: int | None = None
        self.idle_advanced_to = -1
        #: changelog entries since the last drain, by store
        self.changelog: dict[str, ChangelogEntries] = {}
        #: the stores whose changelog entries are kept (``None``: all)
        self.changelog_stores = None if changelog_stores is None else frozenset(changelog_stores)
        self._processor_state: dict[str, dict[str, Any]] = {}
        self._store_meta: dict[str, Any] = {}
        #: the processor running now and the record it handles
        self.current = RecordContext()
        self.punctuator = Punctuator(wall_clock)
        self._stream_schedules = self.punctuator.stream
        self._children: dict[str, list[str]] = {}
        self._source_by_topic: dict[str, SourceNode] = {}
        self._inputs: dict[str, _SourceInput] = {}
        self._close_on_idle = config.close_on_idle_ms is not None
        #: the topics of global stores this task keeps (their records update the stores only)
        self._global_topics = frozenset(
            t for t in topology.global_stores.values() if t in sub_topology.source_topics)
        self._counters = metrics.counters
        #: records processed since ``process-total`` last counted them (:meth:`count_processed`)
        self._processed = 0
        self.processors: dict[str, Any] = {}
        self.forwarding = Forwarding(topology, config, self.current, self.processors,
                                     self._children)
        self.stores: dict[str, StoreBase] = {}
        #: the stores with a cache (only they have anything to flush at commit)
        self._caching_stores: list[StoreBase] = []
        self._initialized = False

    # -- lifecycle ---------------------------------------------------------------------------
    def restore_state(self, state: dict[str, Any] | None) -> None:
        """Restore what :meth:`checkpoint_state` returned; call before :meth:`init`."""
        if not state:
            return
        self.stream_time = state.get("stream_time", -1)
        self.last_input_wall_ms = state.get("last_input_wall_ms")
        self.idle_advanced_to = state.get("idle_advanced_to", -1)
        self.punctuator.restore(state.get("punctuations", {}))
        self._processor_state = {k: dict(v) for k, v in state.get("processors", {}).items()}
        self._store_meta = state.get("stores", {})

    def checkpoint_state(self) -> dict[str, Any]:
        """Small state persisted with the task: stream time, punctuation due times, processors'
        own state and each store's metadata."""
        return {
            "stream_time": self.stream_time,
            "last_input_wall_ms": self.last_input_wall_ms,
            "idle_advanced_to": self.idle_advanced_to,
            "punctuations": self.punctuator.dues(),
            "processors": self._processor_state,
            "stores": {name: store.meta() for name, store in self.stores.items()},
        }

    def init(self) -> None:
        """Build stores and processors and call each processor's ``init``."""
        topo = self.topology
        store_meta = self._store_meta
        for name in self.sub_topology.stores:
            store = topo.store_builders[name].build(num_buckets=self.config.state_buckets)
            store.init(self, self.loader)
            if self.spill is not None and self.config.state_buckets_in_memory is not None:
                store.limit_memory(self.config.state_buckets_in_memory, self.spill)
            if name in store_meta:
                store.restore_meta(store_meta[name])
            if name in topo.source_stores:
                store.read_only = True
            self.stores[name] = store
            if store.caching:
                self._caching_stores.append(store)
        for name in self.sub_topology.nodes:
            node = topo.nodes[name]
            self._children[name] = topo.children(name)
            if isinstance(node, SourceNode):
                for t in node.topics:
                    self._source_by_topic[t] = node
        for name in self.sub_topology.nodes:
            node = topo.nodes[name]
            if isinstance(node, ProcessorNode):
                self.processors[name] = node.supplier()
        for name, processor in self.processors.items():
            context = ProcessorContext(self, name)
            self.current.run_in(name, -1, None, partial(processor.init, context))
        self._initialized = True

    def close(self) -> None:
        for name, processor in self.processors.items():
            self.current.run_in(name, self.current.timestamp, None, processor.close)
        for store in self.stores.values():
            store.close()

    # -- processing --------------------------------------------------------------------------
    def source_node(self, topic: str) -> SourceNode:
        node = self._source_by_topic.get(topic)
        if node is None:
            for n in self.sub_topology.nodes:
                candidate = self.topology.nodes[n]
                if (isinstance(candidate, SourceNode) and candidate.pattern
                        and candidate.pattern.fullmatch(topic)):
                    self._source_by_topic[topic] = node = candidate
                    break
            else:
                raise StreamsError(f"task {self.task_id}: no source reads topic {topic!r}")
        return node

    def _input(self, topic: str) -> _SourceInput:
        """The source node reading ``topic`` with its deserializers and children (cached)."""
        entry = self._inputs.get(topic)
        if entry is None:
            node = self.source_node(topic)
            entry = self._inputs[topic] = (
                node,
                deserializer_of(node.key_serde or self.config.default_key_serde),
                deserializer_of(node.value_serde or self.config.default_value_serde),
                self._children[node.name],
            )
        return entry

    def process(self, rec: SourceRecord) -> None:
        """Deserialize and process one input record through the sub-topology."""
        self.process_one(rec.topic, rec.partition, rec.offset, rec.timestamp, rec.key, rec.value,
                         rec.headers)

    def count_processed(self) -> None:
        """Count the records processed since the last call (at commit, not per record)."""
        if self._processed:
            self._counters[_PROCESS_TOTAL] += self._processed
            self._processed = 0

    def process_one(self, topic: str, partition: int, offset: int, timestamp: int,
                    key: bytes | None, value: bytes | None, headers: Headers = ()) -> None:
        """:meth:`process` of the record with these fields, without a :class:`SourceRecord`."""
        entry = self._inputs.get(topic)
        node, key_of, value_of, children = self._input(topic) if entry is None else entry
        try:
            record_key = key_of(key)
            record_value = value_of(value)
        except SerializationError as exc:
            rec = SourceRecord(topic, partition, offset, timestamp, key, value, headers)
            skip_or_fail(self.config, rec, node, "deserialization-error", str(exc),
                         self.record_dropped, self.forwarding.output, exc)
            return
        if node.timestamp_extractor is not None and (timestamp := extracted_timestamp(
                self.processor_state(PARTITION_TIMES), node, topic, partition, offset, timestamp,
                record_key, record_value, headers, self.record_dropped)) < 0:
            return
        if timestamp < 0:
            rec = SourceRecord(topic, partition, offset, timestamp, key, value, headers)
            skip_or_fail(self.config, rec, node, "invalid-timestamp",
                         f"invalid (negative) timestamp {timestamp}", self.record_dropped,
                         self.forwarding.output)
            return
        if topic not in self._global_topics:  # a global store's update: neither counts
            if timestamp > self.stream_time:
                self.stream_time = timestamp
            if self._close_on_idle:
                self.last_input_wall_ms = self.wall_clock_ms()
            self._processed += 1
        record = Record(record_key, record_value, timestamp, headers)
        self.current.metadata = (topic, partition, offset)
        forwarding = self.forwarding
        try:
            for child in children:
                forwarding.deliver(child, record)
        except Exception as exc:
            self.count_processed()
            raise self._wrap(
                exc,
                f"processing record at topic {topic!r} partition "
                f"{partition} offset {offset} key {record_key!r:.100} "
                f"timestamp {timestamp}",
            ) from exc

    def process_batch(self, batch: SourceBatch, fast: bool = True) -> int:
        """Process ``batch`` (in order), with stream-time punctuation after each record.

        With ``fast``, a processor that reads the source directly may handle the whole batch at
        once (``process_batch(view)``), producing exactly what the record-by-record path would;
        returns the number of records it handled that way (0: record by record). Raises
        :class:`FastPathAborted` if that path failed after changing state."""
        if fast and len(batch) and batch.headers is None:  # headers: record by record
            handled = self._process_batch_fast(batch)
            if handled is not None:
                return handled
        n = len(batch)
        topics = [batch.topic] * n if batch.topic is not None else (batch.topics or [])
        headers: Iterable[Headers] = repeat((), n) if batch.headers is None else batch.headers
        # direct calls of the methods: the compiled core then calls them without Python's
        # argument handling
        for topic, partition, offset, timestamp, key, value, header in zip(
                topics, batch.partitions.tolist(), batch.offsets.tolist(),
                batch.timestamps.tolist(), batch.keys.tolist(), batch.values.tolist(), headers):
            self.process_one(topic, partition, offset, timestamp, key, value, header)
            self.punctuate_stream_time()
        return 0

    def _process_batch_fast(self, batch: SourceBatch) -> int | None:
        if batch.topic is None or self.punctuator.has_stream_time_schedules:
            return None
        node = self.source_node(batch.topic)
        if node.timestamp_extractor is not None:
            return None
        children = self._children[node.name]
        fasts: list[Any] = [self.processors.get(c) for c in children]
        if (
            not children
            or not all(isinstance(f, BatchProcessor) for f in fasts)
            or int(batch.timestamps.min()) < 0
            or not separate_branches(self.topology, self._children, children)
        ):
            return None
        initial_stream_time = self.stream_time
        counts: list[int] = []
        try:
            if len(fasts) == 1 and isinstance(fasts[0], SerializedBatchProcessor):
                handled = fasts[0].process_serialized(batch)
                if handled is not None:
                    counts.append(handled)
            decoded = None if counts else decode_batch(
                batch, node.key_serde or self.config.default_key_serde,
                node.value_serde or self.config.default_value_serde,
            )
            # each branch sees the batch as the record-by-record path shows it to that child;
            # the branches share no node and no sink topic, so running them one after another
            # keeps every topic's order
            views = [] if decoded is None else [
                BatchView(self, child, batch, *decoded) for child in children
            ]
            for fast, view in zip(fasts, views):
                handled = fast.process_batch(view)
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
            self.current.metadata = None
        if not counts:
            self.stream_time = initial_stream_time
            return None
        handled = min(counts)
        self.stream_time = max(initial_stream_time, int(batch.timestamps.max()))
        if self.config.close_on_idle_ms is not None:
            self.last_input_wall_ms = self.wall_clock_ms()
        self.metrics.counters["process-total"] += len(batch)
        return handled

    def _wrap(self, exc: Exception, where: str) -> StreamsError:
        if isinstance(exc, StreamsError) and exc.located:
            return exc
        node = self.current.take_failed_node()
        err = StreamsError(
            f"task {self.task_id}, processor {node!r}: {type(exc).__name__}: {exc} (while {where})"
        )
        err.located = True
        err.__cause__ = exc  # set here: compiled, ``raise ... from`` leaves it unset
        return err

    def forward(self, from_node: str, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` from ``from_node`` to its children (or the named child)."""
        self.forwarding.forward(from_node, record, child_name)

    def forward_all(self, from_node: str, records: list[Record]) -> None:
        """:meth:`forward` each of ``records`` (all timestamped), a list at a time where it
        can (see :meth:`Forwarding.forward_all`)."""
        self.forwarding.forward_all(from_node, records)

    def forward_columns(self, from_node: str, columns: RecordColumns) -> None:
        """:meth:`forward_all` of ``columns.records()`` (see :meth:`Forwarding.forward_columns`)."""
        self.forwarding.forward_columns(from_node, columns)

    def sink_chain(self, node: str) -> SinkChain | None:
        return self.forwarding.sink_chain(node)

    # -- punctuation -------------------------------------------------------------------------
    def schedule(
        self,
        node: str,
        slot: int,
        interval: int,
        type: PunctuationType,
        callback: Callable[[int], Any],
    ) -> Cancellable:
        return self.punctuator.schedule(node, slot, interval, type, callback)

    def _fire(self, schedule: PunctuationSchedule, now: int) -> None:
        self.metrics.counters["punctuate-total"] += 1
        try:
            self.current.run_in(schedule.node, now, None, lambda: schedule.callback(now))
        except Exception as exc:
            self.current.failed(schedule.node)
            raise self._wrap(exc, f"punctuating {schedule.type.name} at {now}") from exc

    def punctuate_stream_time(self) -> bool:
        """Fire due stream-time schedules; only once the task has a stream time."""
        stream_time = self.stream_time
        if stream_time < self._stream_schedules.next_due or stream_time < 0:
            return False
        return self.punctuator.punctuate_stream_time(stream_time, self._fire)

    def punctuate_and_commit(self) -> None:
        """:meth:`punctuate_stream_time`, then :meth:`commit` (the test driver's step after each
        record), without a call to either when nothing is due, dropped or cached."""
        self.count_processed()
        stream_time = self.stream_time
        if stream_time >= self._stream_schedules.next_due and stream_time >= 0:
            self.punctuator.punctuate_stream_time(stream_time, self._fire)
        if self._caching_stores or DROPS.pending:
            self.commit()

    def punctuate_wall_clock(self, now: int | None = None) -> bool:
        return self.punctuator.punctuate_wall_clock(
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
            if isinstance(processor, StreamTimeFollower):
                self.current.run_in(name, target, None,
                                    partial(processor.advance_stream_time, target))
        self.punctuate_stream_time()
        return True

    def next_wall_clock_due(self) -> int | None:
        return self.punctuator.next_wall_clock_due()

    # -- commit ------------------------------------------------------------------------------
    def commit(self) -> None:
        """Flush every store's cache (forwarding cached changes downstream) until all are clean."""
        self.count_processed()
        if DROPS.pending:
            DROPS.flush_due(self.task_id)
        flush_caches(self.task_id, self._caching_stores, self.current, self._wrap)

    def has_output(self) -> bool:
        """Whether sinks wrote anything since the last drain."""
        return bool(self.forwarding.output)

    def drain_output_parts(self) -> Output:
        """Every record the sinks wrote since the last drain, in order (blocks of records left
        as they are; :func:`output_records` gives them one by one)."""
        return self.forwarding.drain()

    def drain_changelog(self) -> dict[str, ChangelogEntries]:
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
        return self.current.record_metadata()

    def processor_state(self, node: str) -> dict[str, Any]:
        return self._processor_state.setdefault(node, {})

    def record_timestamp(self) -> int:
        return self.current.timestamp

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
            entries = self.changelog[store] = ChangelogEntries()
        entries.append(key, value, timestamp)
