"""StreamsBuilder: builds a :class:`~kspark.topology.Topology` from KStream/KTable operations.

It is the one place that knows every DSL class: the streams and tables it returns make each
other through it (:meth:`StreamsBuilder.new_kstream` and friends), so the DSL's modules do not
import each other in a cycle. Naming and repartitioning live in :mod:`kspark.dsl.graph`.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from kspark.dsl.graph import (
    DslGraph,
    _named,
    key_value_store_builder,
    optional_serde,
    store_name_for,
)
from kspark.dsl.kgrouped_table import KGroupedTable
from kspark.dsl.kstream import KStream
from kspark.dsl.ktable import KTable
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.dsl.processors import TableSourceProcessor
from kspark.serdes import Serde
from kspark.state.builders import StoreBuilder
from kspark.topology.topology import Topology


class StreamsBuilder(DslGraph):
    """Entry point of the DSL: read topics as streams or tables, then :meth:`build`."""

    # -- sources -----------------------------------------------------------------------------
    def stream(self, topics: str | list[str] | re.Pattern[str], key_serde: Any = None,
               value_serde: Any = None) -> KStream:
        """A KStream of the records of ``topics`` (a name, a list of names or a pattern).
        Serdes default to the application's default serdes."""
        name = self.new_name("KSTREAM-SOURCE-")
        self._topology.add_source(name, topics, key_serde, value_serde)
        return KStream(self, name, optional_serde(key_serde), optional_serde(value_serde))

    def table(self, topic: str, key_serde: Any = None, value_serde: Any = None,
              materialized: Materialized | str | None = None) -> KTable:
        """A KTable of ``topic`` read as upserts (a ``None`` value deletes its key), kept in a
        key-value store (caching and logging per ``materialized``, both on by default)."""
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
        a store like ``store_builder``, and kept current as it is written (docs/semantics.md §7);
        connect it by name with :meth:`KStream.process`. See
        :meth:`Topology.add_read_only_state_store`."""
        self._topology.add_read_only_state_store(store_builder, topic)
        return self

    def build(self) -> Topology:
        """The topology of everything built so far."""
        return self._topology

    # -- how the DSL classes make each other -------------------------------------------------
    def new_kstream(self, node: str, key_serde: Serde | None = None,
                    value_serde: Serde | None = None, repartition_required: bool = False
                    ) -> KStream:
        return KStream(self, node, key_serde, value_serde, repartition_required)

    def new_grouped_table(self, node: str, key_serde: Serde | None,
                          value_serde: Serde | None) -> KGroupedTable:
        return KGroupedTable(self, node, key_serde, value_serde)
