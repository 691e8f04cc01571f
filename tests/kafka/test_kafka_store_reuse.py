"""Store reuse on Kafka (docs/semantics.md §7, seed 004): application B restores application A's
window store from A's changelog topic on the broker and creates no changelog or copy topic of
its own (checked by listing the broker's topics)."""

from __future__ import annotations

import os
import re
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka_util import create, produce

from kspark import Materialized, Stores, StreamsBuilder, TimeWindows, Topology, io, serdes
from kspark.kafka.admin import matching_topics
from kspark.spark import StreamsApp
from kspark.state.internals.changelog import changelog_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
DAY = 86_400_000
STORE = "event-counts"


def _counter() -> Topology:
    b = StreamsBuilder()
    b.stream("events", serdes.String(), serdes.Json()).group_by(
        lambda user, e: f"{user}|{e['type']}", key_serde=serdes.String()
    ).windowed_by(TimeWindows.of_size_and_grace(DAY, 10 * DAY)).count(
        materialized=Materialized(STORE, retention=30 * DAY)
    )
    return b.build()


def test_b_restores_a_store_from_its_kafka_changelog_without_topics_of_its_own(
    spark, app_dir, bootstrap, topic
):
    prefix = f"{topic}."
    app_a, app_b = f"{prefix}app-a", f"{prefix}app-b"
    a_log = changelog_topic(app_a, STORE)
    create(bootstrap, f"{prefix}events", 2)
    # ten days ago: the changelog deletes records older than the store's retention + 1 day
    base = (int(time.time() * 1000) // DAY - 10) * DAY
    events = [(f"user-{i % 5}", {"type": "abc"[i % 3]}, base + i * DAY // 20)
              for i in range(200)]
    produce(bootstrap, f"{prefix}events", events, partitions=2)

    a = StreamsApp(_counter(), app_a,
                   {"events": io.kafka(bootstrap, f"{prefix}events"), a_log: io.kafka(bootstrap)},
                   spark=spark, checkpoint_dir=os.path.join(app_dir, "a"))
    reader = Topology().add_read_only_state_store(
        Stores.window_store(STORE, 30 * DAY, DAY, key_serde=serdes.String(),
                            value_serde=serdes.Long()), a_log
    )
    b = StreamsApp(reader, app_b, {a_log: io.kafka(bootstrap)}, spark=spark,
                   checkpoint_dir=os.path.join(app_dir, "b"))
    a.start()
    try:
        a.process_all_available()
        b.start()
        b.process_all_available()
        expected = a.store(STORE).all()
        assert len(expected) > 20
        assert b.store(STORE).all() == expected
    finally:
        b.stop()
        a.stop()

    topics = matching_topics(bootstrap, re.escape(prefix) + ".*")
    assert a_log in topics
    assert [t for t in topics if t.startswith(app_b)] == []
    assert [t for t in topics if STORE in t] == [a_log]
    # A's changelog: compacted, and deleted once older than the store's retention + 1 day
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, a_log)]).values()
    configs = {k: v.value for k, v in future.result().items()}
    assert configs["cleanup.policy"] == "compact,delete"
    assert configs["retention.ms"] == str(31 * DAY)
