"""The per-batch task runner (what each Spark task executes) against the test driver, without
Spark: state restored from durable storage every batch must give the driver's results."""

from __future__ import annotations

import logging
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark.config import StreamsConfig
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.task import SourceRecord

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "spark"))
from spark_harness import run_driver
from test_spark_differential import (
    COUNTS_FLUSHES,
    INPUT_SERDES,
    OUTPUTS,
    REKEYED_UPDATES,
    UNCACHED,
    final_table,
    random_input,
    topology,
)


def run_batches(topo, inputs, batches: int, settings: dict | None = None):
    """All sub-topologies, each input split into ``batches`` batches; repartition records are
    handed to the downstream task in the same batch, as the Spark stages do."""
    config = StreamsConfig.of(settings, application_id="batch-test")
    subs = topo.sub_topologies()
    states = {s.id: DictTaskState() for s in subs}
    encoded = {}
    for topic, records in inputs.items():
        ks, vs = INPUT_SERDES[topic]
        encoded[topic] = [SourceRecord(topic, 0, i, ts, ks.serialize(k), vs.serialize(v))
                          for i, (k, v, ts) in enumerate(records)]
    outputs = []
    for b in range(batches):
        pending = []
        for records in encoded.values():
            size = -(-len(records) // batches)
            pending.extend(records[b * size:(b + 1) * size])
        offsets = 0
        while pending:
            by_sub = {}
            for rec in pending:
                by_sub.setdefault(topo.sub_topology_for_topic(rec.topic).id, []).append(rec)
            pending = []
            for sub in subs:
                if sub.id not in by_sub:
                    continue
                recs = sorted(by_sub[sub.id], key=lambda r: (r.topic, r.offset))
                result = run_task_batch(topo, sub, 0, recs, states[sub.id], config)
                for out in result.output:
                    if out.topic in topo.internal_topics:
                        pending.append(SourceRecord(out.topic, 0, offsets, out.timestamp,
                                                    out.key, out.value))
                        offsets += 1
                    else:
                        outputs.append(out)
    decoded = {t: [] for t in OUTPUTS}
    for out in outputs:
        ks, vs = OUTPUTS[out.topic]
        decoded[out.topic].append((ks.deserialize(out.key), vs.deserialize(out.value),
                                   out.timestamp))
    return decoded


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), batches=st.integers(1, 6))
def test_batches_with_caching_off_give_the_drivers_update_stream(seed, batches):
    inputs = random_input(seed, n=120)
    expected = run_driver(topology(False), inputs, OUTPUTS, INPUT_SERDES)
    actual = run_batches(topology(False), inputs, batches)
    for topic in ("session-count", "session-pages", "window-count", *UNCACHED,
                  *REKEYED_UPDATES, *COUNTS_FLUSHES):
        assert actual[topic] == expected[topic], topic
    # re-keyed outputs: per-key sequences equal (the driver interleaves topics per record)
    for topic in ("page-count", "region-total", "page-visits"):
        assert final_table(actual[topic], topic) == final_table(expected[topic], topic), topic


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), batches=st.integers(1, 6))
def test_batches_with_caching_on_give_the_drivers_final_tables(seed, batches):
    inputs = random_input(seed, n=120)
    expected = run_driver(topology(True), inputs, OUTPUTS, INPUT_SERDES)
    actual = run_batches(topology(True), inputs, batches)
    for topic in OUTPUTS:
        if topic not in REKEYED_UPDATES and topic not in COUNTS_FLUSHES:
            assert final_table(actual[topic], topic) == final_table(expected[topic], topic), topic


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), batches=st.integers(1, 4), caching=st.booleans())
def test_batches_with_one_bucket_in_memory_give_the_drivers_results(seed, batches, caching):
    # every store holds one of its 8 buckets at a time: the others wait in spill files
    inputs = random_input(seed, n=120)
    expected = run_driver(topology(caching), inputs, OUTPUTS, INPUT_SERDES)
    actual = run_batches(topology(caching), inputs, batches,
                         {"state.buckets": 8, "state.buckets.in.memory": 1})
    for topic in OUTPUTS:
        if not caching or topic not in (*REKEYED_UPDATES, *COUNTS_FLUSHES):
            assert final_table(actual[topic], topic) == final_table(expected[topic], topic), topic
