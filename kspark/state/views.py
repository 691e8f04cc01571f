"""Read-only views of a store for interactive queries (``app.store(name)``).

A store of a running application is split over its tasks (one per partition); each task holds
disjoint keys with its own observed stream time. A view reads every task's store and merges the
results in the order a single store would return them, like Kafka Streams' composite read-only
stores. Writes raise :class:`~kspark.errors.InvalidStateStoreError`; a windowed query whose
time range is empty (``time_from > time_to``) raises ``ValueError``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

from kspark.errors import InvalidStateStoreError
from kspark.records import KeyValue
from kspark.state.internals.base import StoreBase
from kspark.state.internals.common import order_error

#: the stores of every task, as of the latest committed state (may reload on each call)
StoreSource = Callable[[], list[StoreBase]]

_WRITES = ("put", "put_if_absent", "put_all", "delete", "remove", "restore", "flush")


class ReadOnlyStoreView:
    """Common part of the views: the name, the kind, the stores of every task."""

    kind = "base"

    def __init__(self, name: str, stores: StoreSource | list[StoreBase]) -> None:
        self.name = name
        self._source: StoreSource = stores if callable(stores) else (lambda: list(stores))

    @property
    def batch_id(self) -> int | None:
        """The committed Spark batch the view read last, if it reads an application's state."""
        return getattr(self._source, "batch_id", None)

    def stores(self) -> list[StoreBase]:
        """The store of every task (as of the latest committed state)."""
        return self._source()

    def __getattr__(self, attr: str) -> Any:
        if attr in _WRITES:
            raise InvalidStateStoreError(
                f"store {self.name!r} is a read-only query view: {attr}() is not allowed"
            )
        raise AttributeError(f"{type(self).__name__} has no attribute {attr!r}")

    def _first(self, method: str, *args: Any) -> Any:
        for store in self.stores():
            value = getattr(store, method)(*args)
            if value is not None:
                return value
        return None

    def _merged(
        self, method: str, args: tuple[Any, ...], order: Callable[[KeyValue], Any], *,
        reverse: bool = False,
    ) -> list[KeyValue]:
        runs = [r for r in (getattr(s, method)(*args) for s in self.stores()) if r]
        if len(runs) <= 1:
            return runs[0] if runs else []
        try:
            return list(heapq.merge(*runs, key=order, reverse=reverse))
        except TypeError as exc:
            raise order_error(self.name, exc) from exc

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _check_range(store: str, time_from: int | None, time_to: int | None) -> None:
    if time_from is not None and time_to is not None and time_from > time_to:
        raise ValueError(
            f"store {store!r}: invalid time range: from ({time_from}) is after to ({time_to})"
        )


def _key(kv: KeyValue) -> Any:
    return kv.key


def _start_key(kv: KeyValue) -> Any:
    return (kv.key.window.start, kv.key.key)


def _key_start(kv: KeyValue) -> Any:
    return (kv.key.key, kv.key.window.start)


def _end_start(kv: KeyValue) -> Any:
    return (kv.key.window.end, kv.key.window.start)


def _key_end_start(kv: KeyValue) -> Any:
    return (kv.key.key, kv.key.window.end, kv.key.window.start)


def _end_start_key(kv: KeyValue) -> Any:
    return (kv.key.window.end, kv.key.window.start, kv.key.key)


class ReadOnlyKeyValueView(ReadOnlyStoreView):
    """``get``, ``range``, ``all`` and friends of a key-value store, over every task."""

    kind = "key_value"

    def get(self, key: Any) -> Any:
        return self._first("get", key)

    def get_with_timestamp(self, key: Any) -> Any:
        return self._first("get_with_timestamp", key)

    def range(self, lo: Any, hi: Any) -> list[KeyValue]:
        return self._merged("range", (lo, hi), _key)

    def reverse_range(self, lo: Any, hi: Any) -> list[KeyValue]:
        return self._merged("reverse_range", (lo, hi), _key, reverse=True)

    def all(self) -> list[KeyValue]:
        return self._merged("all", (), _key)

    def reverse_all(self) -> list[KeyValue]:
        return self._merged("reverse_all", (), _key, reverse=True)

    def prefix_scan(self, prefix: str | bytes) -> list[KeyValue]:
        return self._merged("prefix_scan", (prefix,), _key)

    def approximate_num_entries(self) -> int:
        return sum(s.approximate_num_entries() for s in self.stores())  # type: ignore[attr-defined]


