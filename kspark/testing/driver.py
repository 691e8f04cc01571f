"""TopologyTestDriver: runs a topology's tasks in-process, deterministically.

After every piped record the driver processes it, runs due stream-time punctuations and commits
(store caches flush), like Kafka Streams' driver. Records written to a topic the topology itself
reads (repartition topics) are processed right away, in order. As in Kafka Streams' driver, the
changelog topic of a logged store (``<application.id>-<store>-changelog``) can be read with
:meth:`TopologyTestDriver.create_output_topic`, in Kafka Streams' byte layout.
"""

from __future__ import annotations

from typing import Any, Final

from kspark._duration import Duration, to_ms
from kspark.config import StreamsConfig
from kspark.errors import InvalidStateStoreError, NoSuchElementError, TopologyError
from kspark.records import Headers, KeyValue, to_headers
from kspark.runtime.metrics import Metrics
from kspark.runtime.task import OutputBlock, OutputRecord, Task
from kspark.serdes import Serde, as_serde, serializer_of
from kspark.serdes.registry import for_topic
from kspark.state.internals.base import StoreBase
from kspark.state.internals.changelog import ChangelogCodec, changelog_topic
from kspark.testing.internals.chunked_queue import ChunkedQueue
from kspark.testing.internals.partition_group import InternalRecords
from kspark.testing.test_record import TestRecord
from kspark.topology.topology import Topology

#: an unread record of an output topic: key, value, timestamp and headers, a row of a
#: :class:`ChunkedQueue` (many unread records cost the garbage collector next to nothing)
_UNREAD_FIELDS: Final = 4
#: a kept changelog entry: key, value, timestamp
_CHANGELOG_FIELDS: Final = 3
#: the changelog entries are taken from the tasks every this many records + 1 of a topic, into
#: chunks that a full collection does not visit item by item; not at a cost every record
_KEEP_EVERY: Final = 63


