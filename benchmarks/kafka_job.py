"""The main job of the Kafka benchmarks on both engines: its topics, the clicks' producer, the
kspark app and the Kafka Streams app (``benchmarks/kafka-streams-anchor/``), and the side-by-side
table of their figures."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from kafka_streams_anchor import KafkaStreamsApp

from kspark import io
from kspark.examples.sessions import topology
from kspark.hashing import kafka_partition
from kspark.kafka import TopicSpec, ensure_topics
from kspark.spark import StreamsApp

PARTITIONS = 4
ENGINES = {"kspark": "kspark", "kstreams": "Kafka Streams"}
#: each engine's input (latency) and output topics
TOPICS = {
    "kspark": ("clicks", "session-counts", "session-pages"),
    "kstreams": ("kstreams-clicks", "kstreams-session-counts", "kstreams-session-pages"),
}


def make_producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": 10, "queue.buffering.max.messages": 1_000_000})


def send(producer: Any, user: str, click: dict, ts: int, topic: str = "clicks") -> None:
    key = user.encode()
    while True:
        try:
            producer.produce(topic, json.dumps(click).encode(), key, timestamp=ts,
                             partition=kafka_partition(key, PARTITIONS))
            return
        except BufferError:
            producer.poll(0.01)


#: extra kspark config of the app (``--conf k=v``)
CONFIG: dict[str, str] = {}


def kspark_app(bootstrap: str, spark: Any, workdir: str, emit_on_close: bool,
         per_trigger: int | None) -> StreamsApp:
    topics = {
        "clicks": io.kafka(bootstrap, max_records_per_trigger=per_trigger),
        "session-counts": io.kafka(bootstrap),
        "session-pages": io.kafka(bootstrap),
    }
    return StreamsApp(topology(emit_on_close=emit_on_close), "bench", topics, spark=spark,
                      checkpoint_dir=os.path.join(workdir, "checkpoint"), config=CONFIG)


def kstreams_app(args: argparse.Namespace, bootstrap: str, workdir: str, application_id: str,
              input_topic: str, emit_on_close: bool) -> KafkaStreamsApp:
    _, counts, pages = TOPICS["kstreams"]
    ensure_topics(bootstrap, [TopicSpec(counts, PARTITIONS), TopicSpec(pages, PARTITIONS)])
    return KafkaStreamsApp(bootstrap, application_id, workdir, input_topic, counts, pages,
                           emit_on_close, commit_interval_ms=args.ks_commit_ms,
                           threads=args.ks_threads, cache_max_bytes=args.ks_cache_bytes)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from kspark.kafka.reader import OffsetLookup

    lookup = OffsetLookup(bootstrap)
    try:
        return {p: e for (_, p), e in lookup.latest(lookup.topic_partitions([topic])).items()}
    finally:
        lookup.close()


def side_by_side(rows: list[tuple[str, dict[str, str]]], engines: list[str],
                 names: dict[str, str] = ENGINES) -> None:
    """Print ``(label, {engine: text})`` rows as a table with a column per engine (headed by
    its name in ``names``)."""
    width = max(len(label) for label, _ in rows)
    cols = [max(len(names[e]), *(len(r.get(e, "")) for _, r in rows)) for e in engines]
    print(f"  {'':<{width}}  " + "  ".join(f"{names[e]:>{w}}" for e, w in zip(engines, cols)))
    for label, row in rows:
        print(f"  {label:<{width}}  "
              + "  ".join(f"{row.get(e, '-'):>{w}}" for e, w in zip(engines, cols)))
