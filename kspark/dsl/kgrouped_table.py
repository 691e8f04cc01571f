"""KGroupedTable: a re-grouped table, aggregated with an adder and a subtractor."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from kspark.dsl.graph import key_value_store_builder, store_name_for
from kspark.dsl.internal_serde import ChangeSerde
from kspark.dsl.ktable import KTable
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.dsl.processors import TableAggregateProcessor
from kspark.serdes import Serde

if TYPE_CHECKING:
    from kspark.dsl.builder import StreamsBuilder



class KGroupedTable:
    """The rows of a table re-keyed by ``KTable.group_by``. Every aggregation reads the
    re-keyed changes from the repartition topic ``<store name>-repartition``; each upstream
    update first subtracts the old value, then adds the new one (docs/semantics.md §4)."""

    def __init__(self, builder: StreamsBuilder, node: str, key_serde: Serde | None,
                 value_serde: Serde | None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde

    @property
    def node_name(self) -> str:
        """Name of the topology node whose records this grouping aggregates."""
        return self._node

    def _aggregate(self, prefix: str, initializer: Callable[[], Any],
                   adder: Callable[[Any, Any, Any], Any],
                   subtractor: Callable[[Any, Any, Any], Any],
                   materialized: Materialized | str | None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        store = store_name_for(builder, m, prefix)
        value_serde = None if self._value_serde is None else ChangeSerde(self._value_serde)
        source = builder.repartition(self._node, store, self._key_serde, value_serde,
                                     drop_null_keys=False)
        name = builder.new_name(prefix)
        topo = builder.topology
        topo.add_processor(
            name, partial(TableAggregateProcessor, store, initializer, adder, subtractor), source)
        topo.add_state_store(key_value_store_builder(store, m), name)
        return KTable(builder, name, store_name=store, queryable=m is not None and bool(m.name),
                      key_serde=self._key_serde,
                      value_serde=None if m is None else m.value_serde)

    def count(self, materialized: Materialized | str | None = None) -> KTable:
        """The number of rows per group key."""
        return self._aggregate("KTABLE-AGGREGATE-", _zero, _increment, _decrement, materialized)

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None) -> KTable:
        """Per group key: the first value as is, then ``adder(agg, value)`` for each added
        row and ``subtractor(agg, value)`` for each removed one."""
        r = _Reducing(adder, subtractor)
        return self._aggregate("KTABLE-REDUCE-", _none, r.add, r.subtract, materialized)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None) -> KTable:
        """Per group key: ``subtractor(key, old_value, agg)`` for each removed row, then
        ``adder(key, new_value, agg)`` for each added one, from ``initializer()`` when
        nothing is stored for the key."""
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
