"""Records from processor to processor and into sinks, one at a time or a list at a time.

A processor forwards to its children; a child that is a sink serializes the record with the
sink's serdes and appends it to the task's output. Where a processor's output goes down one
straight line of stateless operators (:class:`~kspark.processor.batch.RecordMapper`) into a
sink, a list of records (or columns) goes through them at once, with the same output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from kspark.config import StreamsConfig
from kspark.errors import SerializationError, StreamsError
from kspark.processor.api import Forwarder
from kspark.processor.batch import ColumnMapper, PassThrough, RecordMapper
from kspark.record_columns import RecordColumns
from kspark.records import Record, SinkContext
from kspark.runtime.context import RecordContext
from kspark.runtime.serialized import Output, OutputBlock, OutputRecord
from kspark.serdes import serializer_of
from kspark.topology.topology import SinkNode, Topology

#: a straight line below a node: its stateless operators (name, processor) and the sink's name
SinkChain = tuple[list[tuple[str, RecordMapper]], str]
#: fewer records than this go one at a time: the list machinery costs more than it saves (a
#: cache flushed after every record, as the test driver commits, forwards one or two changes)
_LIST_AT_LEAST: Final = 3
#: what a sink writes one record with: its node, key and value serializers
_SinkWriter = tuple[SinkNode, Callable[[Any], bytes | None], Callable[[Any], bytes | None]]


class Forwarding(Forwarder):
    """The forwarding of one task. ``processors`` and ``children`` are the task's own (filled
    at its ``init``); what sinks write collects in :attr:`output` until drained."""

    def __init__(
        self,
        topology: Topology,
        config: StreamsConfig,
        current: RecordContext,
        processors: dict[str, Any],
        children: dict[str, list[str]],
    ) -> None:
        self.topology = topology
        self.config = config
        self.current = current
        self.processors = processors
        self.children = children
        #: records written by sinks (and dead-letter records) since the last drain
        self.output: Output = []
        #: sink node name -> (node, key serde, value serde)
        self._sinks: dict[str, tuple[SinkNode, Any, Any]] = {}
        self._writers: dict[str, _SinkWriter] = {}
        self._chains: dict[str, SinkChain | None] = {}
        #: the block the last record a sink wrote one at a time went into
        self._block: OutputBlock | None = None
        #: node -> where a record it forwards goes (:meth:`_passed_through`): each child's name
        #: and processor (``None``: a sink)
        self._targets: dict[str, list[tuple[str, Any]]] = {}

    def drain(self) -> Output:
        out, self.output = self.output, []
        return out

    def forward(self, from_node: str, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` from ``from_node`` to its children (or the named child)."""
        if record.timestamp is None:
            record = record.with_timestamp(self.current.timestamp)
        if child_name is None:
            targets = self._targets.get(from_node)
            if targets is None:
                targets = self._targets[from_node] = [
                    (name, self.processors.get(name)) for name in self._passed_through(from_node)]
            for name, processor in targets:
                if processor is None:
                    self.deliver(name, record)
                else:
                    self._process(name, processor, record)
            return
        children = self.children[from_node]
        if child_name not in children:
            raise StreamsError(
                f"processor {from_node!r} has no child {child_name!r}; children: {children}"
            )
        self.deliver(child_name, record)

    def _passed_through(self, node: str) -> list[str]:
        """The children of ``node``, each pass-through child (which would forward the record
        unchanged, running no code of a user's) replaced by its own children, in order."""
        targets: list[str] = []
        for child in self.children[node]:
            if isinstance(self.processors.get(child), PassThrough):
                targets.extend(self._passed_through(child))
            else:
                targets.append(child)
        return targets

    def forward_all(self, from_node: str, records: list[Record]) -> None:
        """:meth:`forward` each of ``records`` (all timestamped) from ``from_node``, in order;
        a list at a time down a :meth:`sink_chain`."""
        chain = self.sink_chain(from_node)
        if (chain is None or len(records) < _LIST_AT_LEAST
                or any(r.timestamp is None for r in records)):
            for record in records:
                self.forward(from_node, record)
            return
        mappers, sink = chain
        self._write_sink(sink, self._mapped(mappers, records))

    def forward_columns(self, from_node: str, columns: RecordColumns) -> None:
        """:meth:`forward_all` of ``columns.records()``. Operators of the sink chain that map
        columns take them as they are; the records are made only for the first operator that
        does not, and never when all of them do."""
        chain = self.sink_chain(from_node)
        if chain is None:
            self.forward_all(from_node, columns.records())
            return
        mappers, sink = chain
        for i, (name, processor) in enumerate(mappers):
            if not isinstance(processor, ColumnMapper):
                self._write_sink(sink, self._mapped(mappers[i:], columns.records()))
                return
            columns = self.current.in_node(name, processor.map_columns, columns)
        node, key_serde, value_serde = self._sink(sink)  # type: ignore[misc]  # a sink node
        try:
            keys = key_serde.serialize_all(columns.keys)
            values = value_serde.serialize_all(columns.values)
        except SerializationError:
            self._write_sink(sink, columns.records())  # the first record's error
            raise
        self.output.append(OutputBlock(node.topic, keys, values, columns.timestamps.tolist()))

    def _mapped(self, mappers: list[tuple[str, RecordMapper]], records: list[Record]
                ) -> list[Record]:
        for name, processor in mappers:
            records = self.current.in_node(name, processor.map_batch, records)
        return records

    def sink_chain(self, node: str) -> SinkChain | None:
        """The stateless operators and the sink below ``node`` when its output goes down one
        straight line of them into a sink (every node on it with one child)."""
        if node in self._chains:
            return self._chains[node]
        mappers: list[tuple[str, RecordMapper]] = []
        chain = None
        name = node
        while len(self.children.get(name, ())) == 1:
            name = self.children[name][0]
            processor = self.processors.get(name)
            if processor is None:
                sink = self.topology.nodes.get(name)
                # a sink with a partitioner or a topic extractor writes record by record
                if (isinstance(sink, SinkNode) and sink.partitioner is None
                        and sink.topic_extractor is None):
                    chain = (mappers, name)
                break
            if not isinstance(processor, RecordMapper):
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
                self.deliver(name, record)
            raise
        topic = node.topic
        stamps = cast(list[int], [r.timestamp for r in records])  # all set (forward_all)
        if any(r.headers for r in records):
            self.output.extend(
                OutputRecord(topic, k, v, ts, r.headers)
                for k, v, ts, r in zip(keys, values, stamps, records)
            )
        else:
            self.output.append(OutputBlock(topic, keys, values, stamps))

    def _writer(self, name: str) -> _SinkWriter | None:
        """How sink ``name`` writes one record (``None``: not a sink)."""
        writer = self._writers.get(name)
        if writer is None:
            sink = self._sink(name)
            if sink is None:
                return None
            node, key_serde, value_serde = sink
            writer = self._writers[name] = (
                node, serializer_of(key_serde), serializer_of(value_serde)
            )
        return writer

    def _process(self, name: str, processor: Any, record: Record) -> None:
        """Run ``processor`` (node ``name``) on ``record``, as the current node."""
        ts: int = record.timestamp  # type: ignore[assignment]  # set by forward
        current = self.current
        previous, previous_ts = current.node, current.timestamp
        current.node, current.timestamp = name, ts
        try:
            processor.process(record)
        except Exception:
            current.failed(name, record.key)
            raise
        finally:
            current.node, current.timestamp = previous, previous_ts

    def deliver(self, name: str, record: Record) -> None:
        """Hand ``record`` (timestamped: :meth:`forward` sets it) to processor ``name``, or
        write it if ``name`` is a sink."""
        ts: int = record.timestamp  # type: ignore[assignment]  # set by forward
        processor = self.processors.get(name)
        if processor is not None:
            self._process(name, processor, record)
            return
        writer = self._writers.get(name) or self._writer(name)
        if writer is None:
            return
        node, key_of, value_of = writer
        topic = node.topic or self._extracted_topic(node, record, ts)
        try:
            key = key_of(record.key)
            value = value_of(record.value)
        except SerializationError as exc:
            raise SerializationError(f"sink {node.name!r} (topic {topic!r}, record key "
                                     f"{record.key!r:.100}): {exc}") from exc
        partitioner = node.partitioner
        partition = None if partitioner is None else partitioner(record.key, record.value)
        output = self.output
        if partition is not None or record.headers:
            output.append(OutputRecord(topic, key, value, ts, record.headers, partition))
            return
        # records of one sink in a row go into one block: no object per record
        block = self._block
        if output and output[-1] is block and block is not None and block.topic == topic:
            block.keys.append(key)
            block.values.append(value)
            block.timestamps.append(ts)
        else:
            self._block = block = OutputBlock(topic, [key], [value], [ts])
            output.append(block)

    def _extracted_topic(self, node: SinkNode, record: Record, ts: int) -> str:
        """The topic ``node``'s topic extractor chooses for ``record``."""
        # Any: a user function's result is checked below, not where it is returned
        extractor: Any = node.topic_extractor
        assert extractor is not None
        meta = self.current.record_metadata()
        context = SinkContext(meta.topic if meta else None, meta.partition if meta else None,
                              meta.offset if meta else None, ts, record.headers)
        try:
            topic = extractor(record.key, record.value, context)
        except Exception:
            self.current.failed(node.name)
            raise
        if not isinstance(topic, str) or not topic:
            self.current.failed(node.name)
            raise StreamsError(f"the topic extractor of sink {node.name!r} returned {topic!r:.80} "
                               f"for key {record.key!r:.80}, not a topic name")
        return topic
