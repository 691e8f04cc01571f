"""Stores with limited memory (``state.buckets.in.memory``): a task holds only some buckets of
each store at once, the changed ones it lets go of wait in spill files until the batch is
written, and every result (forwarded records, changelogs, durable state, counters) equals
that of a task holding everything."""

from __future__ import annotations

import logging
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_lines import aborts
from test_session_fast_path import (
    J,
    S,
    examples,
    input_batches,
    records_strategy,
    state_of,
    topology,
)

from kspark import Stores, Topology, serdes
from kspark.config import StreamsConfig
from kspark.examples import click_counter
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.spill import SpillingState
from kspark.runtime.task import SourceBatch, SourceRecord
from kspark.state.internals.changelog import ChangelogCodec
from kspark.windows import Window, Windowed

UNLIMITED = {"state.buckets": 4}
LIMITED = {**UNLIMITED, "state.buckets.in.memory": 1}


@pytest.fixture(autouse=True)
def _quiet():
    drops = logging.getLogger("kspark.task")  # a warning per batch with dropped records
    level = drops.level
    drops.setLevel(logging.ERROR)
    yield
    drops.setLevel(level)


def run(topo, batches, settings_=None, fast=True, logged=False, columns=True):
    """Outputs, changelogs, counters and durable state of running ``batches`` in order, and
    the fast path's aborts."""
    config = StreamsConfig.of(settings_, application_id="limited")
    sub = topo.sub_topologies()[0]
    state = DictTaskState()
    outputs, counters = [], []
    with aborts() as aborted:
        for batch in batches:
            records = SourceBatch.from_records(batch) if columns else batch
            result = run_task_batch(topo, sub, 0, records, state, config,
                                    wall_clock=lambda: 0, fast_path=fast,
                                    changelog_stores=None if logged else ())
            outputs.append([(o.topic, o.key, o.value, o.timestamp) for o in result.output])
            outputs.append(result.changelog)
            counters.append(dict(result.metrics.counters))
    return outputs, counters, state_of(state), aborted.messages


def without_spill_counts(counters):
    return [{k: v for k, v in c.items() if k != "state-buckets-spilled"} for c in counters]


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=records_strategy, cuts=st.lists(st.integers(1, 120), max_size=4),
       gap=st.integers(1, 40), grace=st.integers(0, 40), on_close=st.booleans(),
       caching=st.booleans(), kind=st.sampled_from(["count", "list"]), logged=st.booleans(),
       fast=st.booleans())
def test_session_aggregation_with_one_bucket_in_memory_equals_unlimited(
        steps, cuts, gap, grace, on_close, caching, kind, logged, fast):
    batches = input_batches(steps, cuts, gap, 3)
    topo = topology(gap, grace, on_close, caching, kind)
    expected = run(topo, batches, UNLIMITED, fast=False, logged=logged)
    actual = run(topo, batches, LIMITED, fast=fast, logged=logged)
    assert actual[3] == []
    assert actual[0] == expected[0]
    assert without_spill_counts(actual[1]) == expected[1]
    assert actual[2] == expected[2]


