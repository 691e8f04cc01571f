"""Seed 004 across languages, on the embedded Apache Kafka broker (docs/semantics.md §7).

A Java Kafka Streams 4.3.1 application (``tests/kafka/java_streams.py``, one JVM for the module)
counts events per user and event type in 24-hour windows kept for 30 days, in its store
"event-counts", and so writes that store's changelog. A kspark application attaches the
changelog as a read-only store, without a topic of its own (checked by listing the topics), and
answers the same window fetches as the Java application's own interactive queries while the Java
application keeps counting; restarted from scratch, it restores the same view. The other way
round, a Java application attaches a kspark application's changelog with Kafka Streams' own
``Topology#addReadOnlyStateStore``, restores it (also again after a restart, through Kafka
Streams' state restoration) and answers the same fetches as kspark's interactive queries. A
changelog in another store's layout stops kspark with an error naming store, topic, partition
and offset (docs/semantics.md §8).
"""

from __future__ import annotations

import os
import random
import re
import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from java_streams import JavaStreams, oracle_jar, wait_until
from kafka_util import consume, create, produce

from kspark import (
    Materialized,
    Stores,
    StreamsBuilder,
    TimeWindows,
    Topology,
    Window,
    Windowed,
    io,
    serdes,
)
from kspark.hashing import kafka_partition
from kspark.kafka.admin import matching_topics
from kspark.spark import StreamsApp
from kspark.state.internals.changelog import changelog_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
DAY = 86_400_000
STORE = "event-counts"
ALL = (0, 1 << 62)  # every window start
TYPES = ("view", "click", "buy")


@pytest.fixture(scope="module")
def java():
    jvm = JavaStreams(oracle_jar())
    yield jvm
    jvm.close()


def events(n: int, seed: int) -> list[tuple[str, dict, int]]:
    """``n`` events of 5 users, ascending in time over the last 9 days (the windows' grace is
    10 days on both sides, so none is late whatever order the partitions are read in)."""
    rng = random.Random(seed)
    start = int(time.time() * 1000) - 9 * DAY
    stamps = sorted(rng.randrange(start, start + 9 * DAY - 60_000) for _ in range(n))
    return [(f"user-{rng.randrange(5)}", {"type": rng.choice(TYPES)}, ts) for ts in stamps]


def expected(records: list[tuple[str, dict, int]]) -> list[tuple]:
    """``(key, window start, count, timestamp)`` per window, the timestamp being the window's
    newest event (the aggregate's timestamp in both engines), sorted."""
    windows: dict[tuple[str, int], list[int]] = defaultdict(list)
    for user, event, ts in records:
        windows[(f"{user}|{event['type']}", ts - ts % DAY)].append(ts)
    return sorted((key, start, len(stamps), max(stamps))
                  for (key, start), stamps in windows.items())


def kspark_view(app: StreamsApp) -> list[tuple]:
    """The same rows from a kspark application's interactive queries."""
    return sorted((kv.key.key, kv.key.window.start, kv.value.value, kv.value.timestamp)
                  for kv in app.store(STORE).fetch_all_with_timestamps(*ALL))


def counter() -> Topology:
    """Seed 004's counter in kspark, with the Java application's serdes."""
    b = StreamsBuilder()
    b.stream("events", serdes.String(), serdes.Json()).group_by(
        lambda user, e: f"{user}|{e['type']}", key_serde=serdes.String()
    ).windowed_by(TimeWindows.of_size_and_grace(DAY, 10 * DAY)).count(
        materialized=Materialized(STORE, retention=30 * DAY, key_serde=serdes.String(),
                                  value_serde=serdes.Long()))
    return b.build()


def reader(changelog: str) -> Topology:
    """A read-only copy of the counter's store, restored from its changelog."""
    return Topology().add_read_only_state_store(
        Stores.window_store(STORE, 30 * DAY, DAY, key_serde=serdes.String(),
                            value_serde=serdes.Long()), changelog)


def changelog_layout(bootstrap: str, changelog: str) -> tuple[dict[str, str], set[bool]]:
    """The changelog topic's cleanup policy and retention, and whether each of its records is
    in the partition of its key (``murmur2`` of the key bytes before the window start and the
    sequence number: the partition of the task that owns the key in either engine)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, changelog)]).values()
    configs = {k: v.value for k, v in future.result().items()}
    placed = {m.partition() == kafka_partition(m.key()[:-12], 2)
              for m in consume(bootstrap, changelog)}
    return {k: configs[k] for k in ("cleanup.policy", "retention.ms")}, placed


#: a window store's changelog, retained 30 days: what both engines configure
WINDOW_CHANGELOG = {"cleanup.policy": "compact,delete", "retention.ms": str(31 * DAY)}


def same_fetches(java: JavaStreams, java_app: str, kspark_app: StreamsApp,
                 keys: list[str]) -> None:
    """Each key's window fetch (start range of the last 10 days) answers alike."""
    store = kspark_app.store(STORE)
    now = int(time.time() * 1000)
    lo, hi = now - 10 * DAY, now
    for key in keys:
        theirs = [(start, count) for start, count, _ in java.fetch(java_app, key, lo, hi)]
        ours = [(kv.key, kv.value) for kv in store.fetch_range(key, lo, hi)]
        assert ours == theirs, key


