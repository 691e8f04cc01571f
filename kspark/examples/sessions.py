"""Example (seed 000's scenario): user click sessions with the DSL.

Clicks are keyed by user; sessions close after ``GAP_MS`` of inactivity and accept records up to
``GRACE_MS`` late. Two aggregations share the grouped stream: the number of clicks per session
(store ``session-counts``) and the pages visited in each session (store ``session-pages``,
merged in order when sessions merge). Both are emitted once per session, when it closes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from kspark import (
    EmitStrategy,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    serdes,
)
from kspark.topology import Topology

GAP_MS = 10_000
GRACE_MS = 10_000
COUNTS_STORE = "session-counts"
PAGES_STORE = "session-pages"
PAGES = ["/", "/search", "/item", "/cart", "/checkout", "/help"]


def topology(input_topic: str = "clicks", counts_topic: str = "session-counts",
             pages_topic: str = "session-pages", emit_on_close: bool = True) -> Topology:
    """clicks (user -> {"page": ...}) -> session count and pages-per-session topics."""
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(GAP_MS, GRACE_MS)
    sessions = builder.stream(input_topic, serdes.String(), serdes.Json()).group_by_key(
        serdes.String(), serdes.Json()).windowed_by(windows)
    if emit_on_close:
        sessions = sessions.emit_strategy(EmitStrategy.on_window_close())
    windowed_key = serdes.SessionWindowed(serdes.String())
    (sessions.count(Materialized(COUNTS_STORE))
     .to_stream().to(counts_topic, windowed_key, serdes.Long()))
    (sessions.aggregate(list, add_page, lambda user, left, right: left + right,
                        Materialized(PAGES_STORE))
     .to_stream().to(pages_topic, windowed_key, serdes.Json()))
    return builder.build()


def add_page(user: str, click: dict | None, pages: list[str]) -> list[str]:
    """The pages aggregate's adder: the click's page appended (a click with a null value, which
    session aggregations pass on as Kafka Streams does, adds none)."""
    return pages if click is None else [*pages, click["page"]]


def generate_clicks(n: int, users: int = 200, seed: int = 42, late_fraction: float = 0.02
                    ) -> Iterator[tuple[str, dict, int]]:
    """``n`` clicks ``(user, {"page": p}, timestamp)`` in arrival order: each user's clicks
    come in sessions (0-8 s apart, sessions 60-600 s apart); about 5 % arrive a few seconds out
    of order and ``late_fraction`` arrive after their session closed (to be dropped)."""
    rng = random.Random(seed)
    names = [f"user-{u:04d}" for u in range(users)]
    next_at = {name: rng.randrange(0, 300_000) for name in names}
    events = []
    for _ in range(n):
        user = rng.choice(names)
        ts = next_at[user]
        next_at[user] = ts + (rng.randrange(60_000, 600_000) if rng.random() < 0.1
                              else rng.randrange(0, 8_000))
        events.append((ts, user))
    events.sort()
    out = []
    for ts, user in events:
        arrival = ts
        r = rng.random()
        if r < late_fraction:
            arrival = ts + GAP_MS + GRACE_MS + rng.randrange(30_000, 90_000)
        elif r < late_fraction + 0.05:
            arrival = ts + rng.randrange(0, 8_000)
        out.append((arrival, ts, user))
    out.sort()
    for _, ts, user in out:
        yield user, {"page": rng.choice(PAGES)}, ts
