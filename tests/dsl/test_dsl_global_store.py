"""StreamsBuilder.add_global_store: a store written by a processor of its own from every record
of its topic, read by the stream's processors (Kafka Streams' addGlobalStore)."""

from __future__ import annotations

from kspark import serdes
from kspark.dsl import StreamsBuilder
from kspark.processor import Processor
from kspark.records import Record
from kspark.state import Stores
from kspark.testing import TopologyTestDriver

S = serdes.String()
L = serdes.Long()


class MaxWriter(Processor):
    """Keeps each key's largest value (a processor of the user's: not an upsert)."""

    def init(self, context):
        super().init(context)
        self.store = context.get_state_store("max-prices")

    def process(self, record):
        if record.value is not None:
            self.store.put(record.key, max(record.value, self.store.get(record.key) or 0))


class Priced(Processor):
    def init(self, context):
        super().init(context)
        self.prices = context.get_state_store("max-prices")

    def process(self, record):
        self.context.forward(Record(record.key, f"{record.value}@{self.prices.get(record.key)}"))


def test_a_global_store_is_written_by_its_processor_and_read_by_the_stream():
    builder = StreamsBuilder()
    builder.add_global_store(Stores.key_value_store("max-prices", key_serde=S, value_serde=L),
                             "prices", MaxWriter, S, L, name="price-updates")
    builder.stream("orders", S, S).process(Priced, "max-prices").to("out", S, S)
    topology = builder.build()
    assert "Processor: price-updates (stores: [max-prices])" in str(topology.describe())
    with TopologyTestDriver(topology) as driver:
        prices = driver.create_input_topic("prices", S, L)
        orders = driver.create_input_topic("orders", S, S)
        prices.pipe_input("p", 5)
        prices.pipe_input("p", 3)          # not the largest: the processor keeps 5
        orders.pipe_input("p", "o1")
        orders.pipe_input("q", "o2")
        prices.pipe_input("q", 7)
        orders.pipe_input("q", "o3")
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("p", "o1@5"), ("q", "o2@None"), ("q", "o3@7")]
        assert driver.get_key_value_store("max-prices").all() == [("p", 5), ("q", 7)]
