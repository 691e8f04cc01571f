"""``app.output(topic)`` of a Kafka sink: the topic's committed records, decoded into typed
columns, as the test driver has them."""

from __future__ import annotations

import json
import os

import pytest
from kafka_app_process import sessions_app
from kafka_util import create, driver_outputs, produce, sessions_clicks

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_output_of_a_kafka_sink_is_its_committed_records_typed(spark, app_dir, bootstrap,
                                                                 topic):
    prefix = f"{topic}."
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = sessions_clicks(300, seed=5)
    parts = produce(bootstrap, f"{prefix}clicks", clicks)
    app = sessions_app(bootstrap, prefix, os.path.join(app_dir, "ck"), None, spark=spark)
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    expected = driver_outputs(clicks, parts)
    for name, rows in expected.items():
        frame = app.output(name)
        types = dict(frame.dtypes)
        assert (types["key"], types["window_start"], types["timestamp_ms"]) == (
            "string", "timestamp", "bigint")
        got = sorted(((r.key, r.window_start_ms, r.window_end_ms),
                      json.loads(r.value) if isinstance(r.value, str) else r.value,
                      r.timestamp_ms) for r in frame.collect())
        assert got == sorted(((k.key, k.window.start, k.window.end), v, ts)
                             for k, v, ts in rows)
