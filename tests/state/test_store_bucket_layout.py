"""The bucket layout's small parts: a key's entries in a segment (a plain dict) read in sub key
order like a ``SortedDict``, buckets saved with ``SortedDict`` entries or ``SubEntries`` (a dict
subclass) by earlier versions still load, and a store's remembered bucket of a key is the one
its hash gives."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from kspark.hashing import stable_hash, stable_hashes
from kspark.records import KeyValue
from kspark.state import DictBucketLoader, InMemorySessionStore, InMemoryWindowStore, NullContext
from kspark.state.internals import base as state_base
from kspark.state.internals.segments import sub_keys
from kspark.windows import Window, Windowed

#: ``{0: SortedDict({"k": SubEntries({(5, 1): (3, 5)})})}`` as the version of 2026-11-24 pickled
#: it (session ``[1, 5]`` of key ``"k"`` with aggregate 3, stored at timestamp 5)
OLD_BUCKET = (
    b"\x80\x05\x95\x80\x00\x00\x00\x00\x00\x00\x00}\x94K\x00\x8c\x1bsortedcontainers.sorteddict"
    b"\x94\x8c\nSortedDict\x94\x93\x94N}\x94\x8c\x01k\x94\x8c\x1fkspark.state.internals.segments"
    b"\x94\x8c\nSubEntries\x94\x93\x94)\x81\x94K\x05K\x01\x86\x94K\x03K\x05\x86\x94ss\x86\x94R\x94s."
)


subs = st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), max_size=30)
bound = st.none() | st.tuples(st.integers(-60, 60)) | st.tuples(st.integers(-60, 60),
                                                                 st.integers(-60, 60))


@given(subs, bound, bound)
def test_sub_entries_read_in_sub_key_order_like_a_sorted_dict(keys, lo, hi):
    entries = {k: i for i, k in enumerate(keys)}
    reference = SortedDict((k, i) for i, k in enumerate(keys))
    assert sub_keys(entries, lo, hi) == list(reference.irange(lo, hi))


def _sessions(store: InMemorySessionStore) -> list:
    return [(kv.key.key, kv.key.window.start, kv.key.window.end, kv.value) for kv in store.all()]


def test_buckets_with_sorted_dict_entries_still_load():
    loader = DictBucketLoader()
    store = InMemorySessionStore("s", 1000, segment_interval_ms=100, num_buckets=4)
    store.init(NullContext(), loader)
    for i in range(30):
        store.put(Windowed(f"k{i % 7}", Window(i * 10, i * 10 + 5)), i)
    loader.save(store)
    expected = _sessions(store)
    # the layout of earlier versions: every key's entries in a SortedDict
    for name_bucket, blob in list(loader.buckets.items()):
        data = pickle.loads(blob)
        old = {seg: SortedDict({k: SortedDict(v) for k, v in segment.items()})
               for seg, segment in data.items()}
        loader.buckets[name_bucket] = pickle.dumps(old)
    again = InMemorySessionStore("s", 1000, segment_interval_ms=100, num_buckets=4)
    again.init(NullContext(), loader)
    again.restore_meta(pickle.loads(loader.metas["s"]))
    assert _sessions(again) == expected
    assert [kv.value for kv in again.find_sessions("k3", 100, 200)] == [
        kv.value for kv in store.find_sessions("k3", 100, 200)
    ]
    again.put(Windowed("k3", Window(400, 405)), 99)  # writes into an old entry container
    assert again.fetch_session("k3", 400, 405) == 99


def test_remembered_buckets_are_the_hashed_ones(monkeypatch):
    monkeypatch.setattr(state_base, "_BUCKET_MEMO_SIZE", 3)
    store = InMemoryWindowStore("w", 1000, 10, num_buckets=16)
    store._bucket_memo.clear()  # the process's memo for 16 buckets, filled by other tests
    keys = ["a", b"a", "b", "c", "d", "a", 1, 1.0, True, ("a", 1), b"a", "a"]
    for _ in range(2):
        # 1, 1.0 and True are equal in Python but hash apart, so they are never remembered
        assert [store.bucket_of(k) for k in keys] == [stable_hash(k) % 16 for k in keys]
    assert len(store._bucket_memo) <= 3
    assert len({store.bucket_of(k) for k in (1, 1.0, True)}) > 1
    # stores with as many buckets share the memo, stores with other counts do not
    other = InMemoryWindowStore("v", 1000, 10, num_buckets=7)
    same = InMemoryWindowStore("u", 1000, 10, num_buckets=16)
    for k in keys:  # the same key objects asked of each store in turn
        assert [s.bucket_of(k) for s in (store, other, same, other)] == \
            [stable_hash(k) % b for b in (16, 7, 16, 7)]
    assert same._bucket_memo is store._bucket_memo is not other._bucket_memo


keys_of_every_kind = st.lists(st.one_of(
    st.text(), st.binary(), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
    st.tuples(st.text(), st.integers())), max_size=20)


@given(keys_of_every_kind, st.integers(1, 64))
def test_buckets_of_many_keys_are_each_keys_bucket(keys, buckets):
    store = InMemoryWindowStore("w", 1000, 10, num_buckets=buckets)
    assert stable_hashes(keys) == [stable_hash(k) for k in keys]
    assert store.buckets_of(keys) == [stable_hash(k) % buckets for k in keys]


def test_a_bucket_of_the_earlier_layout_loads_and_takes_writes():
    loader = DictBucketLoader()
    loader.buckets[("s", 0)] = OLD_BUCKET
    store = InMemorySessionStore("s", retention_ms=1_000_000, num_buckets=1)
    store.init(NullContext(), loader)
    assert store.fetch("k") == [KeyValue(Windowed("k", Window(1, 5)), 3)]
    store.put(Windowed("k", Window(7, 9)), 4, 9)
    assert store.fetch("k") == [KeyValue(Windowed("k", Window(1, 5)), 3),
                                KeyValue(Windowed("k", Window(7, 9)), 4)]


def test_entries_are_pickled_as_plain_dicts():
    loader = DictBucketLoader()
    store = InMemorySessionStore("s", retention_ms=1_000_000, num_buckets=1)
    store.init(NullContext(), loader)
    store.put(Windowed("k", Window(1, 5)), 3, 5)
    loader.save(store)
    assert b"SubEntries" not in loader.buckets[("s", 0)]
    assert loader.load("s", 0) == pickle.loads(OLD_BUCKET)


def test_a_join_store_bucket_of_the_dict_layout_loads_and_takes_writes():
    """Before a window store with duplicates held a key's entries as a list, they were a dict
    by ``(start, seqnum)``: such a bucket still reads in order and takes new entries."""
    loader = DictBucketLoader()
    store = InMemoryWindowStore("j", 10_000, 10, retain_duplicates=True,
                                segment_interval_ms=100, num_buckets=2)
    store.init(NullContext(), loader)
    for i in range(40):
        store.put(f"k{i % 3}", f"v{i}", 1000 + (i * 37) % 300)
    loader.save(store)
    expected = [store.fetch_values(f"k{i}", 0, 5000) for i in range(3)]
    for name_bucket, blob in list(loader.buckets.items()):
        old = {seg: {key: {(e[0], e[1]): (e[2], e[3]) for e in held}
                     for key, held in segment.items()}
               for seg, segment in pickle.loads(blob).items()}
        loader.buckets[name_bucket] = pickle.dumps(old)
    again = InMemoryWindowStore("j", 10_000, 10, retain_duplicates=True,
                                segment_interval_ms=100, num_buckets=2)
    again.init(NullContext(), loader)
    again.restore_meta(pickle.loads(loader.metas["j"]))
    assert [again.fetch_values(f"k{i}", 0, 5000) for i in range(3)] == expected
    assert again.all() == store.all()
    again.put("k1", "new", 1100)
    assert (1100, "new") in again.fetch_values("k1", 1100, 1100)
    loader.save(again)  # written back as lists
    assert all(type(held) is list for blob in loader.buckets.values()
               for segment in pickle.loads(blob).values() for held in segment.values())
