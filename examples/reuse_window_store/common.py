"""What applications A and B of the store-reuse example share: names, paths and topologies.

A counts events per user and event type in 24-hour windows kept 30 days (seed 004's event
counter, scaled down). B declares A's window store as a read-only source store restored from
A's changelog, and answers "how many events of type X did user U have per day in the last 7
days" from it.
"""

from __future__ import annotations

import os
from typing import Any

from kspark import (
    Materialized,
    Processor,
    ProcessorContext,
    Record,
    Stores,
    StreamsBuilder,
    TimeWindows,
    Topology,
    changelog_topic,
    serdes,
)

DAY = 86_400_000
#: the generated events start on 2026-01-01 (days since the epoch)
START_DAY = 20_454
APP_A, APP_B = "event-counter", "event-reader"
STORE = "event-counts"
RETENTION = 30 * DAY
#: events up to a week late still count (A processes at most a week of input per micro-batch)
GRACE = 7 * DAY
PARTITIONS = 2
#: A's changelog of the store, which B reads: ``event-counter-event-counts-changelog``
A_CHANGELOG = changelog_topic(APP_A, STORE)


def paths(base: str) -> dict[str, str]:
    """Where the example keeps its files (under ``base``)."""
    return {
        "events": os.path.join(base, "events"),  # A's input: JSON lines
        "changelogs": os.path.join(base, "changelogs"),  # state.changelog.dir of A (and B)
        "a": os.path.join(base, "checkpoints", APP_A),
        "b": os.path.join(base, "checkpoints", APP_B),
    }


def store_key(user: str, event_type: str) -> str:
    return f"{user}|{event_type}"


def counter_topology() -> Topology:
    """A: events (key: user, value: {"type": ...}) -> count per "user|type" per day."""
    builder = StreamsBuilder()
    builder.stream("events", serdes.String(), serdes.Json()).group_by(
        lambda user, event: store_key(user, event["type"]), key_serde=serdes.String()
    ).windowed_by(TimeWindows.of_size_and_grace(DAY, GRACE)).count(
        materialized=Materialized(STORE, retention=RETENTION)
    )
    return builder.build()


def counts_store() -> Any:
    """B's declaration of A's store: the same kind, window size, retention and serdes."""
    # the serdes A's count stores with, as in Kafka Streams: the grouping key's and Long
    return Stores.window_store(STORE, RETENTION, DAY, key_serde=serdes.String(),
                               value_serde=serdes.Long())


class LastSevenDays(Processor):
    """For a question keyed "user|type" at time t, forwards ``[[day_start_ms, count], ...]`` of
    the 7 days up to t (days without events are left out), read from A's store."""

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.counts = context.get_state_store(STORE)

    def process(self, record: Record) -> None:
        today = record.timestamp - record.timestamp % DAY
        days = self.counts.fetch_range(record.key, today - 6 * DAY, today)
        self.context.forward(record.with_value([[kv.key, kv.value] for kv in days]))


def reader_topology() -> Topology:
    """B: questions -> LastSevenDays (reading A's store) -> answers."""
    topology = Topology()
    topology.add_source("questions", "questions", serdes.String(), serdes.Json())
    topology.add_processor("last-seven-days", LastSevenDays, "questions")
    topology.add_sink("answers", "answers", "last-seven-days", key_serde=serdes.String(),
                      value_serde=serdes.Json())
    topology.add_read_only_state_store(counts_store(), A_CHANGELOG, "last-seven-days")
    return topology
