"""StreamsBuilder: builds a :class:`~kspark.topology.Topology` from KStream/KTable operations.

Node names follow Kafka Streams: ``<PREFIX><10-digit index>`` with one counter per builder
(``KSTREAM-SOURCE-0000000000``, ``KSTREAM-FILTER-0000000001``, ...). Unnamed stores are called
``<PREFIX>STATE-STORE-<index>`` (e.g. ``KSTREAM-AGGREGATE-STATE-STORE-0000000002``); a table
read with ``builder.table`` gets ``<topic>-STATE-STORE-<index>``. Re-keyed data reaches a
stateful operator through the repartition topic ``<store or node name>-repartition``.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Any

from kspark.dsl.internal_serde import Pickle
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.dsl.processors import DropNullKeyProcessor, TableSourceProcessor
from kspark.serdes import Serde, as_serde
from kspark.state.builders import StoreBuilder, Stores
from kspark.topology.topology import Topology

if TYPE_CHECKING:
    from kspark.dsl.kstream import KStream
    from kspark.dsl.ktable import KTable

REPARTITION_SUFFIX = "-repartition"


def optional_serde(serde: Any) -> Serde | None:
    return None if serde is None else as_serde(serde)


class StreamsBuilder:
    """Entry point of the DSL: read topics as streams or tables, then :meth:`build`."""

    def __init__(self) -> None:
        self._topology = Topology()
        self._index = 0

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

    # -- sources -----------------------------------------------------------------------------
    def stream(self, topics: str | list[str] | re.Pattern[str], key_serde: Any = None,
               value_serde: Any = None) -> KStream:
        """A KStream of the records of ``topics`` (a name, a list of names or a pattern).
        Serdes default to the application's default serdes."""
        from kspark.dsl.kstream import KStream

        name = self.new_name("KSTREAM-SOURCE-")
        self._topology.add_source(name, topics, key_serde, value_serde)
        return KStream(self, name, optional_serde(key_serde), optional_serde(value_serde))

    def table(self, topic: str, key_serde: Any = None, value_serde: Any = None,
              materialized: Materialized | str | None = None) -> KTable:
        """A KTable of ``topic`` read as upserts (a ``None`` value deletes its key), kept in a
        key-value store (caching and logging per ``materialized``, both on by default)."""
        from kspark.dsl.ktable import KTable

        m = as_materialized(materialized)
        store = store_name_for(self, m, f"{topic}-")
        source = self.new_name("KSTREAM-SOURCE-")
        name = self.new_name("KTABLE-SOURCE-")
        topo = self._topology
        topo.add_source(source, topic, key_serde, value_serde)
        topo.add_processor(name, partial(TableSourceProcessor, store), source)
        topo.add_state_store(key_value_store_builder(store, m), name)
        return KTable(self, name, store_name=store, queryable=_named(m),
                      key_serde=optional_serde(key_serde),
                      value_serde=optional_serde(value_serde))

    def add_state_store(self, store_builder: StoreBuilder) -> StreamsBuilder:
        """Add a store for :meth:`KStream.process` to connect by name."""
        self._topology.add_state_store(store_builder)
        return self

    def add_read_only_state_store(self, store_builder: StoreBuilder, topic: str) -> StreamsBuilder:
        """Add a read-only store restored from ``topic``, another application's changelog of
        a store like ``store_builder``, and kept current as it is written (SEMANTICS.md §7);
        connect it by name with :meth:`KStream.process`. See
        :meth:`Topology.add_read_only_state_store`."""
        self._topology.add_read_only_state_store(store_builder, topic)
        return self

    def build(self) -> Topology:
        """The topology of everything built so far."""
        return self._topology

    # -- helpers for the DSL classes ---------------------------------------------------------
    def repartition(self, parent: str, prefix: str, key_serde: Serde | None,
                    value_serde: Serde | None, *, drop_null_keys: bool = True) -> str:
        """Route ``parent``'s records through the internal topic ``<prefix>-repartition``:
        (a null-key filter,) a sink, and a new source, which starts a new sub-topology.
        Serdes default to :class:`~kspark.dsl.internal_serde.Pickle`. Returns the source."""
        topic = prefix + REPARTITION_SUFFIX
        sink = self.new_name("KSTREAM-SINK-")
        topo = self._topology
        if drop_null_keys:
            filter_name = self.new_name("KSTREAM-FILTER-")
            topo.add_processor(filter_name, partial(DropNullKeyProcessor, topic), parent)
            parent = filter_name
        source = self.new_name("KSTREAM-SOURCE-")
        key_serde = key_serde or Pickle()
        value_serde = value_serde or Pickle()
        topo.add_sink(sink, topic, parent, key_serde=key_serde, value_serde=value_serde)
        topo.internal_topics[topic] = None
        topo.add_source(source, topic, key_serde, value_serde)
        return source


def _named(m: Materialized | None) -> bool:
    return m is not None and m.name is not None


def key_value_store_builder(name: str, materialized: Materialized | None) -> StoreBuilder:
    """The key-value store behind a KTable: caching and logging on unless ``materialized``
    turns them off."""
    m = materialized or Materialized()
    return Stores.key_value_store(name, key_serde=m.key_serde, value_serde=m.value_serde,
                                  caching=m.caching, logging=m.logging)


def store_name_for(builder: StreamsBuilder, materialized: Materialized | None,
                   prefix: str) -> str:
    """The user's store name, or a generated ``<prefix>STATE-STORE-<index>``."""
    if materialized is not None and materialized.name:
        return materialized.name
    return builder.new_store_name(prefix)
