"""The DSL's public types of windowed and cogrouped aggregations (re-exported by
:mod:`kspark.dsl.api`). ``name=`` names an aggregation's node as Kafka Streams' ``Named``
(the index it would have had is taken all the same); a cogroup's nodes are then
``<name>-cogroup-agg-<i>`` and ``<name>-cogroup-merge``.

Each type is generic in the table its aggregations give (``T``: :class:`~kspark.dsl.api.KTable`)
and a cogroup in the grouped streams it takes (``G``: :class:`~kspark.dsl.api.KGroupedStream`),
which :mod:`kspark.dsl.api` fills in: this module needs nothing of it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from kspark.dsl.materialized import Materialized
from kspark.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows

MaterializedLike = Materialized | str | None
#: the table an aggregation gives, the grouped stream a cogroup takes
T = TypeVar("T")
G = TypeVar("G")


class CogroupedKStream(ABC, Generic[T, G]):
    """Grouped streams that update one aggregate (:meth:`KGroupedStream.cogroup`)."""

    @abstractmethod
    def cogroup(self, grouped: G,
                aggregator: Callable[[Any, Any, Any], Any]) -> CogroupedKStream[T, G]:
        """Add ``grouped`` with its ``aggregator(key, value, agg)``; returns this cogroup."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key: each record of any of the grouped streams updates the one aggregate with
        its stream's aggregator, from ``initializer()``. Null keys and values are dropped and
        counted."""

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedCogroupedKStream[T]: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows
                    ) -> TimeWindowedCogroupedKStream[T]: ...

    @abstractmethod
    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedCogroupedKStream[T] | TimeWindowedCogroupedKStream[T]:
        """The cogroup aggregated per key and window (results on every update)."""


class TimeWindowedCogroupedKStream(ABC, Generic[T]):
    """A cogroup windowed by time or sliding windows."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key and window: each stream's aggregator from ``initializer()``, one store."""


class SessionWindowedCogroupedKStream(ABC, Generic[T]):
    """A cogroup windowed into sessions."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any],
                  merger: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key and session: each stream's aggregator from ``initializer()``; sessions a
        record joins combine with ``merger(key, agg1, agg2)``."""


class SessionWindowedKStream(ABC, Generic[T]):
    """A grouped stream windowed into sessions (docs/semantics.md §2). Results are keyed by
    :class:`~kspark.windows.Windowed` keys (serde :class:`~kspark.serdes.SessionWindowed` of
    the grouping's key serde, when known)."""

    @abstractmethod
    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedKStream[T]:
        """When results are forwarded: on every update (default) or once per window when it
        closes. Returns this windowed stream."""

    @abstractmethod
    def count(self, materialized: MaterializedLike = None, name: str | None = None) -> T:
        """The number of records per key and session."""

    @abstractmethod
    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key and session: the first value, then ``reducer(agg, value)``; merged sessions
        combine with ``reducer(agg1, agg2)``."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key and session: ``aggregator(key, value, agg)`` from ``initializer()``;
        sessions joined by a record combine with ``merger(key, agg1, agg2)``."""


class TimeWindowedKStream(ABC, Generic[T]):
    """A grouped stream windowed by tumbling/hopping :class:`~kspark.windows.TimeWindows` or
    by :class:`~kspark.windows.SlidingWindows` (docs/semantics.md §3). Results are keyed by
    :class:`~kspark.windows.Windowed` keys (serde :class:`~kspark.serdes.TimeWindowed` of the
    grouping's key serde, when known; window size: the time difference for sliding windows)."""

    @abstractmethod
    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedKStream[T]:
        """When results are forwarded: on every update (default) or once per window when it
        closes. Returns this windowed stream."""

    @abstractmethod
    def count(self, materialized: MaterializedLike = None, name: str | None = None) -> T:
        """The number of records per key and window."""

    @abstractmethod
    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key and window: the first value, then ``reducer(agg, value)``."""

    @abstractmethod
    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedLike = None, name: str | None = None) -> T:
        """Per key and window: ``aggregator(key, value, agg)`` from ``initializer()``."""
