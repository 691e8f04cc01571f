"""The store-reuse example (examples/reuse_window_store) on the test driver: B answers from A's
store what A's own store says."""

from __future__ import annotations

import json
import os
import sys

import pytest

from kspark import TopologyTestDriver, serdes
from kspark.state.internals.changelog import ChangelogCodec

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "reuse_window_store")


@pytest.fixture
def example():
    sys.path.insert(0, EXAMPLE)
    try:
        import app_a
        import common

        yield common, app_a
    finally:
        sys.path.remove(EXAMPLE)
        for name in ("app_a", "common"):
            sys.modules.pop(name, None)


def test_b_answers_the_last_seven_days_from_a_store(example, app_dir):
    common, app_a = example
    DAY = common.DAY
    events_dir = os.path.join(app_dir, "events")
    app_a.append_events(events_dir, days=12, users=4, per_user_day=3, seed=1)
    rows = []
    for name in sorted(os.listdir(events_dir)):
        with open(os.path.join(events_dir, name)) as f:
            rows += [json.loads(line) for line in f]
    a = common.counter_topology()
    with TopologyTestDriver(a) as driver:
        pipe = driver.create_input_topic("events", serdes.String(), serdes.Json())
        for row in rows:
            pipe.pipe_input(row["user"], row, row["ts"])
        a_store = driver.get_window_store(common.STORE).all()
        changelog = driver.changelogs[common.STORE]
    codec = ChangelogCodec.for_builder(a.store_builders[common.STORE])
    with TopologyTestDriver(common.reader_topology()) as b:
        for key, value, ts in changelog:
            b.pipe_raw(common.A_CHANGELOG, codec.encode_key(key), codec.encode_value(value), ts)
        assert b.get_window_store(common.STORE).all() == a_store
        key = common.store_key("user-01", "view")
        now = rows[-1]["ts"]
        b.create_input_topic("questions", serdes.String(), serdes.Json()).pipe_input(key, {}, now)
        answer = b.create_output_topic("answers", serdes.String(), serdes.Json()).read_value()
    today = now - now % DAY
    assert answer == [[kv.key.window.start, kv.value] for kv in a_store
                      if kv.key.key == key and today - 6 * DAY <= kv.key.window.start <= today]
    assert answer
