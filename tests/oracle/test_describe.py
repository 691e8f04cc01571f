"""``topology.describe()`` of whole applications against Kafka Streams' description of the same
topologies built in Java (the oracle's ``describe`` request): the sessions example, and a
stream-stream left join, a stream-table join and a split into branches, one of them counted.
Every differential case compares its shape's description too (``test_differential.py``)."""

from __future__ import annotations

import difflib

from kspark import JoinWindows, Materialized, StreamsBuilder, serdes
from kspark.examples import sessions


def join_and_branch():
    b = StreamsBuilder()
    impressions, clicks = b.stream("impressions"), b.stream("clicks")
    campaigns = b.table("campaigns", materialized=Materialized("campaigns"))
    branches = (impressions
                .left_join(clicks, lambda i, c: f"{i}+{c}",
                           JoinWindows.of_time_difference_and_grace(600_000, 60_000))
                .join(campaigns, lambda v, c: f"{v}@{c}")
                .split(prefix="attributed-")
                .branch(lambda k, v: "+None" in v, name="unclicked")
                .default_branch(name="clicked"))
    branches["attributed-clicked"].to("clicked")
    (branches["attributed-unclicked"].group_by_key().count(Materialized("unclicked-counts"))
     .to_stream().to("unclicked-counts", serdes.String(), serdes.Long()))
    return b.build()


def check(kafka_streams, name: str, topology) -> None:
    expected = kafka_streams.run({"request": "describe", "topology": name})[0]["text"]
    actual = str(topology.describe())
    assert actual == expected, "\n".join(difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "kafka-streams", "kspark", lineterm=""))


def test_the_sessions_example_is_described_as_kafka_streams_describes_it(kafka_streams):
    check(kafka_streams, "sessions_example", sessions.topology())


def test_a_join_and_branch_topology_is_described_as_kafka_streams_describes_it(kafka_streams):
    check(kafka_streams, "join_and_branch", join_and_branch())
