"""Topologies and inputs shared by the state-access tests."""

from __future__ import annotations

import random
from typing import Any

from kspark import (
    Materialized,
    Processor,
    Record,
    SessionWindows,
    Stores,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    serdes,
)
from kspark.state.internals.changelog import ChangelogCodec, changelog_topic

DAY = 86_400_000
EVENTS = "events"
COUNTS = "event-counts"  # window store: events per "user|type" per day, kept 30 days
TOTALS = "totals"  # key-value store: events per user
SESSIONS = "sessions"  # session store: events per user session (gap 1 h)


def counter_topology() -> Topology:
    """Application A of seed 004 (scaled down), with a key-value and a session store too."""
    b = StreamsBuilder()
    events = b.stream(EVENTS, serdes.String(), serdes.Json())
    events.group_by(
        lambda user, e: f"{user}|{e['type']}", key_serde=serdes.String()
    ).windowed_by(TimeWindows.of_size_and_grace(DAY, 10 * DAY)).count(
        materialized=Materialized(COUNTS, retention=30 * DAY)
    )
    events.group_by_key().count(materialized=TOTALS)
    events.group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(3_600_000, 30 * DAY)
    ).count(materialized=SESSIONS)
    return b.build()


def events(
    n: int, seed: int = 3, start_day: int = 0, users: int = 6
) -> list[tuple[str, dict, int]]:
    """``n`` events ``(user, {"type": ...}, timestamp)`` in time order over about 10 days."""
    rng = random.Random(seed)
    ts = start_day * DAY
    out = []
    for _ in range(n):
        ts += rng.randrange(0, 10 * DAY // max(n, 1) * 2)
        out.append((f"user-{rng.randrange(users)}", {"type": rng.choice("abc")}, ts))
    return out


def driver_stores(topology: Topology, records: list[tuple[str, dict, int]], config: Any = None
                  ) -> tuple[dict[str, list], dict[str, list]]:
    """Every store's ``all()`` and every changelog after piping ``records`` into the driver."""
    with TopologyTestDriver(topology, config=config) as driver:
        pipe = driver.create_input_topic(EVENTS, serdes.String(), serdes.Json())
        for key, value, ts in records:
            pipe.pipe_input(key, value, ts)
        stores = {name: driver.get_state_store(name).all() for name in topology.store_builders}
        return stores, dict(driver.changelogs)


def counts_store_builder() -> Any:
    """The builder B declares for A's window store (same kind, size and retention)."""
    return Stores.window_store(COUNTS, 30 * DAY, DAY, key_serde=serdes.String(),
                               value_serde=serdes.Long())


class WeeklyAnswer(Processor):
    """B's processor: for a question ``user|type`` at time t, forwards the counts of the 7 days
    up to t (``[[day_start, count], ...]``) read from A's store."""

    def init(self, context: Any) -> None:
        self.context = context
        self.counts = context.get_state_store(COUNTS)

    def process(self, record: Record) -> None:
        day = record.timestamp - record.timestamp % DAY
        days = self.counts.fetch_range(record.key, day - 6 * DAY, day)
        self.context.forward(record.with_value([[kv.key, kv.value] for kv in days]))


def reader_topology(app_a: str = "app-a", with_questions: bool = True) -> Topology:
    """Application B: A's window store as a read-only source store, and a processor answering
    questions from it."""
    topo = Topology()
    if with_questions:
        topo.add_source("questions", "questions", serdes.String(), serdes.Json())
        topo.add_processor("answer", WeeklyAnswer, "questions")
        topo.add_sink("answers", "answers", "answer", key_serde=serdes.String(),
                      value_serde=serdes.Json())
        topo.add_read_only_state_store(counts_store_builder(), changelog_topic(app_a, COUNTS),
                                       "answer")
    else:
        topo.add_read_only_state_store(counts_store_builder(), changelog_topic(app_a, COUNTS))
    return topo


def encoded_changelog(topology: Topology, store: str, entries: list) -> list[tuple]:
    """A's changelog entries as the records of its changelog topic."""
    codec = ChangelogCodec.for_builder(topology.store_builders[store])
    return [(codec.encode_key(k), codec.encode_value(v), ts) for k, v, ts in entries]
