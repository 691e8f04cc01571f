"""Unit tests of InMemorySessionStore (KIP-94)."""

from __future__ import annotations

import pytest

from kspark.errors import InvalidStateStoreError
from kspark.records import KeyValue
from kspark.state import InMemorySessionStore, NullContext
from kspark.windows import Window, Windowed


def make(**kw) -> InMemorySessionStore:
    params = {"retention_ms": 10_000, "num_buckets": 8} | kw
    store = InMemorySessionStore("ss", **params)
    store.init(NullContext())
    return store


def sw(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


@pytest.fixture
def kip94() -> InMemorySessionStore:
    store = make()
    for start, end in [(301, 400), (0, 99), (201, 300), (101, 200)]:
        store.put(sw("k", start, end), f"{start}-{end}")
    store.put(sw("other", 120, 180), "o")
    return store


def test_kip94_example(kip94: InMemorySessionStore) -> None:
    assert kip94.find_sessions("k", 150, 300) == [
        KeyValue(sw("k", 101, 200), "101-200"),
        KeyValue(sw("k", 201, 300), "201-300"),
    ]
    assert kip94.backward_find_sessions("k", 150, 300) == [
        KeyValue(sw("k", 201, 300), "201-300"),
        KeyValue(sw("k", 101, 200), "101-200"),
    ]


def test_find_sessions_bounds_are_inclusive(kip94: InMemorySessionStore) -> None:
    # end >= 99 includes [0, 99]; start <= 101 includes [101, 200]
    assert [e.key.window.start for e in kip94.find_sessions("k", 99, 101)] == [0, 101]
    assert [e.key.window.start for e in kip94.find_sessions("k", 100, 100)] == []
    assert [e.key.window.start for e in kip94.find_sessions("k", 400, 301)] == [301]


def test_ordering_by_end_then_start() -> None:
    store = make()
    store.put(sw("k", 50, 100), "b")
    store.put(sw("k", 10, 100), "a")
    store.put(sw("k", 60, 90), "c")
    assert [e.value for e in store.fetch("k")] == ["c", "a", "b"]
    assert [e.value for e in store.backward_fetch("k")] == ["b", "a", "c"]


def test_fetch_and_fetch_session(kip94: InMemorySessionStore) -> None:
    assert [e.key.window.start for e in kip94.fetch("k")] == [0, 101, 201, 301]
    assert [e.key.window.start for e in kip94.backward_fetch("k")] == [301, 201, 101, 0]
    assert kip94.fetch_session("k", 101, 200) == "101-200"
    assert kip94.fetch_session("k", 101, 201) is None
    assert kip94.fetch_session("nope", 101, 200) is None


def test_find_sessions_range_and_all(kip94: InMemorySessionStore) -> None:
    got = kip94.find_sessions_range("k", "other", 150, 300)
    assert got == [
        KeyValue(sw("k", 101, 200), "101-200"),
        KeyValue(sw("k", 201, 300), "201-300"),
        KeyValue(sw("other", 120, 180), "o"),
    ]
    assert kip94.backward_find_sessions_range("k", "other", 150, 300) == got[::-1]
    assert [e.key for e in kip94.all()] == [
        sw("k", 0, 99),
        sw("other", 120, 180),
        sw("k", 101, 200),
        sw("k", 201, 300),
        sw("k", 301, 400),
    ]
    assert kip94.backward_all() == kip94.all()[::-1]


def test_all_ordered_by_end_start_then_key() -> None:
    store = make()
    for key in ["c", "a", "b"]:
        store.put(sw(key, 5, 10), key)
    store.put(sw("z", 6, 10), "z")
    store.put(sw("y", 4, 10), "y")
    assert [e.value for e in store.all()] == ["y", "a", "b", "c", "z"]


def test_remove_and_put_none(kip94: InMemorySessionStore) -> None:
    kip94.remove(sw("k", 101, 200))
    kip94.put(sw("k", 201, 300), None)
    assert [e.key.window.start for e in kip94.fetch("k")] == [0, 301]


def test_put_timestamp_defaults_to_session_end() -> None:
    store = make()
    store.context.timestamp = 5
    store.put(sw("k", 1, 20), "x")
    store.put(sw("k", 30, 40), "y", timestamp=33)
    assert store.context.changelog == [(sw("k", 1, 20), "x", 20), (sw("k", 30, 40), "y", 33)]


def test_none_key_and_read_only(kip94: InMemorySessionStore) -> None:
    with pytest.raises(ValueError, match="ss"):
        kip94.put(sw(None, 1, 2), 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        kip94.put(None, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        kip94.find_sessions(None, 0, 10)
    kip94.read_only = True
    with pytest.raises(InvalidStateStoreError):
        kip94.put(sw("k", 1, 2), 1)
    with pytest.raises(InvalidStateStoreError):
        kip94.remove(sw("k", 0, 99))
    assert kip94.fetch_session("k", 0, 99) == "0-99"


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        make(retention_ms=-1)
    with pytest.raises(ValueError):
        make(segment_interval_ms=0)
    with pytest.raises(ValueError):
        InMemorySessionStore("", 10)
