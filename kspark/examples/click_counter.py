"""Example: count clicks per user with the Processor API and report them on a punctuator.

Every click is counted in the key-value store ``click-counts``; a STREAM_TIME punctuator forwards
every user's running count once per ``REPORT_INTERVAL_MS`` of event time.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from kspark import serdes
from kspark.processor import Processor, ProcessorContext, PunctuationType
from kspark.records import Record
from kspark.state.builders import Stores
from kspark.topology import Topology

STORE = "click-counts"
REPORT_INTERVAL_MS = 60_000


class ClickCounter(Processor):
    """Counts clicks per user; forwards all counts every report interval of stream time."""

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.counts = context.get_state_store(STORE)
        context.schedule(REPORT_INTERVAL_MS, PunctuationType.STREAM_TIME, self.report)

    def process(self, record: Record) -> None:
        self.counts.put(record.key, (self.counts.get(record.key) or 0) + 1)

    def report(self, timestamp: int) -> None:
        for user, count in self.counts.all():
            self.context.forward(Record(user, count, timestamp))


def topology(input_topic: str = "clicks", output_topic: str = "click-counts-report") -> Topology:
    """Source ``clicks`` (user -> JSON click) -> ClickCounter -> sink of per-user counts."""
    topo = Topology()
    topo.add_source("clicks", input_topic, serdes.String(), serdes.Json())
    topo.add_processor("counter", ClickCounter, "clicks")
    topo.add_state_store(Stores.key_value_store(STORE), "counter")
    topo.add_sink(
        "report", output_topic, "counter", key_serde=serdes.String(), value_serde=serdes.Long()
    )
    return topo


def generate_clicks(n: int, users: int = 20, seed: int = 7) -> Iterator[tuple[str, dict, int]]:
    """``n`` clicks ``(user, {"page": ...}, timestamp)`` about 0-3 s apart."""
    rng = random.Random(seed)
    ts = 0
    pages = ["/", "/search", "/item", "/cart", "/checkout"]
    for _ in range(n):
        ts += rng.randint(0, 3000)
        yield f"user-{rng.randrange(users):02d}", {"page": rng.choice(pages)}, ts
