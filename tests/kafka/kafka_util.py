"""Producing and reading test records on the embedded broker."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

from confluent_kafka import Producer

from kspark import serdes
from kspark.hashing import kafka_partition
from kspark.kafka.admin import TopicSpec, ensure_topics
from kspark.kafka.reader import read_to_end

#: record timestamps start here (Kafka clients treat a timestamp of 0 as "now")
BASE_MS = 1_700_000_000_000
#: the sessions app's output topics and their key and value serdes
WINDOWED = serdes.SessionWindowed(serdes.String())
OUTPUTS = {"session-counts": serdes.Long(), "session-pages": serdes.Json()}


def create(bootstrap: str, topic: str, partitions: int = 4, **config: str) -> None:
    ensure_topics(bootstrap, [TopicSpec(topic, partitions, dict(config))])


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[Any, Any, int]],
    partitions: int = 4,
    raw: bool = False,
    config: dict[str, Any] | None = None,
) -> list[int]:
    """Produce ``(key, value, timestamp)`` records (keys as str unless bytes, values as JSON
    unless ``raw``), each to the partition of its key, with librdkafka settings ``config``
    (security...); returns the partitions, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         **(config or {})})
    parts = []
    for key, value, ts in records:
        k = None if key is None else key if isinstance(key, bytes) else str(key).encode()
        v = value if raw else json.dumps(value).encode()
        part = 0 if k is None else kafka_partition(k, partitions)
        producer.produce(topic, v, k, partition=part, timestamp=ts)
        parts.append(part)
    assert producer.flush(30) == 0
    return parts


def consume(bootstrap: str, topic: str) -> list[Any]:
    """Every message of ``topic`` now (confluent-kafka ``Message`` objects)."""
    return list(read_to_end(bootstrap, topic))


def decoded(bootstrap: str, topic: str, key_serde: Any, value_serde: Any) -> list[tuple]:
    return [
        (key_serde.deserialize(m.key()), value_serde.deserialize(m.value()), m.timestamp()[1])
        for m in consume(bootstrap, topic)
    ]


def sessions_clicks(n: int, seed: int, base_ms: int = BASE_MS) -> list[tuple[str, dict, int]]:
    """``n`` clicks of 12 users for the sessions app, timestamps from ``base_ms``. (The broker
    deletes records older than its retention, 7 days, at its first retention check 30 s after
    it started and every 5 minutes after: a test whose topics must outlive those checks gives
    a recent ``base_ms``.)"""
    from kspark.examples.sessions import generate_clicks

    return [(user, click, base_ms + ts)
            for user, click, ts in generate_clicks(n, users=12, seed=seed)]


def driver_outputs(clicks: list[tuple[str, dict, int]], parts: list[int],
                   metrics: dict[str, int] | None = None) -> dict[str, list]:
    """The sessions topology's outputs on the test driver, one driver per input partition (a
    task per partition, as on Spark), in a canonical order; the drivers' metrics summed into
    ``metrics`` if given."""
    from kspark.examples.sessions import topology
    from kspark.testing import TopologyTestDriver

    by_partition = defaultdict(list)
    for record, part in zip(clicks, parts):
        by_partition[part].append(record)
    out: dict[str, list] = {topic: [] for topic in OUTPUTS}
    for records in by_partition.values():
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in records:
                pipe.pipe_input(user, click, ts)
            for topic, value_serde in OUTPUTS.items():
                reader = driver.create_output_topic(topic, WINDOWED, value_serde)
                out[topic] += [(r.key, r.value, r.timestamp)
                               for r in reader.read_records_to_list()]
            if metrics is not None:
                for name, value in driver.metrics().items():
                    metrics[name] = metrics.get(name, 0) + value
    return {topic: sorted(rows, key=repr) for topic, rows in out.items()}


def kafka_outputs(bootstrap: str, prefix: str) -> dict[str, list]:
    """The sessions app's read_committed outputs on Kafka (topics ``prefix`` + name), in the
    order of :func:`driver_outputs`."""
    return {
        topic: sorted(decoded(bootstrap, prefix + topic, WINDOWED, value_serde), key=repr)
        for topic, value_serde in OUTPUTS.items()
    }


def wait_while_running(proc: Any, done: Any, timeout: float = 240.0) -> None:
    """Poll ``done()`` each second until it holds; fail (with the process's output) if the
    process ``proc`` ends first, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the app did not get there in time"
        time.sleep(1)
