"""A read-only window store restores a task's batch of changelog records in bulk, from the
changelog bytes as columns (``ChangelogRestorer.process_serialized``): the store ends exactly
as restoring the records one by one leaves it, and bytes that do not fit the store's layout
fail the same way, naming the record."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_session_fast_path import examples, state_of

from kspark import Stores, Topology, TopologyTestDriver, serdes
from kspark.config import StreamsConfig
from kspark.errors import StreamsError
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.task import SourceBatch, SourceRecord
from kspark.state.internals.changelog import ChangelogCodec
from kspark.state.internals.packed import PackedBucket
from kspark.state.internals.segments import default_segment_interval_ms, min_live_segment
from kspark.state.window import InMemoryWindowStore
from kspark.windows import Window, Windowed

WINDOW = 30_000
STEP = WINDOW // 2
RETENTION = 6 * WINDOW
TOPIC = "a-counts-changelog"
CODEC = ChangelogCodec("window", serdes.String(), serdes.Long(), WINDOW)


def reader(buckets: int, most: int | None = None) -> tuple[Topology, StreamsConfig]:
    topo = Topology()
    topo.add_read_only_state_store(
        Stores.window_store("counts", RETENTION, WINDOW, key_serde=serdes.String(),
                            value_serde=serdes.Long()),
        TOPIC,
    )
    return topo, StreamsConfig.of({"state.buckets": buckets, "task.batch.max.records": most},
                                  application_id="reader")


def restore(buckets: int, batches: list[list[SourceRecord]], fast: bool,
            most: int | None = None) -> tuple:
    """Durable state after restoring ``batches`` (without expired segments: a bucket that a
    batch does not write keeps them until it is next loaded, and its size gauge counts them),
    and how many records took the bulk path (``most`` at a time)."""
    topo, config = reader(buckets, most)
    sub = topo.sub_topologies()[0]
    state = DictTaskState()
    bulk = 0
    for batch in batches:
        records = SourceBatch.from_records(batch) if fast else batch
        result = run_task_batch(topo, sub, 0, records, state, config, wall_clock=lambda: 0,
                                fast_path=fast)
        bulk += result.fast_records
    meta, data = state_of(state)
    data = {bucket: built(segments) for bucket, segments in data.items()}
    live = min_live_segment(meta["stores"]["counts"]["observed_stream_time"], RETENTION,
                            default_segment_interval_ms(RETENTION))
    # the size gauge counts what each bucket durably holds, expired segments included ...
    assert meta["store_sizes"]["counts"] == {bucket: count(segments)
                                             for (_, bucket), segments in data.items()}
    data = {bucket: {seg: keys for seg, keys in segments.items() if seg >= live}
            for bucket, segments in data.items()}
    data = {bucket: segments for bucket, segments in data.items() if segments}
    # ... so it is compared as the live data's count
    meta["store_sizes"]["counts"] = {bucket: count(segments)
                                     for (_, bucket), segments in data.items()}
    return (meta, data), bulk


def count(segments: dict) -> int:
    """Windows held in a built bucket's segments."""
    return sum(len(subs) for keys in segments.values() for subs in keys.values())


def built(data: Any) -> Any:
    """A bucket's data as the store holds it once used (a packed bucket built)."""
    if not isinstance(data, PackedBucket):
        return data
    store = InMemoryWindowStore("counts", RETENTION, WINDOW, num_buckets=1)
    return store._unpack(0, data)


def record(offset: int, key: str, start: int, value: int | None, ts: int) -> SourceRecord:
    data = CODEC.encode_key(Windowed(key, Window(start, start + WINDOW)))
    return SourceRecord(TOPIC, 0, offset, ts, data,
                        None if value is None else CODEC.encode_value(value))


changelogs = st.lists(
    st.tuples(st.sampled_from(["a", "ä", ""]), st.integers(0, 20),
              st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), st.integers(0, 9)),
    min_size=1, max_size=60,
)


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(changelog=changelogs, cuts=st.lists(st.integers(1, 60), max_size=3),
       buckets=st.sampled_from([1, 3]), tombstones=st.booleans(),
       most=st.one_of(st.none(), st.integers(1, 20)))
