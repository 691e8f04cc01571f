"""The graph the DSL builds: node and store naming, the topology, repartition topics.

Node names follow Kafka Streams: ``<PREFIX><10-digit index>`` with one counter per builder
(``KSTREAM-SOURCE-0000000000``, ``KSTREAM-FILTER-0000000001``, ...). Unnamed stores are called
``<PREFIX>STATE-STORE-<index>`` (e.g. ``KSTREAM-AGGREGATE-STATE-STORE-0000000002``); a table
read with ``builder.table`` gets ``<topic>-STATE-STORE-<index>``. Re-keyed data reaches a
stateful operator through the repartition topic ``<store or node name>-repartition``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, runtime_checkable

from kspark.dsl.api import (
    GlobalKTable,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from kspark.dsl.internals.internal_serde import Pickle
from kspark.dsl.internals.processors import DropNullKeyProcessor, TableSourceProcessor
from kspark.dsl.internals.table_views import OldValues, SourceView, TableView
from kspark.dsl.materialized import Materialized
from kspark.serdes import Serde, as_serde
from kspark.state.builders import StoreBuilder, Stores
from kspark.topology.nodes import ProcessorNode, SinkNode, SourceNode
from kspark.topology.topology import Topology
from kspark.windows import SessionWindows, SlidingWindows, TimeWindows

REPARTITION_SUFFIX = "-repartition"
#: a name the builder generated, as Kafka Streams recognises one
GENERATED_NAME = re.compile(r"KSTREAM.*-[0-9]{10}")


def optional_serde(serde: Any) -> Serde | None:
    return None if serde is None else as_serde(serde)


class DslGraph(ABC):
    """The topology under construction, the names of its nodes and stores, and how the DSL's
    streams and tables make each other (implemented by the builder, which knows them all)."""

    def __init__(self) -> None:
        self._topology = Topology()
        self._index = 0
        #: each repartition's null-key filter -> its topic; joins that join null keys
        self._null_key_filters: dict[str, str] = {}
        self._relaxed_joins: set[str] = set()

    # -- naming ------------------------------------------------------------------------------
    def new_name(self, prefix: str) -> str:
        """``prefix`` + the next index as 10 digits (``KSTREAM-MAP-0000000003``)."""
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def new_store_name(self, prefix: str) -> str:
        """A generated store name: ``prefix`` + ``STATE-STORE-`` + the next index."""
        return self.new_name(f"{prefix}STATE-STORE-")

    @property
    def topology(self) -> Topology:
        """The topology being built (the same object :meth:`build` returns)."""
        return self._topology

    # -- repartition topics ------------------------------------------------------------------
    def repartition(self, parent: str, prefix: str, key_serde: Serde | None,
                    value_serde: Serde | None, *,
                    null_key_filter: bool = True, partitions: int | None = None,
                    partitioner: Callable[[Any, Any], int | None] | None = None,
                    stream_names: bool = True, named: str | None = None) -> str:
        """Route ``parent``'s records through the internal topic ``<prefix>-repartition``
        (``partitions`` of its own, else as the plan gives it): a null-key filter
        (``null_key_filter``; :meth:`settle_null_keys` says what it drops), a sink
        (``partitioner(key, value)`` choosing a record's partition), and a new source, which
        starts a new sub-topology. Serdes default to :class:`.internal_serde.Pickle`. The nodes
        take the next indexes (``KSTREAM-SINK-``, ``-FILTER-``, ``-SOURCE-``); as Kafka Streams
        names a KStream's repartition nodes (``stream_names``), a prefix that is not itself a
        generated name (``KSTREAM...-<10 digits>``) names them ``<topic>-sink``, ``-filter``
        and ``-source`` instead, the indexes taken all the same; ``named`` names the sink and
        source ``<named>-sink`` and ``<named>-source`` (a named table aggregation). Returns the
        source."""
        topic = prefix + REPARTITION_SUFFIX
        sink = self.new_name("KSTREAM-SINK-")
        filter_name = self.new_name("KSTREAM-FILTER-") if null_key_filter or stream_names else ""
        source = self.new_name("KSTREAM-SOURCE-")
        if stream_names and not GENERATED_NAME.fullmatch(prefix):
            sink, filter_name, source = (f"{topic}-{n}" for n in ("sink", "filter", "source"))
        if named is not None:
            sink, source = f"{named}-sink", f"{named}-source"
        topo = self._topology
        if null_key_filter:
            topo.add_processor(filter_name, partial(DropNullKeyProcessor, topic), parent)
            self._null_key_filters[filter_name] = topic
            parent = filter_name
        key_serde = key_serde or Pickle()
        value_serde = value_serde or Pickle()
        topo.add_sink(sink, topic, parent, key_serde=key_serde, value_serde=value_serde,
                      partitioner=partitioner)
        topo.internal_topics[topic] = partitions
        topo.add_source(source, topic, key_serde, value_serde)
        return source

    def relax_null_keys(self, *joins: str) -> None:
        """Mark ``joins`` (nodes of a left or outer join) as joining records with null keys:
        the repartition topics upstream of them keep null keys (:meth:`settle_null_keys`)."""
        self._relaxed_joins.update(joins)

    def settle_null_keys(self) -> None:
        """Each repartition's filter drops records with null keys unless a join that joins
        them is downstream of it (a left or outer stream-stream join, a left stream-table or
        stream-global-table join), whatever the repartition is for, as Kafka Streams rewrites
        the filters when it builds the topology
        (``InternalStreamsBuilder#rewriteRepartitionNodes``). Upstream of a node: its parents,
        and a repartition topic's sinks upstream of the topic's source."""
        topo = self._topology
        upstream: set[str] = set()
        todo = list(self._relaxed_joins)
        while todo:
            node = topo.nodes[todo.pop()]
            if node.name in upstream:
                continue
            upstream.add(node.name)
            if isinstance(node, SourceNode):
                todo.extend(n.name for n in topo.nodes.values() if isinstance(n, SinkNode)
                            and n.topic in node.topics and n.topic in topo.internal_topics)
            else:
                todo.extend(node.parents)
        for name, topic in self._null_key_filters.items():
            node = topo.nodes[name]
            if isinstance(node, ProcessorNode):
                node.supplier = partial(DropNullKeyProcessor, topic, name not in upstream)

    # -- how the DSL's streams and tables make each other ------------------------------------
    @abstractmethod
    def new_kstream(self, node: str, key_serde: Serde | None = None,
                    value_serde: Serde | None = None, repartition_required: bool = False
                    ) -> KStream: ...

    def table_source(self, name: str, parent: str, store: str,
                     materialized: Materialized | None) -> TableView:
        """Add the processor ``name`` reading ``parent``'s upserts as a table kept in ``store``
        (added now when ``materialized`` names it, else once something needs it); return its
        view (``builder.table``, ``KStream.to_table``)."""
        versioned = materialized is not None and materialized.versioned_history is not None
        old, kept = OldValues(), OldValues(_named(materialized) or versioned)
        topo = self._topology
        topo.add_processor(name, partial(TableSourceProcessor, store, old, kept), parent)

        def materialize() -> None:
            topo.add_state_store(key_value_store_builder(store, materialized), name)

        if kept.enabled:
            materialize()
        return SourceView(old, store, kept, materialize, versioned)

    @abstractmethod
    def new_ktable(self, node: str, view: TableView, *, queryable_store: str | None = None,
                   key_serde: Serde | None = None, value_serde: Serde | None = None,
                   suppress_duration_ms: int | None = None) -> KTable: ...

    @abstractmethod
    def new_grouped_stream(self, node: str, repartition_required: bool,
                           key_serde: Serde | None, value_serde: Serde | None,
                           result_key_serde: Serde | None,
                           repartition_name: str | None = None) -> KGroupedStream: ...

    @abstractmethod
    def new_grouped_table(self, node: str, key_serde: Serde | None,
                          value_serde: Serde | None,
                          repartition_name: str | None = None) -> KGroupedTable: ...

    @abstractmethod
    def stream_table_join(self, stream: KStream, table: KTable | GlobalKTable, kind: str,
                          args: tuple[Any, ...], kwargs: dict[str, Any]) -> KStream:
        """``stream.join(table, ...)`` / ``left_join`` of a KTable or a GlobalKTable."""

    @abstractmethod
    def foreign_key_join(self, table: KTable, other: KTable,
                         foreign_key_extractor: Callable[[Any], Any],
                         joiner: Callable[[Any, Any], Any], kind: str,
                         materialized: Materialized | None, name: str | None = None) -> KTable:
        """``table.join(other, joiner, foreign_key_extractor=...)`` / ``left_join``."""

    @abstractmethod
    def new_session_windowed(self, grouping: Grouping,
                             windows: SessionWindows) -> SessionWindowedKStream: ...

    @abstractmethod
    def new_time_windowed(self, grouping: Grouping,
                          windows: TimeWindows | SlidingWindows) -> TimeWindowedKStream: ...


@runtime_checkable
class Grouping(Protocol):
    """What a windowed aggregation or a cogroup needs of a grouped stream."""

    @property
    def node_name(self) -> str: ...

    @property
    def graph(self) -> DslGraph: ...

    @property
    def result_key_serde(self) -> Serde | None:
        """The key serde of the grouping's results (before windowing), if known."""
        ...

    @property
    def value_serde(self) -> Serde | None:
        """The serde of the grouped values, if known."""
        ...

    def source_for(self, store_name: str) -> str:
        """The node an aggregation with store ``store_name`` reads from."""
        ...


def _named(m: Materialized | None) -> bool:
    return m is not None and m.name is not None


def key_value_store_builder(name: str, materialized: Materialized | None) -> StoreBuilder:
    """The key-value store behind a KTable: caching and logging on unless ``materialized``
    turns them off; a versioned store when it asks for one."""
    m = materialized or Materialized()
    if m.versioned_history is not None:
        return Stores.versioned_key_value_store(name, m.versioned_history, m.key_serde,
                                                m.value_serde, m.logging)
    return Stores.key_value_store(name, key_serde=m.key_serde, value_serde=m.value_serde,
                                  caching=m.caching, logging=m.logging)


def store_name_for(builder: DslGraph, materialized: Materialized | None,
                   prefix: str) -> str:
    """The user's store name, or a generated ``<prefix>STATE-STORE-<index>``."""
    if materialized is not None and materialized.name:
        return materialized.name
    return builder.new_store_name(prefix)
