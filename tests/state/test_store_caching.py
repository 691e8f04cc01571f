"""Caching and changelog behaviour of the stores (docs/semantics.md §6)."""

from __future__ import annotations

import pytest
from state_models import Recorder

from kspark.state import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
    NullContext,
)
from kspark.windows import Window, Windowed


def kv_store(caching: bool, logging: bool = True) -> tuple[InMemoryKeyValueStore, Recorder]:
    store = InMemoryKeyValueStore("kv", caching=caching, logging=logging, num_buckets=4)
    store.init(NullContext())
    rec = Recorder()
    assert store.set_flush_listener(rec) is caching
    return store, rec


def test_caching_combines_updates_until_flush() -> None:
    store, rec = kv_store(caching=True)
    ctx = store.context
    store.put("x", 0, timestamp=1)
    store.flush()
    assert rec.take() == [("x", 0, None, 1)]
    assert ctx.changelog == [("x", 0, 1)]

    store.put("a", 1, timestamp=10)
    store.put("b", 1, timestamp=11)
    store.put("x", 5, timestamp=12)
    store.put("a", 2, timestamp=13)
    store.put("c", 1, timestamp=14)
    store.delete("c")  # created and deleted within the commit
    store.put("b", 2, timestamp=16)
    store.put("x", 6, timestamp=17)
    store.put("x", None, timestamp=18)
    store.put("x", 7, timestamp=19)
    # nothing reaches listener or changelog before the commit
    assert rec.events == []
    assert ctx.changelog == [("x", 0, 1)]
    store.flush()
    # one change per dirty key in order of last update, old = value before the first update
    assert rec.take() == [("a", 2, None, 13), ("b", 2, None, 16), ("x", 7, 0, 19)]
    # the changelog gets only final values; the transient key, absent before and after the
    # commit, is not logged (Kafka Streams' caching store skips it when it has a flush listener)
    assert ctx.changelog[1:] == [("a", 2, 13), ("b", 2, 16), ("x", 7, 19)]
    store.flush()
    assert rec.events == []


def test_caching_delete_of_existing_key_forwards_tombstone() -> None:
    store, rec = kv_store(caching=True)
    store.put("a", 1, timestamp=1)
    store.flush()
    rec.take()
    store.put("a", 2, timestamp=2)
    store.delete("a")
    store.flush()
    assert rec.take() == [("a", None, 1, -1)]


def test_caching_off_logs_every_change_and_never_calls_listener() -> None:
    store, rec = kv_store(caching=False)
    store.put("a", 1, timestamp=1)
    store.put("a", 2, timestamp=2)
    store.delete("a")
    store.delete("a")  # deletes nothing, logged all the same (as Kafka Streams does)
    store.put("b", None, timestamp=3)  # likewise, at the record's timestamp (none here: -1)
    assert store.context.changelog == [("a", 1, 1), ("a", 2, 2), ("a", None, -1),
                                       ("a", None, -1), ("b", None, -1)]
    store.flush()
    assert rec.events == []


@pytest.mark.parametrize("caching", [False, True])
def test_a_put_of_none_is_a_delete_at_the_records_timestamp(caching: bool) -> None:
    """Kafka Streams stores no timestamp with a null value: a put of ``None`` with a timestamp
    (an aggregate deleted by its aggregator, at max(record, old aggregate)) is logged, and with
    caching forwarded at the flush, at the timestamp of the record being processed
    (``ChangeLoggingTimestampedKeyValueBytesStore#put``, ``TimestampedCacheFlushListener``)."""
    store, rec = kv_store(caching=caching)
    store.context.timestamp = 10
    store.put("a", 1, timestamp=10)
    store.flush()
    store.context.timestamp = 5  # an older record deletes the key: put at max(5, 10)
    store.put("a", None, timestamp=10)
    store.flush()
    assert store.context.changelog == [("a", 1, 10), ("a", None, 5)]
    if caching:
        assert rec.take() == [("a", 1, None, 10), ("a", None, 1, 5)]


def test_logging_off_writes_no_changelog() -> None:
    for caching in (False, True):
        store, rec = kv_store(caching=caching, logging=False)
        store.put("a", 1, timestamp=1)
        store.flush()
        assert store.context.changelog == []
        assert rec.events == ([("a", 1, None, 1)] if caching else [])


def test_window_store_caching() -> None:
    store = InMemoryWindowStore("ws", 1000, 10, caching=True, num_buckets=4)
    store.init(NullContext())
    rec = Recorder()
    store.set_flush_listener(rec)
    wa = Windowed("a", Window(0, 10))
    store.put("a", 1, 0, timestamp=1)
    store.put("b", 1, 5, timestamp=6)
    store.put("a", 2, 0, timestamp=3)
    store.put("b", None, 5, timestamp=7)
    assert store.context.changelog == []
    store.flush()
    assert rec.take() == [(wa, 2, None, 3)]
    # b was created and removed within the commit: not logged (Kafka Streams' caching store
    # with a flush listener writes nothing for a key absent before and after)
    assert store.context.changelog == [(wa, 2, 3)]
    store.put("a", 3, 0, timestamp=9)
    store.flush()
    assert rec.take() == [(wa, 3, 2, 9)]


def test_session_store_caching() -> None:
    store = InMemorySessionStore("ss", 1000, caching=True, num_buckets=4)
    store.init(NullContext())
    rec = Recorder()
    store.set_flush_listener(rec)
    s1, s2 = Windowed("k", Window(0, 5)), Windowed("k", Window(0, 9))
    store.put(s1, "x")
    store.flush()
    assert rec.take() == [(s1, "x", None, 5)]
    # the session grows: remove the old one, store the merged one
    store.remove(s1)
    store.put(s2, "xy")
    store.flush()
    assert rec.take() == [(s1, None, "x", 5), (s2, "xy", None, 9)]
    assert store.context.changelog == [(s1, "x", 5), (s1, None, 5), (s2, "xy", 9)]


def test_segmented_remove_of_absent_key_is_logged() -> None:
    # its segment timestamp moves observed stream time; the changelog must carry it
    store = InMemorySessionStore("ss", 100, num_buckets=2)
    store.init(NullContext())
    store.put(Windowed("k", Window(0, 10)), 1)
    store.remove(Windowed("k", Window(500, 500)))
    assert store.context.changelog[-1] == (Windowed("k", Window(500, 500)), None, 500)
    fresh = InMemorySessionStore("ss", 100, num_buckets=2)
    fresh.restore(store.context.changelog)
    assert fresh.observed_stream_time == store.observed_stream_time == 500
    assert fresh.fetch("k") == store.fetch("k") == []


def test_caching_rewrite_of_expired_window_forwards_nothing() -> None:
    # an entry that expired (segment still live) is no longer the "old value" of its key
    store = InMemoryWindowStore("ws", 100, 10, segment_interval_ms=1000, caching=True)
    store.init(NullContext())
    rec = Recorder()
    store.set_flush_listener(rec)
    store.put("a", 1, 100, timestamp=100)
    store.flush()
    assert rec.take() == [(Windowed("a", Window(100, 110)), 1, None, 100)]
    store.put("b", 1, 200, timestamp=200)  # window a@100 is now expired: 100 <= 200 - 100
    store.flush()
    rec.take()
    store.put("a", 2, 100, timestamp=201)  # same live segment: stored, but invisible
    store.flush()
    assert rec.take() == []
    assert store.fetch("a", 100) is None
