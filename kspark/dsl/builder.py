"""StreamsBuilder: builds a :class:`~kspark.topology.Topology` from KStream/KTable operations.

It returns the DSL's public types (:mod:`kspark.dsl.api`) and is the one place that knows
their implementations (:mod:`kspark.dsl.internals`): those make each other through it (the
``new_*`` factories of :class:`~kspark.dsl.internals.graph.DslGraph`), so the DSL's modules do
not import each other in a cycle. Naming and repartitioning live in the graph.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from kspark.dsl.api import (
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from kspark.dsl.internals.graph import (
    DslGraph,
    Grouping,
    _named,
    key_value_store_builder,
    optional_serde,
    store_name_for,
)
from kspark.dsl.internals.kgrouped_stream import KGroupedStreamImpl
from kspark.dsl.internals.kgrouped_table import KGroupedTableImpl
from kspark.dsl.internals.kstream import KStreamImpl
from kspark.dsl.internals.ktable import KTableImpl
from kspark.dsl.internals.processors import TableSourceProcessor
from kspark.dsl.internals.windowed_kstream import (
    SessionWindowedKStreamImpl,
    TimeWindowedKStreamImpl,
)
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.serdes import Serde
from kspark.state.builders import StoreBuilder
from kspark.topology.topology import Topology
from kspark.windows import SessionWindows, SlidingWindows, TimeWindows


class StreamsBuilder(DslGraph):
    """Entry point of the DSL: read topics as streams or tables, then :meth:`build`."""

    # -- sources -----------------------------------------------------------------------------
    def stream(self, topics: str | list[str] | re.Pattern[str], key_serde: Any = None,
               value_serde: Any = None) -> KStream:
        """A KStream of the records of ``topics`` (a name, a list of names or a pattern).
        Serdes default to the application's default serdes."""
        name = self.new_name("KSTREAM-SOURCE-")
        self._topology.add_source(name, topics, key_serde, value_serde)
        return KStreamImpl(self, name, optional_serde(key_serde), optional_serde(value_serde))

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
        return KTableImpl(self, name, store_name=store, queryable=_named(m),
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
        return KStreamImpl(self, node, key_serde, value_serde, repartition_required)

    def new_ktable(self, node: str, *, store_name: str | None = None, queryable: bool = False,
                   key_serde: Serde | None = None, value_serde: Serde | None = None,
                   suppress_duration_ms: int | None = None) -> KTable:
        return KTableImpl(self, node, store_name=store_name, queryable=queryable,
                          key_serde=key_serde, value_serde=value_serde,
                          suppress_duration_ms=suppress_duration_ms)

    def new_grouped_stream(self, node: str, repartition_required: bool,
                           key_serde: Serde | None, value_serde: Serde | None,
                           result_key_serde: Serde | None) -> KGroupedStream:
        return KGroupedStreamImpl(self, node, repartition_required, key_serde, value_serde,
                                  result_key_serde)

    def new_grouped_table(self, node: str, key_serde: Serde | None,
                          value_serde: Serde | None) -> KGroupedTable:
        return KGroupedTableImpl(self, node, key_serde, value_serde)

    def new_session_windowed(self, grouping: Grouping,
                             windows: SessionWindows) -> SessionWindowedKStream:
        return SessionWindowedKStreamImpl(grouping, windows)

    def new_time_windowed(self, grouping: Grouping,
                          windows: TimeWindows | SlidingWindows) -> TimeWindowedKStream:
        return TimeWindowedKStreamImpl(grouping, windows)
