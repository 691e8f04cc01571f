"""What an aggregation computes, apart from how its windows or sessions are kept.

``count``, ``reduce`` and ``aggregate`` of grouped streams (windowed or not) are
:class:`Aggregation` objects; the processors take one and the vectorised session path
recognises :class:`Count` by its type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from kspark.serdes import Long, Serde

#: ``(initializer, aggregator(key, value, agg), merger(key, agg1, agg2) or None)``
Functions = tuple[Callable[[], Any], Callable[[Any, Any, Any], Any],
                  Callable[[Any, Any, Any], Any] | None]


class Aggregation(ABC):
    """An initializer, an adder ``(key, value, agg) -> agg`` and, for session windows, a
    merger ``(key, agg1, agg2) -> agg``."""

    @abstractmethod
    def functions(self) -> Functions:
        """The three functions, as directly callable as possible (per-record hot path)."""

    def store_value_serde(self, value_serde: Serde | None) -> Serde | None:
        """The store's value serde when ``Materialized`` gives none, for values whose serde
        is ``value_serde`` (as Kafka Streams: ``Long`` for a count, the values' serde for a
        reduce; ``None``, kspark's pickle, for an aggregate of any type)."""
        return None


def _zero() -> int:
    return 0


def _increment(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _add(key: Any, a: int, b: int) -> int:
    return a + b


class Count(Aggregation):
    """The number of records: from 0, plus one per record; merged sessions add up."""

    def functions(self) -> Functions:
        return _zero, _increment, _add

    def store_value_serde(self, value_serde: Serde | None) -> Serde | None:
        return Long()


def _none() -> None:
    return None


class Reduce(Aggregation):
    """The first value, then ``reducer(agg, value)``; merged sessions ``reducer(agg1, agg2)``."""

    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None:
        self.reducer = reducer

    def functions(self) -> Functions:
        return _none, self.add, self.merge

    def store_value_serde(self, value_serde: Serde | None) -> Serde | None:
        return value_serde

    def add(self, key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else self.reducer(agg, value)

    def merge(self, key: Any, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return self.reducer(a, b)


class Aggregate(Aggregation):
    """The user's ``initializer``, ``aggregator`` and (session windows) ``merger``."""

    def __init__(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any] | None = None) -> None:
        self.initializer, self.aggregator, self.merger = initializer, aggregator, merger

    def functions(self) -> Functions:
        return self.initializer, self.aggregator, self.merger
