"""Store reuse on Kafka (docs/semantics.md §7, seed 004): application B restores application A's
window store from A's changelog topic on the broker and creates no changelog or copy topic of
its own (checked by listing the broker's topics)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka_util import create, produce
from store_reader_process import reader_app, reader_topology

from kspark import Materialized, Stores, StreamsBuilder, TimeWindows, Topology, io, serdes
from kspark.kafka.admin import matching_topics
from kspark.spark import StreamsApp
from kspark.state.internals.changelog import ChangelogCodec, changelog_topic
from kspark.testing import TopologyTestDriver
from kspark.windows import Window, Windowed

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
HERE = os.path.dirname(__file__)
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


def _window_rows(store) -> list[tuple]:
    return sorted((kv.key.key, kv.key.window.start, kv.value.value, kv.value.timestamp)
                  for kv in store.fetch_all_with_timestamps(None, None))


def test_b_killed_while_restoring_resumes_the_restore_exactly(spark, app_dir, bootstrap, topic):
    """B is SIGKILLed in the middle of restoring A's changelog (some of its micro-batches
    committed, one under way); restarted from its checkpoint it goes on from there, and its
    store is what restoring the whole changelog in one go gives (the test driver's): no change
    lost, none applied out of order (each key's values grow, overwrites and tombstones
    included)."""
    changelog, app_b = changelog_topic(f"{topic}.a", STORE), f"{topic}.b"
    create(bootstrap, changelog, 2, **{"cleanup.policy": "compact,delete",
                                       "retention.ms": str(31 * DAY)})
    codec = ChangelogCodec("window", serdes.String(), serdes.Long(), DAY)
    rng, base = random.Random(7), (int(time.time() * 1000) // DAY - 5) * DAY
    records = []
    for i in range(20_000):
        start = base + rng.randrange(5) * DAY
        key = codec.encode_key(Windowed(f"user-{rng.randrange(300)}", Window(start, start + DAY)))
        value = None if rng.random() < 0.1 else codec.encode_value(i)
        records.append((key, value, start + rng.randrange(DAY)))
    produce(bootstrap, changelog, records, partitions=2, raw=True)
    with TopologyTestDriver(reader_topology(changelog)) as driver:
        for key, value, ts in records:
            driver.pipe_raw(changelog, key, value, ts)
        expected = _window_rows(driver.get_window_store(STORE))

    checkpoint = os.path.join(app_dir, "b")
    commits = os.path.join(checkpoint, "query", "commits")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "store_reader_process.py"), bootstrap, changelog,
         app_b, checkpoint, "1000"],  # 20 micro-batches
        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not (os.path.isdir(commits) and
               len([f for f in os.listdir(commits) if f.isdigit()]) >= 3):
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "B did not commit three batches in time"
        time.sleep(0.05)
    time.sleep(random.Random(3).uniform(0.0, 0.4))  # some way into the next batch
    assert proc.poll() is None, "B restored everything before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    done = len([f for f in os.listdir(commits) if f.isdigit()])
    assert 3 <= done < 20

    b = reader_app(bootstrap, changelog, app_b, checkpoint, spark=spark).start()
    try:
        b.process_all_available()
        rest = b.metrics()["process-total"]
        got = _window_rows(b.store(STORE))
    finally:
        b.stop()
    assert 0 < rest <= len(records) - done * 1000  # went on from the last committed batch
    assert len(expected) > 1000
    assert got == expected
