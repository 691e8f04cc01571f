"""StreamsBuilder: builds a :class:`~kspark.topology.Topology` from KStream/KTable operations.

It returns the DSL's public types (:mod:`kspark.dsl.api`) and is the one place that knows
their implementations (:mod:`kspark.dsl.internals`): those make each other through it (the
``new_*`` factories of :class:`~kspark.dsl.internals.graph.DslGraph`), so the DSL's modules do
not import each other in a cycle. Naming and repartitioning live in the graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from kspark.dsl.api import (
    GlobalKTable,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from kspark.dsl.internals.global_table import GlobalKTableImpl
from kspark.dsl.internals.graph import (
    DslGraph,
    Grouping,
    _named,
    key_value_store_builder,
    optional_serde,
    store_name_for,
)
from kspark.dsl.internals.joins import builders as joins
from kspark.dsl.internals.kgrouped_stream import KGroupedStreamImpl
from kspark.dsl.internals.kgrouped_table import KGroupedTableImpl
from kspark.dsl.internals.kstream import KStreamImpl, arguments
from kspark.dsl.internals.ktable import KTableImpl
from kspark.dsl.internals.processors import TableSourceProcessor
from kspark.dsl.internals.table_views import OldValues, TableView
from kspark.dsl.internals.windowed_kstream import (
    SessionWindowedKStreamImpl,
    TimeWindowedKStreamImpl,
)
from kspark.dsl.joined import Joined
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.serdes import Serde
from kspark.state.builders import StoreBuilder
from kspark.topology.topology import Topology
from kspark.windows import SessionWindows, SlidingWindows, TimeWindows


class StreamsBuilder(DslGraph):
    """Entry point of the DSL: read topics as streams or tables, then :meth:`build`."""

    # -- sources -----------------------------------------------------------------------------
    def stream(self, topics: str | list[str] | re.Pattern[str], key_serde: Any = None,
               value_serde: Any = None,
               timestamp_extractor: Callable[[Any, int], int] | None = None,
               name: str | None = None) -> KStream:
        """A KStream of the records of ``topics`` (a name, a list of names or a pattern).
        Serdes default to the application's default serdes; ``timestamp_extractor`` gives
        each record its timestamp (:mod:`kspark.processor.timestamps`); ``name`` names the
        source node (Kafka Streams' ``Consumed.as``; its index is taken all the same)."""
        generated = self.new_name("KSTREAM-SOURCE-")
        name = name or generated
        self._topology.add_source(name, topics, key_serde, value_serde, timestamp_extractor)
        return KStreamImpl(self, name, optional_serde(key_serde), optional_serde(value_serde))

    def table(self, topic: str, key_serde: Any = None, value_serde: Any = None,
              materialized: Materialized | str | None = None,
              timestamp_extractor: Callable[[Any, int], int] | None = None,
              name: str | None = None) -> KTable:
        """A KTable of ``topic`` read as upserts (a ``None`` value deletes its key). With a
        store name it is kept in that key-value store (caching and logging per
        ``materialized``, both on by default); without one only once an operator needs its
        values (a join, ``group_by``), as Kafka Streams materializes it. ``name`` (Kafka
        Streams' ``Consumed.as``) names the table's node and its source ``<name>-source``."""
        m = as_materialized(materialized)
        store = store_name_for(self, m, f"{topic}-")
        source, name = self._table_source_names(name)
        self._topology.add_source(source, topic, key_serde, value_serde, timestamp_extractor)
        view = self.table_source(name, source, store, m)
        return KTableImpl(self, name, view, queryable_store=store if _named(m) else None,
                          key_serde=optional_serde(key_serde),
                          value_serde=optional_serde(value_serde))

    def global_table(self, topic: str, key_serde: Any = None, value_serde: Any = None,
                     materialized: Materialized | str | None = None,
                     timestamp_extractor: Callable[[Any, int], int] | None = None,
                     name: str | None = None) -> GlobalKTable:
        """A GlobalKTable of ``topic``: every task that joins it keeps the whole table (all of
        ``topic``'s partitions, whatever its partition count), updated before the task's own
        records of each micro-batch (docs/semantics.md §9.3). Its store keeps no changelog.
        ``name`` names its nodes as in :meth:`table`."""
        m = as_materialized(materialized)
        store = store_name_for(self, m, f"{topic}-")
        source, name = self._table_source_names(name)
        self._topology.add_global_store(
            key_value_store_builder(store, m), source, topic, name,
            partial(TableSourceProcessor, store, OldValues(), OldValues(True)),
            key_serde, value_serde, timestamp_extractor)
        return GlobalKTableImpl(store, _named(m))

    def _table_source_names(self, name: str | None) -> tuple[str, str]:
        """A table's source node and table node: ``<name>-source`` and ``name``, or generated
        (the indexes are taken either way, as Kafka Streams takes them)."""
        source = self.new_name("KSTREAM-SOURCE-")
        node = self.new_name("KTABLE-SOURCE-")
        if name is None:
            return source, node
        if not isinstance(name, str) or not name:
            raise ValueError(f"a table's name must be a non-empty string, got {name!r}")
        return f"{name}-source", name

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

    def add_global_store(self, store_builder: StoreBuilder, topic: str, processor_supplier: Any,
                         key_serde: Any = None, value_serde: Any = None,
                         timestamp_extractor: Callable[[Any, int], int] | None = None,
                         name: str | None = None) -> StreamsBuilder:
        """A global store (Kafka Streams' ``StreamsBuilder.addGlobalStore``): the processor
        ``processor_supplier()`` makes gets every record of ``topic`` (all its partitions) and
        writes the store, which any processor can read by connecting it by name. Nodes
        ``<name>-source`` and ``<name>`` (``Consumed.as``), else generated; no changelog."""
        generated_source = self.new_name("KSTREAM-SOURCE-")
        generated = self.new_name("KTABLE-SOURCE-")
        self._topology.add_global_store(
            store_builder, f"{name}-source" if name else generated_source, topic,
            name or generated, processor_supplier, key_serde, value_serde, timestamp_extractor)
        return self

    def build(self) -> Topology:
        """The topology of everything built so far (its repartitions' null-key filters
        settled: :meth:`settle_null_keys`)."""
        self.settle_null_keys()
        return self._topology

    # -- how the DSL classes make each other -------------------------------------------------
    def new_kstream(self, node: str, key_serde: Serde | None = None,
                    value_serde: Serde | None = None, repartition_required: bool = False
                    ) -> KStream:
        return KStreamImpl(self, node, key_serde, value_serde, repartition_required)

    def new_ktable(self, node: str, view: TableView, *, queryable_store: str | None = None,
                   key_serde: Serde | None = None, value_serde: Serde | None = None,
                   suppress_duration_ms: int | None = None) -> KTable:
        return KTableImpl(self, node, view, queryable_store=queryable_store,
                          key_serde=key_serde, value_serde=value_serde,
                          suppress_duration_ms=suppress_duration_ms)

    def new_grouped_stream(self, node: str, repartition_required: bool,
                           key_serde: Serde | None, value_serde: Serde | None,
                           result_key_serde: Serde | None,
                           repartition_name: str | None = None) -> KGroupedStream:
        return KGroupedStreamImpl(self, node, repartition_required, key_serde, value_serde,
                                  result_key_serde, repartition_name)

    def new_grouped_table(self, node: str, key_serde: Serde | None,
                          value_serde: Serde | None,
                          repartition_name: str | None = None) -> KGroupedTable:
        return KGroupedTableImpl(self, node, key_serde, value_serde, repartition_name)

    def stream_table_join(self, stream: KStream, table: KTable | GlobalKTable, kind: str,
                          args: tuple[Any, ...], kwargs: dict[str, Any]) -> KStream:
        assert isinstance(stream, KStreamImpl)
        side = stream.side
        if isinstance(table, GlobalKTableImpl):
            key_selector, joiner, name = arguments(
                f"{kind} join with a global table", args, kwargs,
                ("key_selector", "joiner", "name"), required=2)
            node = joins.stream_table_join(self, side, table.getter(), None, joiner, kind,
                                           Joined(name=name), key_selector=key_selector)
            return KStreamImpl(self, node, side.key_serde, None, side.repartition_required)
        if not isinstance(table, KTableImpl) or table.graph is not self:
            raise ValueError("a join needs a KTable of the same StreamsBuilder")
        joiner, joined = arguments(f"{kind} join with a table", args, kwargs,
                                   ("joiner", "joined"), required=1)
        node = joins.stream_table_join(self, side, table.view.getter(), table.node_name, joiner,
                                       kind, joined, versioned=table.view.versioned)
        key_serde = (joined.key_serde if isinstance(joined, Joined) and joined.key_serde
                     else side.key_serde)
        return KStreamImpl(self, node, optional_serde(key_serde), None, False)

    def foreign_key_join(self, table: KTable, other: KTable,
                         foreign_key_extractor: Callable[[Any], Any],
                         joiner: Callable[[Any, Any], Any], kind: str,
                         materialized: Materialized | None, name: str | None = None) -> KTable:
        assert isinstance(table, KTableImpl) and isinstance(other, KTableImpl)
        tables = joins.ForeignKeyTables(
            joins.TableSide(table.node_name, table.view),
            joins.TableSide(other.node_name, other.view),
            table.key_serde, table.value_serde, other.key_serde, other.value_serde)
        node, view = joins.foreign_key_join(self, tables, foreign_key_extractor, joiner, kind,
                                            materialized, name)
        value_serde = None if materialized is None else optional_serde(materialized.value_serde)
        return KTableImpl(self, node, view,
                          queryable_store=materialized.name if materialized else None,
                          key_serde=table.key_serde, value_serde=value_serde)

    def new_session_windowed(self, grouping: Grouping,
                             windows: SessionWindows) -> SessionWindowedKStream:
        return SessionWindowedKStreamImpl(grouping, windows)

    def new_time_windowed(self, grouping: Grouping,
                          windows: TimeWindows | SlidingWindows) -> TimeWindowedKStream:
        return TimeWindowedKStreamImpl(grouping, windows)
