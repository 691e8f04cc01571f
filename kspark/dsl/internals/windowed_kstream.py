"""The implementations of :class:`~kspark.dsl.api.SessionWindowedKStream` and
:class:`~kspark.dsl.api.TimeWindowedKStream`: aggregations per key and session / time / sliding
window.

The processors and stores come from :mod:`kspark.dsl.internals.windowing` (session, time and sliding
windows). The resulting KTables have
:class:`~kspark.windows.Windowed` keys; when the grouping's key serde is known, their key serde
is :class:`~kspark.serdes.SessionWindowed` / :class:`~kspark.serdes.TimeWindowed` of it (window
size: the time difference for sliding windows), as in Kafka Streams. Records with a null key
(sliding windows: or value) are dropped and counted by those processors; session and time windows
hand a null value to the aggregator, as Kafka Streams does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from kspark.dsl.api import KTable, SessionWindowedKStream, TimeWindowedKStream
from kspark.dsl.internals.aggregations import Aggregate, Aggregation, Count, Reduce
from kspark.dsl.internals.graph import Grouping, store_name_for
from kspark.dsl.internals.table_views import OldValues, StoreView, WindowedGetterSupplier
from kspark.dsl.internals.windowing.kinds import (
    SessionWindowAggregateProcessor,
    session_store_builder,
    timed,
)
from kspark.dsl.materialized import Materialized, as_materialized, with_default_serdes
from kspark.serdes import Serde, SessionWindowed, TimeWindowed
from kspark.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows


def _windowed_serde(grouped: Grouping,
                    wrap: Callable[[Serde], Serde]) -> Serde | None:
    """The result's key serde: the grouping's key serde (if known) wrapped for windows."""
    inner = grouped.result_key_serde
    return None if inner is None else wrap(inner)


class _WindowedKStream:
    def __init__(self, grouped: Grouping, windows: Any) -> None:
        self._grouped = grouped
        self._windows = windows
        self._emit_strategy = EmitStrategy.on_window_update()

    def emit_strategy(self, strategy: EmitStrategy) -> Any:
        if not isinstance(strategy, EmitStrategy):
            raise TypeError(f"expected an EmitStrategy, got {strategy!r}")
        self._emit_strategy = strategy
        return self

    def _build(self, prefix: str, materialized: Materialized | str | None,
               aggregation: Aggregation, make_processor: Callable[[str], Any],
               make_store: Callable[[str, Materialized | None], Any],
               suppress_duration_ms: int, key_serde: Serde | None, session: bool,
               node_name: str | None) -> KTable:
        grouped = self._grouped
        builder = grouped.graph
        m = as_materialized(materialized)
        if node_name is not None and (not isinstance(node_name, str) or not node_name):
            raise ValueError(f"an aggregation's name must be a non-empty string, "
                             f"got {node_name!r}")
        if (m is not None and not m.name and isinstance(aggregation, Count)
                and not isinstance(self._windows, SlidingWindows)):
            # Kafka Streams' time and session count(Materialized) takes one more store index
            builder.new_store_name(prefix)
        store = store_name_for(builder, m, prefix)
        # the store's serdes, unless given: the grouping's key serde and the aggregation's
        store_m = with_default_serdes(m, grouped.result_key_serde,
                                      aggregation.store_value_serde(grouped.value_serde))
        store_builder = make_store(store, store_m)  # checks retention before touching the graph
        generated = builder.new_name(prefix)  # taken with a name too, as Kafka Streams does
        name = node_name or generated
        parent = grouped.source_for(store)
        topo = builder.topology
        topo.add_processor(name, make_processor(store), parent)
        topo.add_state_store(store_builder, name)
        # windowed aggregations always send old values (every operator that reads a table's
        # changes asks for them anyway: Kafka Streams' windowed aggregations grant it)
        view = StoreView(OldValues(True), store, WindowedGetterSupplier(store, session))
        return builder.new_ktable(name, view,
                                  queryable_store=store if m is not None and m.name else None,
                                  key_serde=key_serde,
                      value_serde=None if m is None else m.value_serde,
                      suppress_duration_ms=suppress_duration_ms)


class SessionWindowedKStreamImpl(_WindowedKStream, SessionWindowedKStream[KTable]):
    """Session windows: the session processor and store of :mod:`..windowing.session`."""

    _windows: SessionWindows

    def _session(self, prefix: str, aggregation: Aggregation,
                 materialized: Materialized | str | None, name: str | None) -> KTable:
        w = self._windows
        emit = self._emit_strategy
        return self._build(
            prefix, materialized, aggregation,
            lambda store: partial(SessionWindowAggregateProcessor, store, w, aggregation, emit),
            lambda store, m: session_store_builder(store, w, m),
            w.inactivity_gap_ms + w.grace_ms,
            _windowed_serde(self._grouped, lambda inner: SessionWindowed(inner)),
            True, name,
        )

    def count(self, materialized: Materialized | str | None = None,
              name: str | None = None) -> KTable:
        return self._session("KSTREAM-AGGREGATE-", Count(), materialized, name)

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None,
               name: str | None = None) -> KTable:
        return self._session("KSTREAM-REDUCE-", Reduce(reducer), materialized, name)

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        return self._session("KSTREAM-AGGREGATE-", Aggregate(initializer, aggregator, merger),
                             materialized, name)


class TimeWindowedKStreamImpl(_WindowedKStream, TimeWindowedKStream[KTable]):
    """Time and sliding windows: the processors and stores of :mod:`..windowing.time_windows`
    and :mod:`..windowing.sliding`."""

    _windows: TimeWindows | SlidingWindows

    def _timed(self, prefix: str, aggregation: Aggregation,
               materialized: Materialized | str | None, name: str | None) -> KTable:
        w = self._windows
        emit = self._emit_strategy
        processor, store_builder, size = timed(w)
        return self._build(
            prefix, materialized, aggregation,
            lambda store: partial(processor, store, w, aggregation, emit),
            lambda store, m: store_builder(store, w, m),
            w.grace_ms,
            _windowed_serde(self._grouped, lambda inner: TimeWindowed(inner, size)),
            False, name,
        )

    def count(self, materialized: Materialized | str | None = None,
              name: str | None = None) -> KTable:
        return self._timed("KSTREAM-AGGREGATE-", Count(), materialized, name)

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | str | None = None,
               name: str | None = None) -> KTable:
        return self._timed("KSTREAM-REDUCE-", Reduce(reducer), materialized, name)

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | str | None = None,
                  name: str | None = None) -> KTable:
        return self._timed("KSTREAM-AGGREGATE-", Aggregate(initializer, aggregator),
                           materialized, name)