def test_kspark_reads_a_kafka_streams_store_while_it_counts(spark, app_dir, bootstrap, topic,
                                                            java) -> None:
    prefix = f"{topic}."
    source, java_app = f"{prefix}events", f"{prefix}java-counter"
    log = changelog_topic(java_app, STORE)
    create(bootstrap, source, 2)
    records = events(300, seed=4)
    first, second = records[:200], records[200:]
    produce(bootstrap, source, first, partitions=2)
    java.count(java_app, bootstrap, source)

    def kspark_reader(name: str) -> StreamsApp:
        return StreamsApp(reader(log), f"{prefix}kspark-reader", {log: io.kafka(bootstrap)},
                          spark=spark, checkpoint_dir=os.path.join(app_dir, name))

    b = kspark_reader("b")
    b.start()  # while the Java application counts
    try:
        wait_until(lambda: java.fetch_all(java_app, *ALL) == expected(first), 60,
                   "the Java application counted the first events")
        b.process_all_available()
        assert kspark_view(b) == java.fetch_all(java_app, *ALL) == expected(first)
        same_fetches(java, java_app, b, sorted({k for k, *_ in expected(first)}))
        # more events while both run: the Java application counts, kspark follows its changelog
        produce(bootstrap, source, second, partitions=2)

        def agree() -> bool:
            theirs = java.fetch_all(java_app, *ALL)
            b.process_all_available()
            return theirs == kspark_view(b) == expected(records)

        wait_until(agree, 60, "kspark's view and the Java application's agree on all events")
        same_fetches(java, java_app, b, ["user-0|view", "user-3|buy", "user-9|none"])
    finally:
        b.stop()
    # kspark wrote nothing to Kafka: the only topics are the input and the Java application's
    topics = matching_topics(bootstrap, re.escape(prefix) + ".*")
    assert sorted(topics) == sorted([source, log, f"{java_app}-{STORE}-repartition"])
    assert changelog_layout(bootstrap, log) == (WINDOW_CHANGELOG, {True})
    # restarted from scratch (a new checkpoint), kspark restores the same view
    c = kspark_reader("c")
    c.start()
    try:
        c.process_all_available()
        assert kspark_view(c) == java.fetch_all(java_app, *ALL) == expected(records)
    finally:
        c.stop()
        java.stop(java_app)


def test_kafka_streams_restores_a_kspark_store(spark, app_dir, bootstrap, topic, java) -> None:
    prefix = f"{topic}."
    source, kspark_app, java_app = f"{prefix}events", f"{prefix}kspark-counter", f"{prefix}java"
    log = changelog_topic(kspark_app, STORE)
    create(bootstrap, source, 2)
    records = events(300, seed=40)
    first, second = records[:200], records[200:]
    produce(bootstrap, source, first, partitions=2)
    a = StreamsApp(counter(), kspark_app,
                   {"events": io.kafka(bootstrap, source), log: io.kafka(bootstrap)},
                   spark=spark, checkpoint_dir=os.path.join(app_dir, "a"))
    a.start()  # creates the changelog topic
    try:
        java.restore(java_app, bootstrap, log)  # while kspark counts
        a.process_all_available()
        assert kspark_view(a) == expected(first)
        wait_until(lambda: java.fetch_all(java_app, *ALL) == kspark_view(a), 60,
                   "the Java application restored kspark's store")
        same_fetches(java, java_app, a, sorted({k for k, *_ in expected(first)}))
        # kspark keeps counting; the Java application follows its changelog
        produce(bootstrap, source, second, partitions=2)
        a.process_all_available()
        assert kspark_view(a) == expected(records)
        wait_until(lambda: java.fetch_all(java_app, *ALL) == expected(records), 60,
                   "the Java application followed kspark's changelog")
        # restarted with an empty state directory, Kafka Streams restores the store from the
        # changelog up to its committed offsets (its state restoration, from the raw bytes)
        before = java.stats(java_app)
        java.stop(java_app)
        java.restore(java_app, bootstrap, log)
        wait_until(lambda: java.fetch_all(java_app, *ALL) == kspark_view(a), 60,
                   "the restarted Java application restored kspark's store")
        restored = java.stats(java_app)["restored"] - before["restored"]
        assert restored >= len(expected(records))
        # kspark's changelog: configured, and its keys partitioned, as Kafka Streams' own
        assert changelog_layout(bootstrap, log) == (WINDOW_CHANGELOG, {True})
        same_fetches(java, java_app, a, ["user-1|click", "user-4|view"])
    finally:
        a.stop()
    java.stop(java_app)


def test_a_changelog_of_another_layout_stops_kspark_naming_where(spark, app_dir, bootstrap,
                                                                 topic) -> None:
    """A session store's changelog (key, end, start) attached as the counter's window store."""
    log = f"{topic}.sessions-changelog"
    create(bootstrap, log, 1)
    session = Windowed("user-1|view", Window(3 * DAY + 5, 3 * DAY + 900))
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(log, serdes.Long().serialize(2),
                     serdes.SessionWindowed(serdes.String()).serialize(session),
                     partition=0, timestamp=int(time.time() * 1000))
    assert producer.flush(30) == 0
    app = StreamsApp(reader(log), f"{topic}.kspark-reader", {log: io.kafka(bootstrap)},
                     spark=spark, checkpoint_dir=os.path.join(app_dir, "r"))
    app.start()
    try:
        with pytest.raises(Exception) as failure:
            app.process_all_available()
    finally:
        app.stop()
    message = str(failure.value)
    assert f"topic '{log}' partition 0 offset 0" in message
    assert "store 'event-counts' (window store)" in message
    assert "not 0 as in a window store without duplicates" in message
