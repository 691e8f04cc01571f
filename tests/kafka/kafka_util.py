"""Producing and reading test records on the embedded broker."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer

from kspark.hashing import kafka_partition
from kspark.kafka.admin import TopicSpec, ensure_topics
from kspark.kafka.reader import read_to_end

#: record timestamps start here (Kafka clients treat a timestamp of 0 as "now")
BASE_MS = 1_700_000_000_000


def create(bootstrap: str, topic: str, partitions: int = 4, **config: str) -> None:
    ensure_topics(bootstrap, [TopicSpec(topic, partitions, dict(config))])


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[Any, Any, int]],
    partitions: int = 4,
    raw: bool = False,
) -> list[int]:
    """Produce ``(key, value, timestamp)`` records (str keys, JSON values unless ``raw``), each
    to the partition of its key; returns the partitions, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    parts = []
    for key, value, ts in records:
        k = None if key is None else str(key).encode()
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