def test_bulk_restore_leaves_the_store_as_one_by_one(changelog, cuts, buckets, tombstones, most):
    """Windows written, overwritten and removed (tombstones), in segments (of 3 windows'
    time) that expire as stream time moves, over several batches: the same durable state
    either way."""
    writes = [(key, slot * STEP, value if tombstones or value is not None else i,
               slot * STEP + lag) for i, (key, slot, value, lag) in enumerate(changelog)]
    recs = [record(i, *write) for i, write in enumerate(writes)]
    bounds = sorted({0, len(recs), *(c for c in cuts if c < len(recs))})
    batches = [recs[a:b] for a, b in pairwise(bounds)]
    expected, _ = restore(buckets, batches, fast=False)
    actual, bulk = restore(buckets, batches, fast=True, most=most)
    assert bulk == len(recs)
    assert actual == expected
    # and what the store then shows is the changelog's meaning: each window's last write,
    # unless a tombstone or older than the newest window start by the retention or more
    last = {(key, start): (value, ts) for key, start, value, ts in writes}
    newest = max(start for _, start, _, _ in writes)
    with TopologyTestDriver(reader(buckets)[0]) as driver:
        for rec in recs:
            driver.pipe_raw(TOPIC, rec.key, rec.value, rec.timestamp)
        shown = driver.get_window_store("counts").fetch_all_with_timestamps(None, None)
    assert sorted((kv.key.key, kv.key.window.start, kv.value.value, kv.value.timestamp)
                  for kv in shown) == sorted(
        (key, start, value, ts) for (key, start), (value, ts) in last.items()
        if value is not None and start > newest - RETENTION
    )


def test_bytes_that_do_not_fit_fail_naming_the_record():
    good = [record(i, f"user-{i}", 0, i, i) for i in range(5)]
    short = SourceRecord(TOPIC, 0, 7, 7, b"abc", struct.pack(">q", 1))
    with pytest.raises(StreamsError, match=r"offset 7.*shorter than the layout"):
        restore(1, [[*good, short]], fast=True)
    bad_value = SourceRecord(TOPIC, 0, 9, 9, good[0].key, b"\x00")
    with pytest.raises(StreamsError, match=r"offset 9.*Long"):
        restore(1, [[*good, bad_value]], fast=True)


def test_a_bucket_restored_from_nothing_is_kept_packed_until_used():
    """The first batch leaves every bucket packed in durable state; a later batch that writes
    to some buckets writes those back built (and equal to a one-by-one restore), the others
    stay packed."""
    first = [record(i, f"user-{i}", 0, i, i) for i in range(40)]
    later = [record(40, "user-3", STEP, 7, STEP)]
    topo, config = reader(4)
    sub = topo.sub_topologies()[0]
    state = DictTaskState()
    run_task_batch(topo, sub, 0, SourceBatch.from_records(first), state, config,
                   wall_clock=lambda: 0)
    _, data = state_of(state)
    assert len(data) == 4 and all(isinstance(d, PackedBucket) for d in data.values())
    assert sum(len(d) for d in data.values()) == 40
    run_task_batch(topo, sub, 0, SourceBatch.from_records(later), state, config,
                   wall_clock=lambda: 0)
    _, after = state_of(state)
    touched = [k for k, d in after.items() if not isinstance(d, PackedBucket)]
    assert len(touched) == 1
    expected_bucket = built(data[touched[0]])
    expected_bucket[0]["user-3"][(STEP, 0)] = (7, STEP)  # the new window beside the old
    assert after[touched[0]] == expected_bucket
    expected, _ = restore(4, [first, later], fast=False)
    assert restore(4, [first, later], fast=True)[0] == expected


def test_keys_that_cannot_be_ordered_fail_when_restored():
    store = InMemoryWindowStore("counts", RETENTION, WINDOW)
    with pytest.raises(TypeError, match=r"store 'counts': keys .* one comparable type"):
        store.restore_columns(["a", 1], np.array([0, 0]), [1, 2], [0, 0])
