"""The implementation of :class:`~kspark.dsl.api.KTable`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from kspark.dsl.api import KGroupedTable, KStream, KTable
from kspark.dsl.internals import processors as p
from kspark.dsl.internals.graph import (
    DslGraph,
    _named,
    key_value_store_builder,
    optional_serde,
    store_name_for,
)
from kspark.dsl.internals.joins import builders as joins
from kspark.dsl.internals.suppress import SuppressProcessor, suppress_store_builder
from kspark.dsl.internals.table_transform import transform_values, value_serde_of
from kspark.dsl.internals.table_views import (
    DerivedView,
    OldValues,
    StoreView,
    SuppressedView,
    TableView,
)
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.dsl.suppressed import Suppressed
from kspark.errors import TopologyError
from kspark.serdes import Serde


class KTableImpl(KTable):
    """A table: its node in the graph, what the node offers downstream (its
    :class:`~kspark.dsl.internals.table_views.TableView`: lookups, old values), its queryable
    store (if the user named one) and its known serdes."""

    def __init__(self, builder: DslGraph, node: str, view: TableView, *,
                 queryable_store: str | None = None, key_serde: Serde | None = None,
                 value_serde: Serde | None = None,
                 suppress_duration_ms: int | None = None) -> None:
        self._builder = builder
        self._node = node
        self.view = view
        self._queryable_store = queryable_store
        self._key_serde = key_serde
        self._value_serde = value_serde
        #: for windowed tables: how long after a window's end its result may still change
        #: (time/sliding windows: grace; sessions: gap + grace); None for non-windowed tables
        self._suppress_duration_ms = suppress_duration_ms

    @property
    def node_name(self) -> str:
        return self._node

    @property
    def queryable_store_name(self) -> str | None:
        return self._queryable_store

    @property
    def graph(self) -> DslGraph:
        return self._builder

    @property
    def key_serde(self) -> Serde | None:
        return self._key_serde

    @property
    def value_serde(self) -> Serde | None:
        return self._value_serde

    def _derive(self, node: str, view: TableView, *, queryable_store: str | None = None,
                value_serde: Serde | None = None) -> KTable:
        return KTableImpl(self._builder, node, view, queryable_store=queryable_store,
                          key_serde=self._key_serde, value_serde=value_serde,
                          suppress_duration_ms=self._suppress_duration_ms)

    def _value_op(self, prefix: str, compute: Callable[[Any, Any], Any],
                  materialized: Materialized | str | None, keep_value_serde: bool,
                  old: OldValues, node_name: str | None = None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        store = None if m is None else store_name_for(builder, m, prefix)
        if not _named(m):
            # as Kafka Streams: a Materialized without a store name takes a store index but
            # keeps no store
            store = None
        name = builder.new_name(prefix)  # taken with a node name too, as Kafka Streams does
        name = node_name or name
        topo = builder.topology
        topo.add_processor(name, partial(p.TableValueProcessor, compute, old, store), self._node)
        view: TableView
        if store is not None:
            topo.add_state_store(key_value_store_builder(store, m), name)
            view = StoreView(old, store)
        else:
            view = DerivedView(old, self.view, compute)
        value_serde = self._value_serde if keep_value_serde else None
        if m is not None and m.value_serde is not None:
            value_serde = optional_serde(m.value_serde)
        return self._derive(name, view, queryable_store=store if _named(m) else None,
                            value_serde=value_serde)

    def _filter(self, predicate: Callable[[Any, Any], Any], negate: bool,
                materialized: Materialized | str | None, name: str | None) -> KTable:
        # a filter sends old values whenever its parent can without materializing (so that it
        # need not forward deletes of rows that were already absent), as Kafka Streams' does
        old = OldValues(self.view.enable_sending_old_values(False))
        return self._value_op("KTABLE-FILTER-", p.FilterValue(predicate, negate), materialized,
                              True, old, name)

    def filter(self, predicate: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, name: str | None = None) -> KTable:
        return self._filter(predicate, False, materialized, name)

    def filter_not(self, predicate: Callable[[Any, Any], Any],
                   materialized: Materialized | str | None = None,
                   name: str | None = None) -> KTable:
        return self._filter(predicate, True, materialized, name)

    def map_values(self, mapper: Callable[[Any], Any],
                   materialized: Materialized | str | None = None,
                   name: str | None = None) -> KTable:
        return self._value_op("KTABLE-MAPVALUES-", p.MapValue(mapper), materialized, False,
                              OldValues(), name)

    def transform_values(self, transformer_supplier: Any, *store_names: str,
                         materialized: Materialized | str | None = None,
                         name: str | None = None) -> KTable:
        m = as_materialized(materialized)
        node, view, store = transform_values(self._builder, self._node, self.view,
                                             transformer_supplier, store_names, m, name)
        return self._derive(node, view, queryable_store=store, value_serde=value_serde_of(m))

    def to_stream(self, mapper: Callable[[Any, Any], Any] | None = None,
                  name: str | None = None) -> KStream:
        generated = self._builder.new_name("KTABLE-TOSTREAM-")
        name = name or generated
        self._builder.topology.add_processor(name, p.TableToStreamProcessor, self._node)
        stream = self._builder.new_kstream(name, self._key_serde, self._value_serde, False)
        return stream if mapper is None else stream.select_key(mapper)

    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any]], key_serde: Any = None,
                 value_serde: Any = None, name: str | None = None) -> KGroupedTable:
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"a grouping's name must be a non-empty string, got {name!r}")
        generated = self._builder.new_name("KTABLE-SELECT-")
        repartition_name, name = name, name or generated
        self.view.enable_sending_old_values(True)  # the re-grouping subtracts old values
        self._builder.topology.add_processor(
            name, partial(p.TableRepartitionMapProcessor, selector), self._node)
        return self._builder.new_grouped_table(name, optional_serde(key_serde),
                                               optional_serde(value_serde), repartition_name)

    # -- joins -------------------------------------------------------------------------------
    def _join(self, kind: str, other: KTable, joiner: Callable[[Any, Any], Any],
              materialized: Materialized | str | None,
              foreign_key_extractor: Callable[[Any], Any] | None, name: str | None) -> KTable:
        if not isinstance(other, KTableImpl) or other._builder is not self._builder:
            raise TypeError(f"a table join needs a KTable of the same StreamsBuilder, "
                            f"got {other!r}")
        m = as_materialized(materialized)
        if foreign_key_extractor is not None:
            return self._builder.foreign_key_join(self, other, foreign_key_extractor, joiner,
                                                  kind, m, name)
        node, view, store = joins.table_table_join(
            self._builder, joins.TableSide(self._node, self.view),
            joins.TableSide(other._node, other.view), joiner, kind, m, name)
        value_serde = optional_serde(m.value_serde) if m is not None else None
        return KTableImpl(self._builder, node, view,
                          queryable_store=store if _named(m) else None,
                          key_serde=self._key_serde, value_serde=value_serde)

    def join(self, other: KTable, joiner: Callable[[Any, Any], Any],
             materialized: Materialized | str | None = None, *,
             foreign_key_extractor: Callable[[Any], Any] | None = None,
             name: str | None = None) -> KTable:
        return self._join("inner", other, joiner, materialized, foreign_key_extractor, name)

    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                  materialized: Materialized | str | None = None, *,
                  foreign_key_extractor: Callable[[Any], Any] | None = None,
                  name: str | None = None) -> KTable:
        return self._join("left", other, joiner, materialized, foreign_key_extractor, name)

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                   materialized: Materialized | str | None = None, *,
                   name: str | None = None) -> KTable:
        return self._join("outer", other, joiner, materialized, None, name)

    def suppress(self, suppressed: Suppressed) -> KTable:
        if not isinstance(suppressed, Suppressed):
            raise TypeError(f"suppress needs a Suppressed, got {suppressed!r}")
        # until_window_closes waits for the windows' grace (sessions: gap + grace); a time
        # limit suppression uses its own limit (None)
        duration = self._suppress_duration_ms if suppressed.until_window_close else None
        if duration is None and suppressed.until_window_close:
            raise TopologyError(
                "suppress(Suppressed.until_window_closes(...)) needs a windowed KTable (the "
                "result of a windowed aggregation); this table is not windowed. Use "
                "Suppressed.until_time_limit for other tables"
            )
        builder = self._builder
        name = suppressed.name or builder.new_name("KTABLE-SUPPRESS-")
        store = (f"{suppressed.name}-store" if suppressed.name
                 else builder.new_store_name("KTABLE-SUPPRESS-"))
        topo = builder.topology
        topo.add_processor(name, partial(SuppressProcessor, suppressed, store, duration,
                                         key_serde=self._key_serde), self._node)
        topo.add_state_store(suppress_store_builder(store), name)
        self.view.enable_sending_old_values(True)  # the buffer keeps each key's prior value
        return self._derive(name, SuppressedView(self.view), value_serde=self._value_serde)
