"""Segments and retention with explicit numbers (docs/semantics.md §6)."""

from __future__ import annotations

import numpy as np
from state_models import segments_held

from kspark.records import KeyValue
from kspark.state import DictBucketLoader, InMemorySessionStore, InMemoryWindowStore, NullContext
from kspark.state.internals.packed import PackedBucket
from kspark.state.internals.segments import min_live_segment, segment_id, segment_interval_ms
from kspark.windows import Window, Windowed


def test_segment_helpers() -> None:
    assert segment_interval_ms(10) == 60_000
    assert segment_interval_ms(300_000) == 150_000
    assert segment_id(149, 50) == 2
    assert segment_id(150, 50) == 3
    assert min_live_segment(300, 100, 50) == 4
    assert min_live_segment(-1, 100, 50) == -3


def test_window_store_retention() -> None:
    # retention 100, segments of 50 ms: segment n holds window starts [50n, 50n + 50)
    ctx = NullContext()
    ws = InMemoryWindowStore("ws", 100, 10, segment_interval_ms=50, num_buckets=4)
    ws.init(ctx)
    ws.put("a", "a300", 300)  # observed 300; bound 200; oldest live segment 4 = [200, 250)
    assert ws.observed_stream_time == 300
    assert ws.min_live_segment() == 4

    # (a) start 199 is in segment 3 < 4: not stored, counted; logged all the same, as Kafka
    # Streams logs every write (restoring drops it again)
    ws.put("b", "b199", 199)
    assert ctx.dropped == 1
    assert ws.fetch("b", 199) is None
    assert 3 not in segments_held(ws)
    assert [entry[0].key for entry in ctx.changelog] == ["a", "b"]

    # (b) start 200 is in live segment 4 but 200 <= 300 - 100: stored, not counted, invisible
    ws.put("c", "c200", 200)
    assert ctx.dropped == 1
    assert 4 in segments_held(ws)
    assert ws.fetch("c", 200) is None
    assert ws.fetch_range("c", 0, 1000) == []
    assert all(e.key.key != "c" for e in ws.all())

    # (c) start 201 is visible at observed 300 and invisible from observed 301 on
    ws.put("d", "d201", 201)
    assert ws.fetch("d", 201) == "d201"
    assert ws.fetch_all(0, 1000)[0] == KeyValue(Windowed("d", Window(201, 211)), "d201")
    ws.put("a", "a301", 301)
    assert ws.fetch("d", 201) is None
    assert ws.fetch_range("d", 0, 1000) == []
    assert [e.key.key for e in ws.all()] == ["a", "a"]

    # segment 4 is deleted only once the oldest live segment passes it (observed >= 350)
    ws.put("a", "a349", 349)
    assert 4 in segments_held(ws)
    ws.put("a", "a350", 350)
    assert ws.min_live_segment() == 5
    assert segments_held(ws) == {6, 7}  # segment 4 (c200, d201) is gone
    assert ctx.dropped == 1
    # the removal of expired data dirtied the buckets that held it
    assert ws.bucket_of("c") in ws.dirty_buckets()


def test_session_store_retention() -> None:
    ctx = NullContext()
    ss = InMemorySessionStore("ss", 100, segment_interval_ms=50, num_buckets=4)
    ss.init(ctx)

    def s(key: str, start: int, end: int) -> Windowed:
        return Windowed(key, Window(start, end))

    ss.put(s("a", 290, 300), 1)  # observed 300 (session end); bound 200; oldest live segment 4
    ss.put(s("b", 100, 199), 1)  # segment 3: dropped, even though it starts long before
    assert ctx.dropped == 1
    assert ss.fetch("b") == []
    ss.put(s("c", 150, 200), 1)  # segment 4, end 200 <= 200: stored but invisible
    assert ctx.dropped == 1
    assert ss.fetch_session("c", 150, 200) is None
    assert ss.find_sessions("c", 0, 1000) == []
    assert 4 in segments_held(ss)
    ss.put(s("d", 150, 201), 1)  # visible until observed reaches 301
    assert ss.find_sessions("d", 0, 1000) == [KeyValue(s("d", 150, 201), 1)]
    ss.put(s("a", 301, 301), 2)
    assert ss.find_sessions("d", 0, 1000) == []
    assert ss.fetch_session("d", 150, 201) is None
    assert [e.key for e in ss.all()] == [s("a", 290, 300), s("a", 301, 301)]
    # removing an expired-segment session is not a drop
    ss.remove(s("b", 100, 199))
    assert ctx.dropped == 1
    assert 4 in segments_held(ss)
    ss.put(s("a", 360, 360), 3)  # oldest live segment 5: segment 4 (c, d) is deleted
    assert segments_held(ss) == {6, 7}


def test_late_put_does_not_move_observed_time_and_reads_keep_live_data() -> None:
    ws = InMemoryWindowStore("ws", 100, 10, segment_interval_ms=50, num_buckets=1)
    ws.init(NullContext())
    ws.put("a", 1, 1000)
    ws.put("a", 2, 950)
    ws.put("a", 3, 5)
    assert ws.observed_stream_time == 1000
    assert ws.fetch_range("a", 0, 2000) == [KeyValue(950, 2), KeyValue(1000, 1)]


def test_expired_segments_are_dropped_when_a_bucket_is_loaded() -> None:
    loader = DictBucketLoader()
    a = InMemorySessionStore("ss", 100, segment_interval_ms=50, num_buckets=8)
    a.init(NullContext(), loader)
    a.put(Windowed("old", Window(0, 10)), 1)
    loader.save(a)
    old_bucket = a.bucket_of("old")
    other = next(k for k in (f"k{i}" for i in range(100)) if a.bucket_of(k) != old_bucket)

    b = InMemorySessionStore("ss", 100, segment_interval_ms=50, num_buckets=8)
    b.init(NullContext(), loader)
    b.restore_meta(loader.load_meta("ss"))
    b.put(Windowed(other, Window(500, 500)), 2)  # old's bucket is not loaded yet
    assert old_bucket not in b._buckets
    assert b.fetch("old") == []
    # loading the bucket removed the expired segment and marked the bucket for write-back
    assert b.dirty_buckets()[old_bucket] is None
    loader.save(b)
    assert old_bucket not in loader.bucket_ids("ss")


def test_segments_expire_from_a_bucket_restored_in_bulk_while_it_is_packed() -> None:
    """A bucket that a bulk restore filled from nothing holds its entries packed; stream time
    that then moves past their segments expires them as it would in a built bucket."""
    # retention 100, segments of 50 ms, one bucket
    ws = InMemoryWindowStore("ws", 100, 10, segment_interval_ms=50, num_buckets=1)
    ws.init(NullContext())
    ws.restore_columns(["a", "b", "c"], np.array([100, 150, 210]), [1, 2, 3], [100, 150, 210])
    assert ws.dirty_buckets() and all(isinstance(d, PackedBucket)
                                      for d in ws.dirty_buckets().values())
    assert segments_held(ws) == {2, 3, 4}
    ws.restore_columns(["d"], np.array([300]), [4], [300])  # observed 300: segment 4 oldest live
    assert segments_held(ws) == {4, 6}
    assert [(kv.key.key, kv.key.window.start, kv.value) for kv in ws.all()] == [
        ("c", 210, 3), ("d", 300, 4)]