def clicks(n: int, keys: int) -> list[SourceRecord]:
    return [SourceRecord("in", 0, i, 1000 * (i // 3) + i % 3, S.serialize(f"k{i % keys}"),
                         J.serialize(i % 5)) for i in range(n)]


def test_buckets_are_spilled_and_each_batch_path_reads_them_back():
    recs = clicks(600, 40)
    batches = [recs[:200], recs[200:400], recs[400:]]
    for on_close in (True, False):
        topo = topology(5_000, 1_000, on_close, True, "count")
        expected = run(topo, batches, UNLIMITED, fast=False, logged=True)
        for fast in (True, False):
            actual = run(topo, batches, LIMITED, fast=fast, logged=True)
            assert actual[3] == []
            assert all(c.get("state-buckets-spilled", 0) > 0 for c in actual[1])
            assert actual[0] == expected[0]
            assert actual[2] == expected[2]


def test_processor_api_key_value_store_and_punctuation_with_one_bucket_in_memory():
    topo = click_counter.topology("in", "out")
    recs = [SourceRecord("in", 0, i, ts, S.serialize(user), J.serialize(click))
            for i, (user, click, ts) in enumerate(click_counter.generate_clicks(900, users=30))]
    batches = [recs[:300], recs[300:600], recs[600:]]
    expected = run(topo, batches, UNLIMITED, columns=False)
    actual = run(topo, batches, LIMITED, columns=False)
    assert sum(c.get("state-buckets-spilled", 0) for c in actual[1]) > 0
    assert actual[0] == expected[0]
    assert actual[2] == expected[2]


def test_a_read_only_store_restores_with_one_bucket_in_memory():
    day = 86_400_000
    topo = Topology()
    topo.add_read_only_state_store(
        Stores.window_store("counts", 30 * day, day, key_serde=serdes.String()), "changelog")
    codec = ChangelogCodec("window", serdes.String(), None, day)
    recs = []
    for i in range(400):
        start = (i // 40) * day
        key = codec.encode_key(Windowed(f"user-{i % 37}", Window(start, start + day)))
        value = None if i % 11 == 0 else codec.encode_value(i)
        recs.append(SourceRecord("changelog", 0, i, start + i, key, value))
    batches = [recs[:250], recs[250:]]
    expected = run(topo, batches, UNLIMITED)
    actual = run(topo, batches, LIMITED)
    assert expected[3] == actual[3] == []
    assert sum(c.get("state-buckets-spilled", 0) for c in actual[1]) > 0
    assert actual[2] == expected[2]
    assert len(actual[2][1]) == 4  # every bucket holds windows


def test_a_failing_batch_leaves_the_durable_state_as_it_was():
    from kspark import SessionWindows, StreamsBuilder

    b = StreamsBuilder()

    def agg(key, value, total):
        if value == 13:
            raise ValueError("unlucky")
        return total + value

    (b.stream("in", S, J).group_by_key(S, J)
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5))
     .aggregate(lambda: 0, agg, lambda k, x, y: x + y).to_stream()
     .to("out", serdes.SessionWindowed(S), J))
    topo = b.build()
    sub = topo.sub_topologies()[0]
    config = StreamsConfig.of(LIMITED)
    state = DictTaskState()
    first = [SourceRecord("in", 0, i, i, S.serialize(f"k{i}"), J.serialize(1)) for i in range(20)]
    run_task_batch(topo, sub, 0, SourceBatch.from_records(first), state, config)
    before = (state.meta, dict(state.buckets))
    # the last record fails, after the vectorised path changed (and let go of) every bucket
    second = [SourceRecord("in", 0, 20 + i, 20 + i, S.serialize(f"k{i}"),
                           J.serialize(13 if i == 19 else 2)) for i in range(20)]
    with pytest.raises(Exception, match="offset 39"):
        run_task_batch(topo, sub, 0, SourceBatch.from_records(second), state, config)
    assert (state.meta, dict(state.buckets)) == before


def test_spilling_state_keeps_the_latest_version_until_written(tmp_path):
    inner = DictTaskState()
    inner.save_bucket("s", 0, pickle.dumps({"a": 1}))
    inner.save_bucket("s", 1, pickle.dumps({"b": 1}))
    spill = SpillingState(inner, str(tmp_path))
    spill.spill("s", 0, {"a": 2})
    spill.spill("s", 0, {"a": 3})
    spill.spill("s", 1, None)
    spill.spill("s", 2, {"c": 1})
    assert spill.load("s", 0) == {"a": 3}
    assert spill.load("s", 1) is None
    assert inner.load("s", 0) == {"a": 1}  # nothing written before the batch ends
    spill.save_bucket("s", 2, pickle.dumps({"c": 2}))  # written since: the spill is stale
    spill.write_spilled()
    assert inner.load("s", 0) == {"a": 3}
    assert inner.load("s", 1) is None
    assert inner.load("s", 2) == {"c": 2}
    assert spill.spills == 3 and list(tmp_path.iterdir()) == []
    spill.spill("s", 0, {"a": 4})
    spill.discard()
    assert inner.load("s", 0) == {"a": 3} and list(tmp_path.iterdir()) == []