class TopologyTestDriver:
    """Drive ``topology`` record by record with a mocked wall clock."""

    __test__ = False

    def __init__(
        self,
        topology: Topology,
        initial_wall_clock_ms: int = 0,
        config: StreamsConfig | dict[str, Any] | None = None,
    ) -> None:
        topology.validate()
        self.topology = topology
        self.config = StreamsConfig.of(config, application_id="test-app")
        self._wall_clock = to_ms(initial_wall_clock_ms, "initial wall clock")
        self._metrics = Metrics()
        self._offsets: dict[str, int] = {}
        self._outputs: dict[str, ChunkedQueue] = {}
        self._changelogs: dict[str, list[tuple[Any, Any, int]]] = {}
        #: changelog entries taken from the tasks but not yet read (see _keep_changelogs)
        self._kept_changelogs: dict[str, ChunkedQueue] = {}
        self._changelog_read: dict[str, int] = {}  # store -> entries already on its topic
        self.tasks: list[Task] = []
        self._readers: dict[str, Task | None] = {}
        #: topic -> (whether the topology reads it, its output queue or ``None`` if internal)
        self._routes: dict[str, tuple[bool, ChunkedQueue | None]] = {}
        for st in topology.sub_topologies():
            task = Task(
                topology,
                st,
                0,
                config=self.config,
                metrics=self._metrics,
                wall_clock=lambda: self._wall_clock,
            )
            self.tasks.append(task)
        for task in self.tasks:
            task.init()
        #: each global store's topic -> every task that keeps the store
        self._global_readers: dict[str, list[Task]] = {
            topic: [t for t in self.tasks if topic in t.sub_topology.source_topics]
            for topic in topology.global_topics()}
        self._collect()

    # -- topics ------------------------------------------------------------------------------
    def create_input_topic(
        self,
        topic: str,
        key_serde: Any = None,
        value_serde: Any = None,
        start_timestamp: Duration = 0,
        auto_advance: Duration = 0,
    ) -> TestInputTopic:
        if self.topology.sub_topology_for_topic(topic) is None:
            raise TopologyError(
                f"unknown input topic {topic!r}: no source of the topology reads "
                f"it (sources: {self.topology.source_topics()})"
            )
        return TestInputTopic(
            self,
            topic,
            for_topic(self._serde(key_serde, True), topic),
            for_topic(self._serde(value_serde, False), topic),
            to_ms(start_timestamp),
            to_ms(auto_advance),
        )

    def create_output_topic(
        self, topic: str, key_serde: Any = None, value_serde: Any = None
    ) -> TestOutputTopic:
        return TestOutputTopic(self, topic, for_topic(self._serde(key_serde, True), topic),
                               for_topic(self._serde(value_serde, False), topic))

    def _serde(self, serde: Any, is_key: bool) -> Serde:
        if serde is None:
            return self.config.default_key_serde if is_key else self.config.default_value_serde
        return as_serde(serde)

    def produced_topic_names(self) -> list[str]:
        return sorted(self._outputs)

    def changelog_topic(self, store: str) -> str:
        """The changelog topic of ``store``: ``<application.id>-<store>-changelog``."""
        return changelog_topic(self.config.application_id, store)

    @property
    def changelogs(self) -> dict[str, list[tuple[Any, Any, int]]]:
        """Each logged store's changelog entries so far: store -> [(key, value, timestamp)]."""
        self._keep_changelogs()
        for store, kept in self._kept_changelogs.items():
            self._changelogs.setdefault(store, []).extend(kept.take_all())
        self._kept_changelogs = {}
        return self._changelogs

    def _keep_changelogs(self) -> None:
        """Take the tasks' changelog entries into a :class:`ChunkedQueue` per store, as
        columns: no object per entry for the garbage collector to track."""
        for task in self.tasks:
            if task.changelog:
                for store, entries in task.drain_changelog().items():
                    kept = self._kept_changelogs.get(store)
                    if kept is None:
                        kept = self._kept_changelogs[store] = ChunkedQueue(_CHANGELOG_FIELDS)
                    kept.extend_columns((entries.keys, entries.values, entries.timestamps))

    def _output_queue(self, topic: str) -> ChunkedQueue:
        """The records of ``topic`` not read yet; a store's changelog entries are encoded
        (:class:`~kspark.state.internals.changelog.ChangelogCodec`) when its topic is read."""
        queue = self._unread(topic)
        stores = [s for s in self.topology.store_builders if self.changelog_topic(s) == topic]
        if stores:
            changelogs = self.changelogs
            for store in stores:
                entries = changelogs.get(store, [])
                done = self._changelog_read.get(store, 0)
                if done < len(entries):
                    codec = ChangelogCodec.for_builder(self.topology.store_builders[store])
                    for key, value, ts in entries[done:]:
                        queue.append((codec.encode_key(key), codec.encode_value(value), ts, ()))
                    self._changelog_read[store] = len(entries)
        return queue

    # -- driving -----------------------------------------------------------------------------
    def _reader(self, topic: str) -> Task | None:
        """The task that reads ``topic`` (``None``: no sub-topology reads it), looked up once
        per topic: the topology does not change under a driver."""
        if topic not in self._readers:
            st = self.topology.sub_topology_for_topic(topic)
            self._readers[topic] = None if st is None else self.tasks[st.id]
        return self._readers[topic]

    def _task_for(self, topic: str) -> Task:
        task = self._reader(topic)
        if task is None:
            raise TopologyError(f"unknown topic {topic!r}")
        return task

    def pipe_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers = (),
    ) -> None:
        """Process one serialized record from ``topic`` and everything it causes."""
        if topic in self._global_readers:  # a global store's update, in every task keeping it
            offset = self._offsets.get(topic, 0)
            self._offsets[topic] = offset + 1
            for task in self._global_readers[topic]:
                task.process_one(topic, 0, offset, timestamp, key, value, headers)
                task.commit()
            return
        # _pipe_one, inline
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        task = self._readers.get(topic) or self._task_for(topic)
        task.process_one(topic, 0, offset, timestamp, key, value, headers)
        task.punctuate_and_commit()
        if offset & _KEEP_EVERY == _KEEP_EVERY and task.changelog:
            self._keep_changelogs()
        for task in self.tasks:
            if task.forwarding.output:
                break
        else:
            return  # nothing written
        self._process_internal(self._collect())

    def _process_internal(self, written: list[OutputRecord]) -> None:
        """Process ``written`` (records to topics the topology reads) and all they cause, in
        the order of Kafka Streams' driver (:mod:`kspark.testing.internals.partition_group`);
        a global store's topic at once, as that driver updates global stores."""
        waiting = InternalRecords()
        while True:
            for out in written:
                if out.topic in self._global_readers:
                    self.pipe_raw(out.topic, out.key, out.value, out.timestamp, out.headers)
                else:
                    waiting.add((out,))
            record = waiting.next()
            if record is None:
                return
            self._pipe_one(record.topic, record.key, record.value, record.timestamp,
                           record.headers)
            written = self._collect()

    def _pipe_one(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
                  headers: Headers) -> None:
        """Process, punctuate and commit one record of ``topic`` in its task."""
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        task = self._readers.get(topic) or self._task_for(topic)
        task.process_one(topic, 0, offset, timestamp, key, value, headers)
        task.punctuate_and_commit()
        if offset & _KEEP_EVERY == _KEEP_EVERY and task.changelog:
            self._keep_changelogs()

    def advance_wall_clock_time(self, advance: Duration) -> None:
        """Move the mocked wall clock forward and fire due wall-clock punctuations."""
        ms = to_ms(advance, "advance")
        if ms < 0:
            raise ValueError(f"wall clock cannot go back (advance {ms} ms)")
        self._wall_clock += ms
        for task in self.tasks:
            task.punctuate_wall_clock(self._wall_clock)
            task.maybe_close_idle(self._wall_clock)
            task.commit()
        # as Kafka Streams' driver: every punctuation first, then what they wrote
        self._process_internal(self._collect())

    def _route(self, topic: str) -> tuple[bool, ChunkedQueue | None]:
        """Whether the topology reads ``topic``, and its output queue (``None``: internal)."""
        route = self._routes[topic] = (
            self._reader(topic) is not None,
            None if topic in self.topology.internal_topics else self._unread(topic),
        )
        return route

    def _unread(self, topic: str) -> ChunkedQueue:
        """The queue of ``topic``'s unread records (made on first use)."""
        queue = self._outputs.get(topic)
        if queue is None:
            queue = self._outputs[topic] = ChunkedQueue(_UNREAD_FIELDS)
        return queue

    def _collect(self) -> list[OutputRecord]:
        """Move task outputs to output topics; return those the topology reads itself.
        (Changelog entries are taken by :meth:`_keep_changelogs`.)"""
        internal = []
        routes = self._routes
        for task in self.tasks:
            if task.has_output():
                for part in task.drain_output_parts():
                    reads, queue = routes.get(part.topic) or self._route(part.topic)
                    if isinstance(part, OutputBlock):
                        if reads:
                            internal += part.records()
                        if queue is not None:
                            queue.extend_columns((part.keys, part.values, part.timestamps,
                                                  [()] * len(part.keys)))
                    else:
                        if reads:
                            internal.append(part)
                        if queue is not None:
                            queue.append((part.key, part.value, part.timestamp, part.headers))
        return internal

    # -- stores and metrics ------------------------------------------------------------------
    def get_state_store(self, name: str) -> StoreBase:
        for task in self.tasks:
            if name in task.stores:
                return task.stores[name]
        raise InvalidStateStoreError(
            f"no store {name!r}; stores: {sorted(s for t in self.tasks for s in t.stores)}"
        )

    def _typed_store(self, name: str, kind: str) -> StoreBase:
        store = self.get_state_store(name)
        if store.kind != kind:
            raise InvalidStateStoreError(f"store {name!r} is a {store.kind} store, not {kind}")
        return store

    def get_key_value_store(self, name: str) -> Any:
        return self._typed_store(name, "key_value")

    def get_window_store(self, name: str) -> Any:
        return self._typed_store(name, "window")

    def get_session_store(self, name: str) -> Any:
        return self._typed_store(name, "session")

    def get_versioned_key_value_store(self, name: str) -> Any:
        return self._typed_store(name, "versioned")

    def metrics(self) -> dict[str, int]:
        return self._metrics.snapshot()

    @property
    def wall_clock_ms(self) -> int:
        return self._wall_clock

    def close(self) -> None:
        for task in self.tasks:
            task.close()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TestInputTopic:
    """Pipes records into one topic; timestamps default to the topic's own clock."""

    __test__ = False

    def __init__(
        self,
        driver: TopologyTestDriver,
        topic: str,
        key_serde: Serde,
        value_serde: Serde,
        start_timestamp: int,
        auto_advance: int,
    ) -> None:
        self.driver, self.topic = driver, topic
        self._key_serde, self._value_serde = key_serde, value_serde
        self._pipe_raw = driver.pipe_raw
        self._key_bytes = serializer_of(key_serde)
        self._value_bytes = serializer_of(value_serde)
        self.current_time = start_timestamp
        self.auto_advance = auto_advance

    @property
    def key_serde(self) -> Serde:
        return self._key_serde

    @property
    def value_serde(self) -> Serde:
        return self._value_serde

    def pipe_input(
        self, key: Any, value: Any = None, timestamp: Duration | None = None, headers: Any = None
    ) -> None:
        if timestamp is None:
            ts = self.current_time
            self.current_time += self.auto_advance
        else:
            ts = timestamp if type(timestamp) is int else to_ms(timestamp, "timestamp")
        self._pipe_raw(
            self.topic,
            self._key_bytes(key),
            self._value_bytes(value),
            ts,
            () if headers is None else to_headers(headers),
        )

    def pipe_record(self, record: TestRecord) -> None:
        self.pipe_input(record.key, record.value, record.timestamp, record.headers)

    def pipe_key_value_list(self, pairs: list[tuple[Any, Any]]) -> None:
        for key, value in pairs:
            self.pipe_input(key, value)

    def pipe_value_list(self, values: list[Any]) -> None:
        for value in values:
            self.pipe_input(None, value)

    def pipe_records(self, records: list[TestRecord]) -> None:
        for record in records:
            self.pipe_record(record)

    def advance_time(self, advance: Duration) -> None:
        self.current_time += to_ms(advance, "advance")


