"""The implementation of :class:`~kspark.dsl.api.KGroupedStream`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, overload

from kspark.dsl.api import (
    CogroupedKStream,
    KGroupedStream,
    KTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from kspark.dsl.internals.aggregations import Aggregate, Aggregation, Count, Reduce
from kspark.dsl.internals.cogroup import CogroupedKStreamImpl
from kspark.dsl.internals.graph import DslGraph, key_value_store_builder, store_name_for
from kspark.dsl.internals.processors import StreamAggregateProcessor
from kspark.dsl.internals.table_views import OldValues, StoreView
from kspark.dsl.materialized import Materialized, as_materialized, with_default_serdes
from kspark.serdes import Serde
from kspark.windows import SessionWindows, SlidingWindows, TimeWindows


class KGroupedStreamImpl(KGroupedStream):
    """A grouped stream: its node, whether it must repartition, and its serdes (the
    repartition topic's, else :class:`~kspark.dsl.internals.internal_serde.Pickle`)."""

    def __init__(self, builder: DslGraph, node: str, repartition_required: bool,
                 key_serde: Serde | None, value_serde: Serde | None,
                 result_key_serde: Serde | None = None,
                 repartition_name: str | None = None) -> None:
        self._builder = builder
        self._node = node
        self._repartition_required = repartition_required
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._result_key_serde = result_key_serde
        #: the repartition topic's name the user gave (``<name>-repartition``), and its source
        #: once made: every aggregation of this grouping reads that one topic
        self._repartition_name = repartition_name
        self._named_source: str | None = None

    @property
    def node_name(self) -> str:
        return self._node

    @property
    def graph(self) -> DslGraph:
        return self._builder

    @property
    def result_key_serde(self) -> Serde | None:
        return self._result_key_serde

    @property
    def value_serde(self) -> Serde | None:
        return self._value_serde

    def source_for(self, store_name: str) -> str:
        """The node the aggregation reads from: this node, or a repartition topic's source
        (``<store name>-repartition``, or the topic the user named, made once)."""
        if not self._repartition_required:
            return self._node
        if self._repartition_name is None:
            return self._builder.repartition(self._node, store_name, self._key_serde,
                                             self._value_serde)
        if self._named_source is None:
            self._named_source = self._builder.repartition(
                self._node, self._repartition_name, self._key_serde, self._value_serde)
        else:  # reused: the indexes of its nodes are taken again, as in Kafka Streams
            for prefix in ("KSTREAM-SINK-", "KSTREAM-FILTER-", "KSTREAM-SOURCE-"):
                self._builder.new_name(prefix)
        return self._named_source

    def _aggregate(self, prefix: str, aggregation: Aggregation,
                   materialized: Materialized | str | None, name: str | None = None) -> KTable:
        builder = self._builder
        m = as_materialized(materialized)
        store = store_name_for(builder, m, prefix)
        generated = builder.new_name(prefix)  # taken with a name too, as Kafka Streams does
        name = name or generated
        parent = self.source_for(store)
        topo = builder.topology
        old = OldValues()
        topo.add_processor(name, partial(StreamAggregateProcessor, store, aggregation, old),
                           parent)
        store_m = with_default_serdes(m, self._result_key_serde,
                                      aggregation.store_value_serde(self._value_serde))
        topo.add_state_store(key_value_store_builder(store, store_m), name)
        return builder.new_ktable(name, StoreView(old, store),
                                  queryable_store=store if m is not None and m.name else None,
                                  key_serde=self._result_key_serde,
                      value_serde=None if m is None else m.value_serde)

    def count(self, materialized: Materialized | str | None = None,
              name: str | None = None) -> KTable:
        m = as_materialized(materialized)
        if m is not None and not m.name:
            # Kafka Streams' count(Materialized) takes one more store index than count()
            self._builder.new_store_name("KSTREAM-AGGREGATE-")
        return self._aggregate("KSTREAM-AGGREGATE-", Count(), m, name)

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None, name: str | None = None) -> KTable:
        return self._aggregate("KSTREAM-REDUCE-", Reduce(reducer), materialized, name)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        return self._aggregate("KSTREAM-AGGREGATE-", Aggregate(initializer, aggregator),
                               materialized, name)

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]
                ) -> CogroupedKStream[KTable, KGroupedStream]:
        return CogroupedKStreamImpl(self._builder).cogroup(self, aggregator)

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream[KTable]: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows
                    ) -> TimeWindowedKStream[KTable]: ...

    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedKStream[KTable] | TimeWindowedKStream[KTable]:
        if isinstance(windows, SessionWindows):
            return self._builder.new_session_windowed(self, windows)
        if isinstance(windows, TimeWindows | SlidingWindows):
            return self._builder.new_time_windowed(self, windows)
        raise TypeError(
            f"windowed_by needs SessionWindows, TimeWindows or SlidingWindows, got {windows!r}"
        )

