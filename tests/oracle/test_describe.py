"""``topology.describe()`` of whole applications against Kafka Streams' description of the same
topologies built in Java (the oracle's ``describe`` request): the sessions example, and a
stream-stream left join, a stream-table join and a split into branches, one of them counted;
global stores (one named) and a table's values transformed.
Every differential case compares its shape's description too (``test_differential.py``)."""

from __future__ import annotations

import difflib

from kspark import JoinWindows, Materialized, StreamsBuilder, serdes
from kspark.examples import sessions
from kspark.processor import Processor, ValueTransformerWithKey
from kspark.state import Stores


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


class StoreWriter(Processor):
    def init(self, context):
        super().init(context)
        self.store = context.get_state_store(context.record_metadata().topic)

    def process(self, record):
        self.store.put(record.key, record.value)


class Tagged(ValueTransformerWithKey):
    def transform(self, key, value):
        return value


def global_stores_and_transform():
    b = StreamsBuilder()
    text, long = serdes.String(), serdes.Long()
    b.add_global_store(Stores.key_value_store("prices", key_serde=text, value_serde=long),
                       "prices", StoreWriter, text, long, name="price-updates")
    b.add_global_store(Stores.key_value_store("rates", key_serde=text, value_serde=long),
                       "rates", StoreWriter, text, long)
    (b.table("accounts", text, long)
     .transform_values(Tagged, materialized=Materialized("tagged"), name="tag")
     .to_stream().to("tagged"))
    b.stream("clicks").to("out")
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


def test_global_stores_and_a_transformed_table_are_described_as_kafka_streams_does(
        kafka_streams):
    check(kafka_streams, "global_stores_and_transform", global_stores_and_transform())