class TestOutputTopic:
    """Reads what the topology wrote to one topic, oldest first."""

    __test__ = False

    def __init__(
        self, driver: TopologyTestDriver, topic: str, key_serde: Serde, value_serde: Serde
    ) -> None:
        self.driver, self.topic = driver, topic
        self.key_serde, self.value_serde = key_serde, value_serde

    def _queue(self) -> ChunkedQueue:
        return self.driver._output_queue(self.topic)

    def read_record(self) -> TestRecord:
        queue = self._queue()
        if not queue:
            raise NoSuchElementError(f"output topic {self.topic!r} is empty")
        key, value, timestamp, headers = queue.popleft()
        return TestRecord(
            self.key_serde.deserialize(key), self.value_serde.deserialize(value), timestamp, headers
        )

    def read_key_value(self) -> KeyValue:
        rec = self.read_record()
        return KeyValue(rec.key, rec.value)

    def read_value(self) -> Any:
        return self.read_record().value

    def read_records_to_list(self) -> list[TestRecord]:
        out = []
        while not self.is_empty():
            out.append(self.read_record())
        return out

    def read_key_values_to_list(self) -> list[KeyValue]:
        return [KeyValue(r.key, r.value) for r in self.read_records_to_list()]

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The last value per key (``None`` values kept, as Kafka Streams does)."""
        out: dict[Any, Any] = {}
        for rec in self.read_records_to_list():
            if rec.key is None:
                raise ValueError("read_key_values_to_map does not allow null keys")
            out[rec.key] = rec.value
        return out

    def is_empty(self) -> bool:
        return not self._queue()

    def get_queue_size(self) -> int:
        return len(self._queue())
