"""``KGroupedStream.cogroup`` (Kafka Streams' KIP-150): one aggregate fed by several grouped
streams, each with an aggregator of its own, kept in one store.

As Kafka Streams builds it: the store (``COGROUPKSTREAM-AGGREGATE-STATE-STORE-<index>``
unless named), then each grouped stream that must repartition does so through
``<store>-repartition``, then one aggregate processor per grouped stream
(``COGROUPKSTREAM-AGGREGATE-<index>``, all connected to the store), then the table's node, a
pass-through that merges their changes (``COGROUPKSTREAM-MERGE-<index>``). The grouped
streams must be co-partitioned.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, overload

from kspark.dsl.api import (
    CogroupedKStream,
    KGroupedStream,
    KTable,
    SessionWindowedCogroupedKStream,
    TimeWindowedCogroupedKStream,
)
from kspark.dsl.internals import stateless
from kspark.dsl.internals.aggregations import Aggregate
from kspark.dsl.internals.graph import DslGraph, Grouping, key_value_store_builder, store_name_for
from kspark.dsl.internals.processors import StreamAggregateProcessor
from kspark.dsl.internals.table_views import OldValues, StoreView, WindowedGetterSupplier
from kspark.dsl.internals.windowing.kinds import (
    SessionWindowAggregateProcessor,
    session_store_builder,
    timed,
)
from kspark.dsl.materialized import Materialized, as_materialized, with_default_serdes
from kspark.serdes import Serde, SessionWindowed, TimeWindowed
from kspark.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows

AGGREGATE = "COGROUPKSTREAM-AGGREGATE-"
MERGE = "COGROUPKSTREAM-MERGE-"


class CogroupedKStreamImpl(CogroupedKStream[KTable, KGroupedStream]):
    """The grouped streams of a cogroup and their aggregators, in the order they were added."""

    def __init__(self, builder: DslGraph) -> None:
        self._builder = builder
        self._groups: Groups = []

    def cogroup(self, grouped: KGroupedStream,
                aggregator: Callable[[Any, Any, Any], Any]
                ) -> CogroupedKStream[KTable, KGroupedStream]:
        if not callable(aggregator):
            raise TypeError(f"cogroup needs an aggregator(key, value, agg), got {aggregator!r}")
        if not isinstance(grouped, KGroupedStream) or not isinstance(grouped, Grouping) \
                or grouped.graph is not self._builder:
            raise ValueError("cogroup needs a KGroupedStream of the same StreamsBuilder")
        if any(g is grouped for g, _ in self._groups):
            raise ValueError(f"grouped stream {grouped.node_name!r} is cogrouped already")
        self._groups.append((grouped, aggregator))
        return self

    def aggregate(self, initializer: Callable[[], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        old = OldValues()
        return _build(self._groups, initializer, None, materialized, name,
                      lambda store, aggregation: partial(StreamAggregateProcessor, store,
                                                         aggregation, old),
                      lambda store, m: key_value_store_builder(store, m),
                      lambda store: StoreView(old, store), None,
                      self._groups[0][0].result_key_serde)

    @overload
    def windowed_by(self, windows: SessionWindows
                    ) -> SessionWindowedCogroupedKStream[KTable]: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows
                    ) -> TimeWindowedCogroupedKStream[KTable]: ...

    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedCogroupedKStream[KTable] | TimeWindowedCogroupedKStream[KTable]:
        if isinstance(windows, SessionWindows):
            return SessionWindowedCogroupedImpl(self._groups, windows)
        if isinstance(windows, TimeWindows | SlidingWindows):
            return TimeWindowedCogroupedImpl(self._groups, windows)
        raise TypeError(
            f"windowed_by needs SessionWindows, TimeWindows or SlidingWindows, got {windows!r}")


Groups = list[tuple[Grouping, Callable[[Any, Any, Any], Any]]]


def _build(groups: Groups, initializer: Callable[[], Any],
           merger: Callable[[Any, Any, Any], Any] | None,
           materialized: Materialized | str | None, node_name: str | None,
           make_processor: Callable[[str, Aggregate], Any],
           make_store: Callable[[str, Materialized | None], Any],
           make_view: Callable[[str], Any], suppress_duration_ms: int | None,
           key_serde: Serde | None) -> KTable:
    """The cogroup's store, repartitions, aggregate processors (one per grouped stream, each
    from ``make_processor(store, its aggregation)``) and merge node, named
    ``<node_name>-cogroup-agg-<i>`` and ``<node_name>-cogroup-merge`` if given; its table."""
    if not callable(initializer):
        raise TypeError(f"aggregate needs an initializer(), got {initializer!r}")
    if node_name is not None and (not isinstance(node_name, str) or not node_name):
        raise ValueError(f"an aggregation's name must be a non-empty string, got {node_name!r}")
    first = groups[0][0]
    builder = first.graph
    topo = builder.topology
    m = as_materialized(materialized)
    store = store_name_for(builder, m, AGGREGATE)
    store_builder = make_store(store, with_default_serdes(m, first.result_key_serde, None))
    parents = [grouped.source_for(store) for grouped, _ in groups]
    names = []
    for i, ((_, aggregator), parent) in enumerate(zip(groups, parents)):
        name = builder.new_name(AGGREGATE)  # taken with a name too, as Kafka Streams does
        if node_name is not None:
            name = f"{node_name}-cogroup-agg-{i}"
        topo.add_processor(name, make_processor(store, Aggregate(initializer, aggregator, merger)),
                           parent)
        names.append(name)
    topo.add_state_store(store_builder, *names)
    if len(names) > 1:
        topo.copartition(*names)
    merge = builder.new_name(MERGE)
    if node_name is not None:
        merge = f"{node_name}-cogroup-merge"
    topo.add_processor(merge, stateless.PassThroughProcessor, *names)
    return builder.new_ktable(merge, make_view(store),
                              queryable_store=store if m is not None and m.name else None,
                              key_serde=key_serde,
                              value_serde=None if m is None else m.value_serde,
                              suppress_duration_ms=suppress_duration_ms)


def _windowed_key_serde(groups: Groups, wrap: Callable[[Serde], Serde]) -> Serde | None:
    inner = groups[0][0].result_key_serde
    return None if inner is None else wrap(inner)


class TimeWindowedCogroupedImpl(TimeWindowedCogroupedKStream[KTable]):
    """A cogroup per time or sliding window: the processors and store of a windowed
    aggregation, one processor per grouped stream (results on every update)."""

    def __init__(self, groups: Groups, windows: TimeWindows | SlidingWindows) -> None:
        self._groups, self._windows = groups, windows

    def aggregate(self, initializer: Callable[[], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        w = self._windows
        emit = EmitStrategy.on_window_update()
        processor, store_builder, size = timed(w)
        return _build(self._groups, initializer, None, materialized, name,
                      lambda store, aggregation: partial(processor, store, w, aggregation, emit),
                      lambda store, m: store_builder(store, w, m),
                      lambda store: StoreView(OldValues(True), store,
                                              WindowedGetterSupplier(store, False)),
                      w.grace_ms,
                      _windowed_key_serde(self._groups, lambda inner: TimeWindowed(inner, size)))


class SessionWindowedCogroupedImpl(SessionWindowedCogroupedKStream[KTable]):
    """A cogroup per session: the session processor and store, one processor per grouped
    stream (results on every update)."""

    def __init__(self, groups: Groups, windows: SessionWindows) -> None:
        self._groups, self._windows = groups, windows

    def aggregate(self, initializer: Callable[[], Any],
                  merger: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        if not callable(merger):
            raise TypeError(f"aggregate needs a merger(key, agg1, agg2), got {merger!r}")
        w = self._windows
        emit = EmitStrategy.on_window_update()
        return _build(self._groups, initializer, merger, materialized, name,
                      lambda store, aggregation: partial(SessionWindowAggregateProcessor, store,
                                                         w, aggregation, emit),
                      lambda store, m: session_store_builder(store, w, m),
                      lambda store: StoreView(OldValues(True), store,
                                              WindowedGetterSupplier(store, True)),
                      w.inactivity_gap_ms + w.grace_ms,
                      _windowed_key_serde(self._groups, lambda inner: SessionWindowed(inner)))
