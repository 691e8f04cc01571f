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
                 value_serde: Serde | None, repartition_name: str | None = None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        #: the grouping's name (``<name>-repartition``) and that topic's source once made:
        #: every aggregation of this grouping reads that one topic, as in Kafka Streams
        self._repartition_name = repartition_name
        self._named_source: str | None = None

    @property
    def node_name(self) -> str:
        return self._node

    def _aggregate(self, prefix: str, initializer: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any],
                   subtractor: Callable[[Any, Any, Any], Any],
                   materialized: Materialized | str | None, name: str | None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        # a reduce's store is named as an aggregate's, as Kafka Streams names it
        store = store_name_for(builder, m, "KTABLE-AGGREGATE-")
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"an aggregation's name must be a non-empty string, got {name!r}")
        source = self._source(store, name)
        generated = builder.new_name(prefix)  # taken with a name too, as Kafka Streams does
        name = name or generated
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

    def _source(self, store: str, name: str | None) -> str:
        """The repartition topic's source the aggregation reads: ``<store>-repartition``, or
        the grouping's named topic, made once (its nodes' indexes are taken again)."""
        builder = self._builder
        value_serde = None if self._value_serde is None else ChangeSerde(self._value_serde)
        if self._repartition_name is not None and self._named_source is not None:
            builder.new_name("KSTREAM-SINK-")
            builder.new_name("KSTREAM-SOURCE-")
            return self._named_source
        source = builder.repartition(self._node, self._repartition_name or store,
                                     self._key_serde, value_serde, null_key_filter=False,
                                     stream_names=False, named=name)
        if self._repartition_name is not None:
            self._named_source = source
        return source

    def count(self, materialized: Materialized | str | None = None,
              name: str | None = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE-", _zero, _increment, _decrement, materialized,
                               name)

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, name: str | None = None
               ) -> KTable:
        r = _Reducing(adder, subtractor)
        return self._aggregate("KTABLE-REDUCE-", _none, r.add, r.subtract, materialized, name)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE-", initializer, adder, subtractor, materialized,
                               name)


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
