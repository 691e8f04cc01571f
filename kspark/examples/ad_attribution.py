"""Example: ad attribution with joins.

Impressions and clicks are keyed by impression id. Each impression is joined with the clicks on
it within ``ATTRIBUTION_MS`` after it (a left join, so an impression nobody clicked comes out
too, once its window has closed), then enriched with its campaign from a campaign table that
every task keeps whole (a global table: no repartitioning), and written to
``attributed-impressions``. The attributed impressions are then counted per campaign: shown
and clicked (``campaign-stats``).

Run it on the embedded default: ``kspark broker`` in one terminal, then
``kspark run kspark.examples.ad_attribution:app`` (topics on ``$KSPARK_BOOTSTRAP``, default
``localhost:9092``; :func:`produce` writes sample events).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

from kspark import JoinWindows, Materialized, StreamJoined, StreamsBuilder, serdes
from kspark.topology import Topology

ATTRIBUTION_MS = 10 * 60_000
GRACE_MS = 60_000
TOPICS = ("impressions", "clicks", "campaigns", "attributed-impressions", "campaign-stats")


def attribute(impression: dict[str, Any], click: dict[str, Any] | None) -> dict[str, Any]:
    """An impression with the click on it (``None``: not clicked in time)."""
    return {**impression, "clicked": click is not None,
            "click_ts": None if click is None else click["ts"]}


def with_campaign(attributed: dict[str, Any], campaign: dict[str, Any] | None) -> dict[str, Any]:
    return {**attributed, "campaign_name": None if campaign is None else campaign["name"]}


def count(campaign: str, attributed: dict[str, Any], stats: dict[str, int]) -> dict[str, int]:
    return {"shown": stats["shown"] + 1, "clicked": stats["clicked"] + attributed["clicked"]}


def topology(impressions: str = "impressions", clicks: str = "clicks",
             campaigns: str = "campaigns", attributed: str = "attributed-impressions",
             stats: str = "campaign-stats") -> Topology:
    """impressions and clicks (impression id -> event) and campaigns (campaign id -> campaign)
    -> attributed impressions and per-campaign counts."""
    text, json = serdes.String(), serdes.Json()
    builder = StreamsBuilder()
    shown = builder.stream(impressions, text, json)
    clicked = builder.stream(clicks, text, json)
    # a click counts within ATTRIBUTION_MS after its impression, not before it
    window = JoinWindows.of_time_difference_and_grace(ATTRIBUTION_MS, GRACE_MS).before(0)
    campaign_table = builder.global_table(campaigns, text, json, Materialized("campaigns"))
    enriched = (
        shown.left_join(clicked, attribute, window,
                        StreamJoined.with_(text, json, json).with_store_name("attribution"))
        .left_join(campaign_table, lambda impression_id, event: event["campaign"],
                   with_campaign)
    )
    enriched.to(attributed, text, json)
    (enriched.group_by(lambda impression_id, event: event["campaign"], text, json)
     .aggregate(lambda: {"shown": 0, "clicked": 0}, count,
                Materialized("campaign-stats", value_serde=json))
     .to_stream().to(stats, text, json))
    return builder.build()


def generate_events(impressions: int, campaigns: int = 20, click_rate: float = 0.3,
                    seed: int = 7) -> dict[str, list[tuple[str, Any, int]]]:
    """Sample topics: ``campaigns`` rows, ``impressions`` (about one a second), and clicks on
    ``click_rate`` of them, most within the attribution window, some too late."""
    rng = random.Random(seed)
    rows = [(f"campaign-{c}", {"name": f"Campaign {c}"}, 0) for c in range(campaigns)]
    shown, clicks = [], []
    ts = 0
    for i in range(impressions):
        ts += rng.randrange(0, 2_000)
        impression_id = f"imp-{i:07d}"
        shown.append((impression_id, {"campaign": f"campaign-{rng.randrange(campaigns)}",
                                      "user": f"user-{rng.randrange(1_000)}", "ts": ts}, ts))
        if rng.random() < click_rate:
            late = rng.random() < 0.1
            at = ts + (ATTRIBUTION_MS + rng.randrange(1, 60_000) if late
                       else rng.randrange(0, ATTRIBUTION_MS))
            clicks.append((impression_id, {"ts": at}, at))
    clicks.sort(key=lambda c: c[2])
    return {"campaigns": rows, "impressions": shown, "clicks": clicks}


def app() -> Any:
    """The example as a StreamsApp on Kafka at ``$KSPARK_BOOTSTRAP`` (``kspark run``)."""
    from kspark import io
    from kspark.spark import StreamsApp

    bootstrap = os.environ.get("KSPARK_BOOTSTRAP", "localhost:9092")
    return StreamsApp(topology(), "ad-attribution",
                      {name: io.kafka(bootstrap, partitions=4) for name in TOPICS})


def produce(bootstrap: str, impressions: int = 10_000, partitions: int = 4) -> None:
    """Write :func:`generate_events` to the input topics on Kafka at ``bootstrap`` (created
    with ``partitions`` partitions if missing)."""
    from confluent_kafka import Producer

    from kspark.kafka import TopicSpec, ensure_topics

    events = generate_events(impressions)
    ensure_topics(bootstrap, [TopicSpec(t, partitions) for t in events])
    text, json = serdes.String(), serdes.Json()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for topic, key, value, ts in events_iter(events):
        producer.produce(topic, json.serialize(value), text.serialize(key), timestamp=ts)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"could not deliver every event to Kafka at {bootstrap}")


def events_iter(events: dict[str, list[tuple[str, Any, int]]]
                ) -> Iterator[tuple[str, str, Any, int]]:
    """Every event as ``(topic, key, value, timestamp)``, campaigns first, then by time."""
    yield from (("campaigns", *row) for row in events["campaigns"])
    merged = [("impressions", *r) for r in events["impressions"]]
    merged += [("clicks", *r) for r in events["clicks"]]
    merged.sort(key=lambda e: e[3])
    yield from merged
