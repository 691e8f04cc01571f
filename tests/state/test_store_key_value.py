"""Unit tests of InMemoryKeyValueStore."""

from __future__ import annotations

import pytest

from kspark.errors import InvalidStateStoreError
from kspark.records import KeyValue, ValueAndTimestamp
from kspark.state import InMemoryKeyValueStore, NullContext


def make(num_buckets: int = 8, **kw) -> InMemoryKeyValueStore:
    store = InMemoryKeyValueStore("kv", num_buckets=num_buckets, **kw)
    store.init(NullContext())
    return store


@pytest.fixture
def kv() -> InMemoryKeyValueStore:
    store = make()
    for i in range(10):
        store.put(f"k{i}", i, timestamp=100 + i)
    return store


def test_get_put_overwrite_and_timestamp(kv: InMemoryKeyValueStore) -> None:
    assert kv.get("k3") == 3
    assert kv.get("nope") is None
    assert kv.get_with_timestamp("k3") == ValueAndTimestamp(3, 103)
    kv.put("k3", "x", timestamp=7)
    assert kv.get_with_timestamp("k3") == ValueAndTimestamp("x", 7)
    assert kv.get_with_timestamp("nope") is None


def test_default_timestamp_is_the_record_timestamp() -> None:
    store = make()
    store.context.timestamp = 4242
    store.put("a", 1)
    assert store.get_with_timestamp("a") == ValueAndTimestamp(1, 4242)


def test_range_is_inclusive_ordered_across_buckets(kv: InMemoryKeyValueStore) -> None:
    assert kv.range("k2", "k5") == [KeyValue(f"k{i}", i) for i in range(2, 6)]
    assert kv.reverse_range("k2", "k5") == [KeyValue(f"k{i}", i) for i in range(5, 1, -1)]
    assert kv.range(None, "k1") == [KeyValue("k0", 0), KeyValue("k1", 1)]
    assert kv.range("k8", None) == [KeyValue("k8", 8), KeyValue("k9", 9)]
    assert kv.range("k5", "k2") == []
    assert kv.range("k2a", "k3a") == [KeyValue("k3", 3)]
    assert [e.key for e in kv.all()] == [f"k{i}" for i in range(10)]
    assert [e.key for e in kv.reverse_all()] == [f"k{i}" for i in range(9, -1, -1)]


def test_prefix_scan() -> None:
    store = make()
    for k in ["apple", "apricot", "b", "ap", "a", "banana", "aq"]:
        store.put(k, k.upper())
    assert store.prefix_scan("ap") == [
        KeyValue("ap", "AP"),
        KeyValue("apple", "APPLE"),
        KeyValue("apricot", "APRICOT"),
    ]
    assert store.prefix_scan("z") == []
    assert [e.key for e in store.prefix_scan("")] == sorted(
        ["apple", "apricot", "b", "ap", "a", "banana", "aq"]
    )


def test_put_none_deletes_and_delete_returns_old(kv: InMemoryKeyValueStore) -> None:
    kv.put("k1", None)
    assert kv.get("k1") is None
    assert kv.delete("k2") == 2
    assert kv.delete("k2") is None
    assert kv.approximate_num_entries() == 8
    assert "k1" not in [e.key for e in kv.all()]


def test_put_if_absent(kv: InMemoryKeyValueStore) -> None:
    assert kv.put_if_absent("k1", "new") == 1
    assert kv.get("k1") == 1
    assert kv.put_if_absent("fresh", "v") is None
    assert kv.get("fresh") == "v"


def test_put_all_and_count() -> None:
    store = make()
    store.put_all([("a", 1), ("b", 2), ("a", 3)])
    assert store.all() == [KeyValue("a", 3), KeyValue("b", 2)]
    assert store.approximate_num_entries() == 2


def test_none_key_raises(kv: InMemoryKeyValueStore) -> None:
    with pytest.raises(ValueError, match="kv"):
        kv.put(None, 1)
    with pytest.raises(ValueError):
        kv.delete(None)
    with pytest.raises(ValueError):
        kv.put_if_absent(None, 1)
    with pytest.raises(ValueError):
        kv.get(None)


def test_read_only_raises_but_reads_and_restores(kv: InMemoryKeyValueStore) -> None:
    kv.read_only = True
    with pytest.raises(InvalidStateStoreError, match="read-only"):
        kv.put("k1", 5)
    with pytest.raises(InvalidStateStoreError):
        kv.delete("k1")
    with pytest.raises(InvalidStateStoreError):
        kv.put_if_absent("zz", 5)
    assert kv.get("k1") == 1
    kv.restore([("k1", 11, 1), ("k2", None, 2)])
    assert kv.get("k1") == 11
    assert kv.get("k2") is None


def test_mixed_key_types_raise_type_error_naming_store() -> None:
    store = make(num_buckets=1)
    store.put("a", 1)
    with pytest.raises(TypeError, match="'kv'"):
        store.put(1, 1)
    assert store.all() == [KeyValue("a", 1)]
    with pytest.raises(TypeError, match="'kv'"):
        store.range(1, 2)


def test_mixed_key_types_in_different_buckets_fail_on_merge() -> None:
    store = make(num_buckets=64)
    keys: list[object] = ["a", 1]
    for k in keys:
        store.put(k, 1)
    assert store.bucket_of("a") != store.bucket_of(1)
    with pytest.raises(TypeError, match="'kv'"):
        store.all()


def test_iteration_is_a_snapshot(kv: InMemoryKeyValueStore) -> None:
    seen = []
    for entry in kv.all():
        kv.delete(entry.key)
        kv.put(entry.key + "x", 0)
        seen.append(entry.key)
    assert seen == [f"k{i}" for i in range(10)]


def test_tuple_and_int_keys() -> None:
    store = make()
    for i in (5, -3, 12, 0):
        store.put(i, i * 2)
    assert store.range(-3, 5) == [KeyValue(-3, -6), KeyValue(0, 0), KeyValue(5, 10)]
    tup = make()
    tup.put(("a", 2), 1)
    tup.put(("a", 1), 2)
    tup.put(("b", 0), 3)
    assert [e.key for e in tup.range(("a",), ("a", 99))] == [("a", 1), ("a", 2)]
