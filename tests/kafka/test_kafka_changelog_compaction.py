"""A store's changelog on Apache Kafka is compacted as Kafka Streams configures it, and the
compacted changelog restores the same store as the full history it replaced
(docs/semantics.md §7)."""

from __future__ import annotations

import json
import os
import time

import pytest
from kafka_util import BASE_MS, consume, create, produce

from kspark import Materialized, Stores, StreamsBuilder, Topology, io, serdes
from kspark.spark import StreamsApp
from kspark.state.internals.changelog import changelog_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]
STORE = "latest"
KEYS = 12
ROUNDS = 6


def _latest() -> Topology:
    b = StreamsBuilder()
    b.stream("updates", serdes.String(), serdes.Json()).to_table(
        Materialized(STORE, key_serde=serdes.String(), value_serde=serdes.Json()))
    return b.build()


def _round(r: int) -> list[tuple[str, bytes | None, int]]:
    """Every key updated once; in odd rounds every third key is deleted (a tombstone)."""
    out = []
    for k in range(KEYS):
        value = None if r % 2 and k % 3 == 0 else json.dumps({"round": r, "key": k}).encode()
        out.append((f"key-{k}", value, BASE_MS + r * 1000 + k))
    return out


def test_a_compacted_changelog_restores_the_same_store_as_the_full_history(
        spark, app_dir, bootstrap, topic):
    prefix = f"{topic}."
    app_a = f"{prefix}writer"
    log = changelog_topic(app_a, STORE)
    create(bootstrap, f"{prefix}updates", 2)
    # created beforehand with segments that roll every 100 ms and no dirty-ratio threshold, so
    # that the broker compacts it within seconds; kspark verifies only its cleanup policy
    create(bootstrap, log, 2, **{"cleanup.policy": "compact", "segment.ms": "100",
                                 "min.cleanable.dirty.ratio": "0.01",
                                 "delete.retention.ms": "100"})
    a = StreamsApp(_latest(), app_a, {"updates": io.kafka(bootstrap, f"{prefix}updates"),
                                      log: io.kafka(bootstrap)},
                   spark=spark, checkpoint_dir=os.path.join(app_dir, "a"))
    a.start()
    try:
        for r in range(ROUNDS):
            produce(bootstrap, f"{prefix}updates", _round(r), partitions=2, raw=True)
            a.process_all_available()
            time.sleep(0.3)  # the changelog's segment rolls before the next round
        expected = a.store(STORE).all()
    finally:
        a.stop()
    assert 0 < len(expected) < KEYS  # the last round deleted some keys
    assert dict(expected)["key-1"] == {"round": ROUNDS - 1, "key": 1}
    written = ROUNDS * KEYS  # one changelog record per key and round (caching: one a batch)

    deadline = time.time() + 90
    while len(consume(bootstrap, log)) > written // 2:
        assert time.time() < deadline, "the broker did not compact the changelog in 90 s"
        time.sleep(1)
    remaining = consume(bootstrap, log)
    assert len({m.key() for m in remaining}) <= KEYS < written

    reader = Topology().add_read_only_state_store(
        Stores.key_value_store(STORE, serdes.String(), serdes.Json()), log)
    b = StreamsApp(reader, f"{prefix}reader", {log: io.kafka(bootstrap)}, spark=spark,
                   checkpoint_dir=os.path.join(app_dir, "b"))
    b.start()
    try:
        b.process_all_available()
        assert b.store(STORE).all() == expected
    finally:
        b.stop()
