"""The processor graph: sources, processors, stores and sinks, split into sub-topologies."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kspark.errors import TopologyError
from kspark.processor.api import Processor
from kspark.serdes import Serde, as_serde
from kspark.serdes.registry import for_topic
from kspark.topology.description import TopologyDescription
from kspark.topology.nodes import Node, ProcessorNode, ProcessorSupplier, SinkNode, SourceNode

__all__ = ["Node", "ProcessorNode", "SinkNode", "SourceNode", "SubTopology", "Topology",
           "TopologyDescription"]


@dataclass
class SubTopology:
    """A connected part of the graph; each partition of its sources runs as one task."""

    id: int
    nodes: list[str]
    source_topics: list[str]
    sink_topics: list[str]
    stores: list[str]


def _as_supplier(supplier: Any, name: str) -> ProcessorSupplier:
    if isinstance(supplier, Processor):
        raise TopologyError(
            f"processor {name!r}: pass a supplier (a Processor subclass or a zero-argument "
            "factory), not a Processor instance: each task needs its own instance"
        )
    if not callable(supplier):
        raise TopologyError(f"processor {name!r}: supplier {supplier!r} is not callable")
    return supplier


def _serde(serde: Any) -> Serde | None:
    return None if serde is None else as_serde(serde)


class Topology:
    """A graph of processors; built by hand or by :class:`kspark.StreamsBuilder`."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.store_builders: dict[str, Any] = {}
        #: repartition topics owned by the application: name -> number of partitions (or None)
        self.internal_topics: dict[str, int | None] = {}
        #: stores restored from (and only from) another topic, read-only: store -> topic
        self.source_stores: dict[str, str] = {}
        #: groups of nodes whose source topics must have the same partition count (the two
        #: sides of a join), checked when the application plans its tasks
        self.copartition_groups: list[tuple[str, ...]] = []
        #: internal topics whose records a later stage sends back to an earlier one (a
        #: foreign-key join's registrations): on Spark they reach it in the next micro-batch
        self.feedback_topics: set[str] = set()
        #: global stores (every task that uses one holds all of it): store -> its source topic
        self.global_stores: dict[str, str] = {}
        #: the source and processor node of each global store: store -> (source, processor)
        self.global_nodes: dict[str, tuple[str, str]] = {}

    # -- building ----------------------------------------------------------------------------
    def _check_new(self, name: str) -> None:
        if not name:
            raise TopologyError("node name must not be empty")
        if name in self.nodes:
            raise TopologyError(f"node {name!r} is already added to the topology")

    def _check_parents(self, name: str, parents: tuple[str, ...]) -> list[str]:
        if not parents:
            raise TopologyError(f"node {name!r} needs at least one parent")
        for p in parents:
            if p == name:
                raise TopologyError(f"node {name!r} cannot be its own parent")
            if p not in self.nodes:
                raise TopologyError(f"parent {p!r} of node {name!r} is not in the topology")
            if isinstance(self.nodes[p], SinkNode):
                raise TopologyError(f"parent {p!r} of node {name!r} is a sink and has no children")
        return list(parents)

    def add_source(
        self,
        name: str,
        topic: str | list[str] | re.Pattern[str],
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Callable[[Any, int], int] | None = None,
    ) -> Topology:
        """Read ``topic`` (a name, a list of names, or a compiled pattern), each record with
        the timestamp ``timestamp_extractor(consumed_record, partition_time)`` gives it
        (:mod:`kspark.processor.timestamps`; default: the timestamp it was written with)."""
        if timestamp_extractor is not None and not callable(timestamp_extractor):
            raise TopologyError(f"source {name!r}: timestamp_extractor must be callable "
                                f"(record, partition_time) -> ms, got {timestamp_extractor!r}")
        self._check_new(name)
        pattern = topic if isinstance(topic, re.Pattern) else None
        topics: list[str] = (
            [] if isinstance(topic, re.Pattern) else [topic] if isinstance(topic, str)
            else list(topic))
        for t in topics:
            for node in self.nodes.values():
                if isinstance(node, SourceNode) and t in node.topics:
                    raise TopologyError(f"topic {t!r} is already read by source {node.name!r}")
        key, value = _serde(key_serde), _serde(value_serde)
        if len(topics) == 1:  # a Schema Registry serde names its subjects after the topic
            key, value = for_topic(key, topics[0]), for_topic(value, topics[0])
        self.nodes[name] = SourceNode(name, topics, key, value, pattern, timestamp_extractor)
        return self

    def add_processor(self, name: str, supplier: Any, *parent_names: str) -> Topology:
        self._check_new(name)
        parents = self._check_parents(name, parent_names)
        self.nodes[name] = ProcessorNode(name, _as_supplier(supplier, name), parents)
        return self

    def add_sink(
        self,
        name: str,
        topic: str | Callable[[Any, Any, Any], str],
        *parent_names: str,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: Callable[[Any, Any], int | None] | None = None,
    ) -> Topology:
        """Write the records of ``parent_names`` to ``topic``, or to the topic
        ``topic(key, value, sink_context)`` names for each record (a topic extractor, given
        a :class:`~kspark.records.SinkContext`; on Spark, one of the app's topics);
        ``partitioner(key, value)`` chooses a record's partition (``None``: Kafka's default
        partitioner on the key)."""
        self._check_new(name)
        parents = self._check_parents(name, parent_names)
        if callable(topic):
            self.nodes[name] = SinkNode(name, "", parents, _serde(key_serde),
                                        _serde(value_serde), partitioner, topic)
        elif isinstance(topic, str) and topic:
            self.nodes[name] = SinkNode(name, topic, parents, for_topic(_serde(key_serde), topic),
                                        for_topic(_serde(value_serde), topic), partitioner)
        else:
            raise TopologyError(f"sink {name!r}: the topic must be a name or a topic extractor "
                                f"(key, value, sink_context) -> name, got {topic!r}")
        return self

    def has_topic_extractors(self) -> bool:
        """Whether a sink chooses its topic per record (its topics are not known before)."""
        return any(isinstance(n, SinkNode) and n.topic_extractor is not None
                   for n in self.nodes.values())

    def partition_suffixes(self) -> dict[str, int]:
        """Sink topics whose key serde makes the partitioner ignore the key's last bytes
        (windowed keys: :attr:`~kspark.serdes.Serde.partition_suffix_bytes`): topic -> bytes."""
        return {
            node.topic: node.key_serde.partition_suffix_bytes
            for node in self.nodes.values()
            if isinstance(node, SinkNode) and node.topic and node.key_serde is not None
            and node.key_serde.partition_suffix_bytes
        }

    def add_state_store(self, store_builder: Any, *processor_names: str) -> Topology:
        name = store_builder.name
        if name in self.store_builders:
            raise TopologyError(f"store {name!r} is already added to the topology")
        self.store_builders[name] = store_builder
        if processor_names:
            self.connect_processor_and_state_stores(*processor_names[:1], name)
            for p in processor_names[1:]:
                self.connect_processor_and_state_stores(p, name)
        return self

    def add_read_only_state_store(
        self,
        store_builder: Any,
        topic: str,
        *processor_names: str,
        source_name: str | None = None,
        restorer_name: str | None = None,
    ) -> Topology:
        """Add a read-only store restored from ``topic``, another application's changelog of
        a store like ``store_builder`` (same kind, window size, serdes), and kept current as
        that application writes it (docs/semantics.md §7). ``topic`` becomes a source of this
        topology (give its location in ``StreamsApp(topics=...)``); the named processors may
        read the store and writing it raises. The store keeps no changelog of its own: its
        builder's logging and caching are turned off."""
        from kspark.state.internals.changelog import (
            ChangelogCodec,
            ChangelogKeySerde,
            ChangelogValueSerde,
        )
        from kspark.topology.internals import source_stores

        name = store_builder.name
        if name in self.store_builders:
            raise TopologyError(f"store {name!r} is already added to the topology")
        if not isinstance(topic, str) or not topic:
            raise TopologyError(f"read-only store {name!r}: topic must be a topic name")
        if topic in self.internal_topics or topic in self.sink_topics():
            raise TopologyError(
                f"read-only store {name!r}: topic {topic!r} is written by this topology; a "
                "read-only store reads another application's changelog"
            )
        source = source_name or source_stores.source_name(name)
        restorer = restorer_name or source_stores.restorer_name(name)
        for node in (source, restorer):
            self._check_new(node)
        for p in processor_names:
            if not isinstance(self.nodes.get(p), ProcessorNode):
                raise TopologyError(f"processor {p!r} is not in the topology")
        store_builder.with_logging_disabled().with_caching_disabled()
        codec = ChangelogCodec.for_builder(store_builder)
        self.add_source(source, topic, ChangelogKeySerde(codec), ChangelogValueSerde(codec))
        self.add_processor(restorer, partial(source_stores.ChangelogRestorer, name, codec), source)
        self.add_state_store(store_builder, restorer, *processor_names)
        self.source_stores[name] = topic
        return self

    def connect_processor_and_state_stores(
        self, processor_name: str, *store_names: str
    ) -> Topology:
        node = self.nodes.get(processor_name)
        if not isinstance(node, ProcessorNode):
            raise TopologyError(f"processor {processor_name!r} is not in the topology")
        for s in store_names:
            if s not in self.store_builders:
                raise TopologyError(
                    f"store {s!r} (for processor {processor_name!r}) is not added to the topology"
                )
            if s not in node.stores:
                node.stores.append(s)
        return self

    def add_global_store(
        self,
        store_builder: Any,
        source_name: str,
        topic: str,
        processor_name: str,
        supplier: Any,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Callable[[Any, int], int] | None = None,
    ) -> Topology:
        """Add a global store: kept by ``processor_name`` (a processor of the records of
        ``topic``, which writes the store) and readable by any processor connected to it. Every
        task that uses it holds the whole store, updated from every partition of ``topic``
        before the task's own records (docs/semantics.md §9.3). The store keeps no changelog
        (the topic is its changelog)."""
        name = store_builder.name
        if name in self.store_builders:
            raise TopologyError(f"store {name!r} is already added to the topology")
        self.add_source(source_name, topic, key_serde, value_serde, timestamp_extractor)
        self.add_processor(processor_name, supplier, source_name)
        store_builder.with_logging_disabled()
        self.add_state_store(store_builder, processor_name)
        self.global_stores[name] = topic
        self.global_nodes[name] = (source_name, processor_name)
        return self

    def global_topics(self) -> list[str]:
        """The source topics of the global stores."""
        return list(self.global_stores.values())

    def copartition(self, *node_names: str) -> Topology:
        """Require the source topics that ``node_names`` read from (through their parents) to
        have the same number of partitions, as Kafka Streams requires of joined streams and
        tables."""
        for n in node_names:
            if n not in self.nodes:
                raise TopologyError(f"node {n!r} is not in the topology")
        self.copartition_groups.append(tuple(node_names))
        return self

    # -- structure ---------------------------------------------------------------------------
    def upstream_topics(self, name: str) -> list[str]:
        """The topics of the sources ``name`` reads from, directly or through its parents."""
        out: list[str] = []
        seen: set[str] = set()
        todo = [name]
        while todo:
            node = self.nodes[todo.pop()]
            if node.name in seen:
                continue
            seen.add(node.name)
            if isinstance(node, SourceNode):
                out.extend(t for t in node.topics if t not in out)
            else:
                todo.extend(node.parents)
        return out

    def children(self, name: str) -> list[str]:
        return [
            n.name
            for n in self.nodes.values()
            if not isinstance(n, SourceNode) and name in n.parents
        ]

    def _shape(self) -> tuple[int, int]:
        """What :meth:`sub_topologies` depends on, cheaply: nodes are only ever added and
        processors only ever connected to more stores."""
        return len(self.nodes), sum(
            len(n.stores) for n in self.nodes.values() if isinstance(n, ProcessorNode))

    def sub_topologies(self) -> list[SubTopology]:
        """Connected components (by edges and shared stores), numbered in insertion order
        (computed once per shape of the graph)."""
        shape = self._shape()
        cached = self.__dict__.get("_sub_topologies")
        if cached is not None and cached[0] == shape:
            return cached[1]
        out = self._components()
        self.__dict__["_sub_topologies"] = (shape, out)
        self.__dict__["_by_topic"] = (shape, {})
        return out

    def _components(self) -> list[SubTopology]:
        parent_of = {n: n for n in self.nodes}

        def find(x: str) -> str:
            while parent_of[x] != x:
                parent_of[x] = parent_of[parent_of[x]]
                x = parent_of[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent_of[rb] = ra

        store_owner: dict[str, str] = {}
        global_stores = self.global_stores
        for node in self.nodes.values():
            if isinstance(node, SourceNode):
                continue
            for p in node.parents:
                union(p, node.name)
            if isinstance(node, ProcessorNode):
                for s in node.stores:
                    if s in global_stores:
                        continue  # readers of a global store stay apart
                    if s in store_owner:
                        union(store_owner[s], node.name)
                    else:
                        store_owner[s] = node.name
        global_nodes = {n: store for store, pair in self.global_nodes.items() for n in pair}
        groups: dict[str, list[str]] = {}
        for name in self.nodes:
            if name not in global_nodes:
                groups.setdefault(find(name), []).append(name)
        # every group that reads a global store runs the store's own nodes too (first); a
        # global store nobody reads is a group of its own
        read: set[str] = set()
        for names in groups.values():
            used = [s for n in names if isinstance(node := self.nodes[n], ProcessorNode)
                    for s in node.stores if s in global_stores]
            for store in dict.fromkeys(used):
                names[:0] = list(self.global_nodes[store])
                read.add(store)
        for store, pair in self.global_nodes.items():
            if store not in read:
                groups[pair[0]] = list(pair)
        out = []
        for i, names in enumerate(groups.values()):
            nodes = [self.nodes[n] for n in names]
            sources = [t for node in nodes if isinstance(node, SourceNode) for t in node.topics]
            sinks = [node.topic for node in nodes if isinstance(node, SinkNode) and node.topic]
            stores: list[str] = []
            for n in names:
                node = self.nodes[n]
                if isinstance(node, ProcessorNode):
                    stores.extend(s for s in node.stores if s not in stores)
            out.append(SubTopology(i, names, sources, sinks, stores))
        return out

    def sub_topology_for_topic(self, topic: str) -> SubTopology | None:
        """The sub-topology that reads ``topic`` (by name or pattern), or ``None``."""
        subs = self.sub_topologies()
        by_topic = self.__dict__["_by_topic"][1]
        if topic not in by_topic:
            by_topic[topic] = self._reading(subs, topic)
        return by_topic[topic]

    def _reading(self, subs: list[SubTopology], topic: str) -> SubTopology | None:
        for st in subs:
            if topic in st.source_topics:
                return st
            for n in st.nodes:
                node = self.nodes[n]
                if isinstance(node, SourceNode) and node.pattern and node.pattern.fullmatch(topic):
                    return st
        return None

    def source_topics(self) -> list[str]:
        return [t for n in self.nodes.values() if isinstance(n, SourceNode) for t in n.topics]

    def external_source_topics(self) -> list[str]:
        return [t for t in self.source_topics() if t not in self.internal_topics]

    def sink_topics(self) -> list[str]:
        """The topics the sinks write (not those a topic extractor chooses)."""
        out: list[str] = []
        for n in self.nodes.values():
            if isinstance(n, SinkNode) and n.topic and n.topic not in out:
                out.append(n.topic)
        return out

    def external_sink_topics(self) -> list[str]:
        return [t for t in self.sink_topics() if t not in self.internal_topics]

    def validate(self) -> None:
        """Raise :class:`TopologyError` if the topology cannot run."""
        if not any(isinstance(n, SourceNode) for n in self.nodes.values()):
            raise TopologyError("topology has no source")
        for name, node in self.nodes.items():
            if isinstance(node, ProcessorNode):
                for s in node.stores:
                    if s not in self.store_builders:
                        raise TopologyError(f"processor {name!r} uses unknown store {s!r}")
        sinks = self.sink_topics()
        for store, topic in self.source_stores.items():
            if topic in sinks:
                raise TopologyError(
                    f"read-only store {store!r}: its changelog topic {topic!r} is written by "
                    "this topology"
                )

    def describe(self) -> TopologyDescription:
        return TopologyDescription(self)

    def __repr__(self) -> str:
        return str(self.describe())