class ReadOnlyWindowView(ReadOnlyStoreView):
    """``fetch``, ``fetch_range``, ``fetch_all`` and friends of a window store, over every
    task. Time bounds are window starts, inclusive; ``None`` is unbounded."""

    kind = "window"

    def fetch(self, key: Any, window_start: int) -> Any:
        return self._first("fetch", key, window_start)

    def fetch_with_timestamp(self, key: Any, window_start: int) -> Any:
        return self._first("fetch_with_timestamp", key, window_start)

    def fetch_range(self, key: Any, time_from: int | None, time_to: int | None) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        return self._merged("fetch_range", (key, time_from, time_to), _key)

    def backward_fetch_range(
        self, key: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        return self._merged("backward_fetch_range", (key, time_from, time_to), _key, reverse=True)

    def fetch_range_with_timestamps(
        self, key: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        return self._merged("fetch_range_with_timestamps", (key, time_from, time_to), _key)

    def fetch_key_range(
        self, key_from: Any, key_to: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        args = (key_from, key_to, time_from, time_to)
        return self._merged("fetch_key_range", args, _key_start)

    def backward_fetch_key_range(
        self, key_from: Any, key_to: Any, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        args = (key_from, key_to, time_from, time_to)
        return self._merged("backward_fetch_key_range", args, _key_start, reverse=True)

    def fetch_all(self, time_from: int | None, time_to: int | None) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        return self._merged("fetch_all", (time_from, time_to), _start_key)

    def fetch_all_with_timestamps(
        self, time_from: int | None, time_to: int | None
    ) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        return self._merged("fetch_all_with_timestamps", (time_from, time_to), _start_key)

    def backward_fetch_all(self, time_from: int | None, time_to: int | None) -> list[KeyValue]:
        _check_range(self.name, time_from, time_to)
        return self._merged("backward_fetch_all", (time_from, time_to), _start_key, reverse=True)

    def all(self) -> list[KeyValue]:
        return self._merged("all", (), _start_key)

    def backward_all(self) -> list[KeyValue]:
        return self._merged("backward_all", (), _start_key, reverse=True)


class ReadOnlySessionView(ReadOnlyStoreView):
    """``fetch``, ``find_sessions`` and friends of a session store, over every task."""

    kind = "session"

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        return self._first("fetch_session", key, start, end)

    def fetch(self, key: Any) -> list[KeyValue]:
        return self._merged("fetch", (key,), _end_start)

    def backward_fetch(self, key: Any) -> list[KeyValue]:
        return self._merged("backward_fetch", (key,), _end_start, reverse=True)

    def find_sessions(
        self, key: Any, earliest_session_end: int | None, latest_session_start: int | None
    ) -> list[KeyValue]:
        args = (key, earliest_session_end, latest_session_start)
        return self._merged("find_sessions", args, _end_start)

    def backward_find_sessions(
        self, key: Any, earliest_session_end: int | None, latest_session_start: int | None
    ) -> list[KeyValue]:
        args = (key, earliest_session_end, latest_session_start)
        return self._merged("backward_find_sessions", args, _end_start, reverse=True)

    def find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end: int | None,
        latest_session_start: int | None,
    ) -> list[KeyValue]:
        args = (key_from, key_to, earliest_session_end, latest_session_start)
        return self._merged("find_sessions_range", args, _key_end_start)

    def all(self) -> list[KeyValue]:
        return self._merged("all", (), _end_start_key)

    def backward_all(self) -> list[KeyValue]:
        return self._merged("backward_all", (), _end_start_key, reverse=True)


class ReadOnlyVersionedView(ReadOnlyStoreView):
    """``get(key, as_of_timestamp=None)`` (a ``VersionedRecord``) and ``all()`` (the latest
    values) of a versioned store, over every task (a key lives in one of them)."""

    kind = "versioned"

    def get(self, key: Any, as_of_timestamp: int | None = None) -> Any:
        return self._first("get", key, as_of_timestamp)

    def all(self) -> list[KeyValue]:
        """``KeyValue(key, latest value)`` of every key, in key order."""
        return self._merged("all", (), _key)


_VIEWS: dict[str, type[ReadOnlyStoreView]] = {
    "key_value": ReadOnlyKeyValueView,
    "window": ReadOnlyWindowView,
    "session": ReadOnlySessionView,
    "versioned": ReadOnlyVersionedView,
}


def read_only_view(
    name: str, kind: str, stores: StoreSource | Iterable[StoreBase]
) -> ReadOnlyStoreView:
    """The read-only view of a ``kind`` store over ``stores`` (a list, or a callable returning
    the current list); the stores only a join keeps for itself cannot be queried."""
    view = _VIEWS.get(kind)
    if view is None:
        raise InvalidStateStoreError(
            f"store {name!r} is a {kind} store that a join keeps for itself: it cannot be "
            "queried")
    source = stores if callable(stores) else list(stores)
    return view(name, source)
