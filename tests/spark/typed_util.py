"""The sessions example on the test driver and typed rows read back from Spark, compared
(for tests/spark/test_spark_typed_results.py and test_spark_table_sinks.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from kspark import serdes
from kspark.examples.sessions import generate_clicks
from kspark.hashing import kafka_partition

PARTITIONS = 2
WINDOWED = serdes.SessionWindowed(serdes.String())
OUTPUTS = {"session-counts": serdes.Long(), "session-pages": serdes.Json()}


def clicks(n: int = 300, seed: int = 7) -> list[tuple[str, dict, int]]:
    return list(generate_clicks(n, users=12, seed=seed, late_fraction=0.03))


def partition_of(user: str) -> int:
    """The partition a memory topic of :data:`PARTITIONS` partitions gives the user's clicks."""
    return kafka_partition(user.encode(), PARTITIONS)


def driver_sessions(records: list[tuple[str, dict, int]]) -> dict[str, list[tuple]]:
    """Each output topic's sessions on the test driver, one driver per input partition (a task
    per partition, as on Spark): sorted ``(key, start_ms, end_ms, value, timestamp_ms)``."""
    from kspark.examples.sessions import topology
    from kspark.testing import TopologyTestDriver

    by_partition: dict[int, list] = defaultdict(list)
    for record in records:
        by_partition[partition_of(record[0])].append(record)
    out: dict[str, list[tuple]] = {topic: [] for topic in OUTPUTS}
    for part in sorted(by_partition):
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in by_partition[part]:
                pipe.pipe_input(user, click, ts)
            for topic, value_serde in OUTPUTS.items():
                reader = driver.create_output_topic(topic, WINDOWED, value_serde)
                out[topic] += [_canonical(r.key.key, r.key.window.start, r.key.window.end,
                                          r.value, r.timestamp)
                               for r in reader.read_records_to_list()]
    return {topic: sorted(rows, key=repr) for topic, rows in out.items()}


def driver_store(records: list[tuple[str, dict, int]], name: str) -> dict[tuple, Any]:
    """What session store ``name`` holds on the test driver (one driver per input partition)
    after ``records``: ``(key, start_ms, end_ms)`` -> value."""
    from kspark.examples.sessions import topology
    from kspark.testing import TopologyTestDriver

    by_partition: dict[int, list] = defaultdict(list)
    for record in records:
        by_partition[partition_of(record[0])].append(record)
    kept: dict[tuple, Any] = {}
    for part in sorted(by_partition):
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in by_partition[part]:
                pipe.pipe_input(user, click, ts)
            store = driver.get_session_store(name)
            users = sorted({r[0] for r in by_partition[part]})
            for kv in store.find_sessions_range(users[0], users[-1], 0, 2**62):
                kept[(kv.key.key, kv.key.window.start, kv.key.window.end)] = kv.value
    return kept


def _canonical(key: str, start: int, end: int, value: Any, ts: int) -> tuple:
    return (key, start, end, json.dumps(value) if isinstance(value, list) else value, ts)


def spark_sessions(frame: Any) -> list[tuple]:
    """Sorted ``(key, start_ms, end_ms, value, timestamp_ms)`` of typed session rows, the
    milliseconds taken from the timestamp columns (and checked against the ``_ms`` ones)."""
    from pyspark.sql import functions as F

    rows = frame.select(
        "key", F.unix_millis("window_start").alias("s"), F.unix_millis("window_end").alias("e"),
        "window_start_ms", "window_end_ms", "value", F.unix_millis("timestamp").alias("t"),
        "timestamp_ms").collect()
    out = []
    for r in rows:
        assert (r.s, r.e, r.t) == (r.window_start_ms, r.window_end_ms, r.timestamp_ms)
        value = json.dumps(json.loads(r.value)) if isinstance(r.value, str) else r.value
        out.append((r.key, r.s, r.e, value, r.t))
    return sorted(out, key=repr)
