"""Buckets persisted through DictBucketLoader and read back by a fresh store instance."""

from __future__ import annotations

from typing import Any

import pytest

from kspark.state import (
    DictBucketLoader,
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
    NullContext,
    StoreBase,
)
from kspark.windows import Window, Windowed

KEYS = [f"user-{i}" for i in range(40)]


def _new(kind: str, loader: DictBucketLoader | None) -> StoreBase:
    if kind == "key_value":
        store: StoreBase = InMemoryKeyValueStore("s", num_buckets=8)
    elif kind == "window":
        store = InMemoryWindowStore("s", 1000, 10, segment_interval_ms=100, num_buckets=8)
    else:
        store = InMemorySessionStore("s", 1000, segment_interval_ms=100, num_buckets=8)
    store.init(NullContext(), loader)
    return store


def _put(store: Any, key: str, value: Any, t: int) -> None:
    if store.kind == "key_value":
        store.put(key, value, timestamp=t)
    elif store.kind == "window":
        store.put(key, value, t)
    else:
        store.put(Windowed(key, Window(t, t + 5)), value)


def _reads(store: Any) -> list[Any]:
    out: list[Any] = [store.all()]
    if store.kind == "key_value":
        out += [store.range("user-1", "user-3"), store.get("user-7")]
    elif store.kind == "window":
        out += [store.fetch_range("user-7", 0, 10_000), store.fetch_all(200, 300)]
    else:
        out += [store.fetch("user-7"), store.find_sessions("user-3", 150, 600)]
    return out


@pytest.mark.parametrize("kind", ["key_value", "window", "session"])
def test_saved_buckets_read_back_identically(kind: str) -> None:
    loader = DictBucketLoader()
    a = _new(kind, loader)
    for i, key in enumerate(KEYS):
        for t in (i * 10, i * 10 + 300):
            _put(a, key, f"{key}@{t}", t)
    _put(a, KEYS[5], None, 50)  # a delete
    assert len(a.dirty_buckets()) == 8
    loader.save(a)
    assert a.dirty_buckets() == {}
    assert loader.bucket_ids("s") == list(range(8))

    b = _new(kind, loader)
    b.restore_meta(loader.load_meta("s"))
    assert b.meta() == a.meta()
    assert _reads(b) == _reads(a)
    assert len(b.all()) == (len(KEYS) if kind == "key_value" else 2 * len(KEYS)) - 1

    # the loader hands out copies: changing b does not change a or the saved state
    _put(b, "user-7", "changed", 700)
    assert b.dirty_buckets().keys() == {b.bucket_of("user-7")}
    assert _reads(a) != _reads(b)
    c = _new(kind, loader)
    c.restore_meta(loader.load_meta("s"))
    assert _reads(c) == _reads(a)

    # only the touched bucket is written back
    before = dict(loader.buckets)
    loader.save(b)
    changed = {k for k in loader.buckets if loader.buckets[k] != before.get(k)}
    assert changed == {("s", b.bucket_of("user-7"))}
    d = _new(kind, loader)
    d.restore_meta(loader.load_meta("s"))
    assert _reads(d) == _reads(b)


def test_emptied_bucket_is_deleted_from_the_loader() -> None:
    loader = DictBucketLoader()
    a = _new("key_value", loader)
    a.put("only", 1)
    loader.save(a)
    bucket = a.bucket_of("only")
    assert loader.bucket_ids("s") == [bucket]
    b = _new("key_value", loader)
    assert b.delete("only") == 1
    assert b.dirty_buckets() == {bucket: None}
    loader.save(b)
    assert loader.bucket_ids("s") == []
    assert _new("key_value", loader).all() == []


def test_reading_does_not_dirty_buckets() -> None:
    loader = DictBucketLoader()
    a = _new("window", loader)
    for key in KEYS:
        _put(a, key, 1, 100)
    loader.save(a)
    b = _new("window", loader)
    b.restore_meta(loader.load_meta("s"))
    assert len(b.all()) == len(KEYS)
    assert b.fetch("user-1", 100) == 1
    b.put("user-1", None, 999)  # delete of an absent window: nothing changes in the bucket
    assert b.dirty_buckets() == {}


def test_load_meta_unknown_store_is_empty() -> None:
    assert DictBucketLoader().load_meta("nope") == {}
