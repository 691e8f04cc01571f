"""KGroupedStream: a stream grouped by key, ready for (windowed) aggregation."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, overload

from kspark.dsl.aggregations import Aggregate, Aggregation, Count, Reduce
from kspark.dsl.graph import key_value_store_builder, store_name_for
from kspark.dsl.ktable import KTable
from kspark.dsl.materialized import Materialized, as_materialized
from kspark.dsl.processors import StreamAggregateProcessor
from kspark.dsl.windowed_kstream import SessionWindowedKStream, TimeWindowedKStream
from kspark.serdes import Serde
from kspark.windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from kspark.dsl.builder import StreamsBuilder



class KGroupedStream:
    """Records grouped by key. Aggregations read re-keyed records back from a repartition
    topic ``<store name>-repartition`` (serialized with the grouping's serdes, else
    :class:`~kspark.dsl.internal_serde.Pickle`)."""

    def __init__(self, builder: StreamsBuilder, node: str, repartition_required: bool,
                 key_serde: Serde | None, value_serde: Serde | None,
                 result_key_serde: Serde | None = None) -> None:
        self._builder = builder
        self._node = node
        self._repartition_required = repartition_required
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._result_key_serde = result_key_serde

    @property
    def node_name(self) -> str:
        """Name of the topology node whose records this grouping aggregates."""
        return self._node

    def _source_for(self, store_name: str) -> str:
        """The node the aggregation reads from: this node, or a repartition topic's source."""
        if not self._repartition_required:
            return self._node
        return self._builder.repartition(self._node, store_name, self._key_serde,
                                         self._value_serde)

    def _aggregate(self, prefix: str, aggregation: Aggregation,
                   materialized: Materialized | str | None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        store = store_name_for(builder, m, prefix)
        name = builder.new_name(prefix)
        parent = self._source_for(store)
        topo = builder.topology
        topo.add_processor(name, partial(StreamAggregateProcessor, store, aggregation),
                           parent)
        topo.add_state_store(key_value_store_builder(store, m), name)
        return KTable(builder, name, store_name=store, queryable=m is not None and bool(m.name),
                      key_serde=self._result_key_serde,
                      value_serde=None if m is None else m.value_serde)

    def count(self, materialized: Materialized | str | None = None) -> KTable:
        """The number of records per key (null keys and values are dropped and counted)."""
        return self._aggregate("KSTREAM-AGGREGATE-", Count(), materialized)

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None) -> KTable:
        """Per key: the first value, then ``reducer(agg, value)`` for each next value."""
        return self._aggregate("KSTREAM-REDUCE-", Reduce(reducer), materialized)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None) -> KTable:
        """Per key: ``aggregator(key, value, agg)`` starting from ``initializer()``."""
        return self._aggregate("KSTREAM-AGGREGATE-", Aggregate(initializer, aggregator),
                               materialized)

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows) -> TimeWindowedKStream: ...

    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedKStream | TimeWindowedKStream:
        """Aggregate per key and window: session windows give a
        :class:`SessionWindowedKStream`, time and sliding windows a
        :class:`TimeWindowedKStream`."""
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        if isinstance(windows, TimeWindows | SlidingWindows):
            return TimeWindowedKStream(self, windows)
        raise TypeError(
            f"windowed_by needs SessionWindows, TimeWindows or SlidingWindows, got {windows!r}"
        )

