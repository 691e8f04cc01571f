"""The implementation of :class:`~kspark.dsl.api.KGroupedTable`: aggregation with an adder
and a subtractor."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from kspark.dsl.api import KGroupedTable, KTable
from kspark.dsl.internals.graph import DslGraph, key_value_store_builder, store_name_for
from kspark.dsl.internals.internal_serde import ChangeSerde
from kspark.dsl.internals.processors import TableAggregateProcessor
from kspark.dsl.internals.table_views import OldValues, StoreView
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.serdes import Serde


class KGroupedTableImpl(KGroupedTable):
    """A re-grouped table: the node of its re-keyed changes and the repartition serdes."""

    def __init__(self, builder: DslGraph, node: str, key_serde: Serde | None,
                 value_serde: Serde | None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde

    @property
    def node_name(self) -> str:
        return self._node

    def _aggregate(self, prefix: str, initializer: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any],
                   subtractor: Callable[[Any, Any, Any], Any],
                   materialized: Materialized | str | None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        # a generated store name is KTABLE-AGGREGATE-STATE-STORE-... for reduce too (Kafka
        # Streams' KGroupedTableImpl#reduce names it with its AGGREGATE_NAME)
        store = store_name_for(builder, m, "KTABLE-AGGREGATE-")
        value_serde = None if self._value_serde is None else ChangeSerde(self._value_serde)
        source = builder.repartition(self._node, store, self._key_serde, value_serde,
                                     null_key_filter=False, stream_names=False)
        name = builder.new_name(prefix)
        topo = builder.topology
        old = OldValues()
        topo.add_processor(
            name, partial(TableAggregateProcessor, store, initializer, adder, subtractor, old),
            source)
        topo.add_state_store(key_value_store_builder(store, m), name)
        return builder.new_ktable(name, StoreView(old, store),
                                  queryable_store=store if m is not None and m.name else None,
                                  key_serde=self._key_serde,
                      value_serde=None if m is None else m.value_serde)

    def count(self, materialized: Materialized | str | None = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE-", _zero, _increment, _decrement, materialized)

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None) -> KTable:
        r = _Reducing(adder, subtractor)
        return self._aggregate("KTABLE-REDUCE-", _none, r.add, r.subtract, materialized)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE-", initializer, adder, subtractor, materialized)


class _Reducing:
    def __init__(self, adder: Callable[[Any, Any], Any],
                 subtractor: Callable[[Any, Any], Any]) -> None:
        self.adder, self.subtractor = adder, subtractor

    def add(self, key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else self.adder(agg, value)

    def subtract(self, key: Any, value: Any, agg: Any) -> Any:
        return self.subtractor(agg, value)


def _none() -> None:
    return None


def _zero() -> int:
    return 0


def _increment(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _decrement(key: Any, value: Any, agg: int) -> int:
    return agg - 1
