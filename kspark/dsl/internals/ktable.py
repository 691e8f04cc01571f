"""The implementation of :class:`~kspark.dsl.api.KTable`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from kspark.dsl.api import KGroupedTable, KStream, KTable
from kspark.dsl.internals import processors as p
from kspark.dsl.internals.graph import (
    DslGraph,
    key_value_store_builder,
    optional_serde,
    store_name_for,
)
from kspark.dsl.internals.suppress import SuppressProcessor, suppress_store_builder
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.dsl.suppressed import Suppressed
from kspark.errors import TopologyError
from kspark.serdes import Serde


class KTableImpl(KTable):
    """A table: its node in the graph, its store (if materialized) and known serdes."""

    def __init__(self, builder: DslGraph, node: str, *, store_name: str | None = None,
                 queryable: bool = False, key_serde: Serde | None = None,
                 value_serde: Serde | None = None,
                 suppress_duration_ms: int | None = None) -> None:
        self._builder = builder
        self._node = node
        self._store_name = store_name
        self._queryable = queryable
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
        return self._store_name if self._queryable else None

    def _derive(self, node: str, *, store_name: str | None = None, queryable: bool = False,
                value_serde: Serde | None = None) -> KTable:
        return KTableImpl(self._builder, node, store_name=store_name, queryable=queryable,
                      key_serde=self._key_serde, value_serde=value_serde,
                      suppress_duration_ms=self._suppress_duration_ms)

    def _value_op(self, prefix: str, make: Callable[[str | None], Any],
                  materialized: Materialized | str | None, keep_value_serde: bool) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        store = None if m is None else store_name_for(builder, m, prefix)
        name = builder.new_name(prefix)
        topo = builder.topology
        topo.add_processor(name, make(store), self._node)
        if store is not None:
            topo.add_state_store(key_value_store_builder(store, m), name)
        value_serde = self._value_serde if keep_value_serde else None
        if m is not None and m.value_serde is not None:
            value_serde = optional_serde(m.value_serde)
        return self._derive(name, store_name=store, queryable=m is not None and bool(m.name),
                            value_serde=value_serde)

    def filter(self, predicate: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None) -> KTable:
        return self._value_op(
            "KTABLE-FILTER-",
            lambda store: partial(p.TableFilterProcessor, predicate, False, store),
            materialized, True)

    def filter_not(self, predicate: Callable[[Any, Any], Any],
                   materialized: Materialized | str | None = None) -> KTable:
        return self._value_op(
            "KTABLE-FILTER-",
            lambda store: partial(p.TableFilterProcessor, predicate, True, store),
            materialized, True)

    def map_values(self, mapper: Callable[[Any], Any],
                   materialized: Materialized | str | None = None) -> KTable:
        return self._value_op(
            "KTABLE-MAPVALUES-",
            lambda store: partial(p.TableMapValuesProcessor, mapper, store),
            materialized, False)

    def to_stream(self) -> KStream:
        name = self._builder.new_name("KTABLE-TOSTREAM-")
        self._builder.topology.add_processor(name, p.TableToStreamProcessor, self._node)
        return self._builder.new_kstream(name, self._key_serde, self._value_serde, False)

    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any]], key_serde: Any = None,
                 value_serde: Any = None) -> KGroupedTable:
        name = self._builder.new_name("KTABLE-SELECT-")
        self._builder.topology.add_processor(
            name, partial(p.TableRepartitionMapProcessor, selector), self._node)
        return self._builder.new_grouped_table(name, optional_serde(key_serde),
                                               optional_serde(value_serde))

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
        return self._derive(name, value_serde=self._value_serde)
