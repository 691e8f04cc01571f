"""``KStream.process_values`` with fixed-key processors (the oracle's ``process_values`` shape
checks the records and the topology against Kafka Streams)."""

from __future__ import annotations

import pytest

from kspark import Materialized, PunctuationType, serdes
from kspark.dsl import StreamsBuilder
from kspark.errors import StreamsError, TopologyError
from kspark.processor import FixedKeyProcessor, FixedKeyRecord
from kspark.records import Record
from kspark.state.builders import Stores
from kspark.testing import TopologyTestDriver

S = serdes.String()
L = serdes.Long()


class RunningSum(FixedKeyProcessor):
    """Forwards the running sum per key (a store), with the header ``n``; every 10 ms of
    stream time forwards each key's last result once more, at the punctuation's time."""

    def init(self, context):
        super().init(context)
        self.store = context.get_state_store("sums")
        self.last = {}
        context.schedule(10, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record):
        total = (self.store.get(record.key) or 0) + record.value
        self.store.put(record.key, total)
        out = record.with_value(total).with_headers([("n", str(total).encode())])
        self.last[record.key] = out
        self.context.forward(out)

    def punctuate(self, now):
        for _key, record in sorted(self.last.items()):
            self.context.forward(record.with_timestamp(now))


def test_a_fixed_key_processor_changes_values_timestamps_and_headers_not_keys():
    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store("sums", S, L))
    (b.stream("in", S, L).process_values(RunningSum, "sums")
     .to("out", S, L))
    topology = b.build()
    assert "KSTREAM-PROCESSVALUES-0000000001" in topology.nodes
    assert not topology.internal_topics
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("in", S, L)
        for key, value, ts in [("a", 1, 1), ("b", 5, 2), ("a", 2, 12)]:
            pipe.pipe_input(key, value, ts)
        out = [(r.key, r.value, r.timestamp, r.headers)
               for r in driver.create_output_topic("out", S, L).read_records_to_list()]
    # stream-time punctuation: at the first record's time, then once 10 ms have passed
    n1, n3, n5 = (("n", b"1"),), (("n", b"3"),), (("n", b"5"),)
    assert out == [("a", 1, 1, n1), ("a", 1, 1, n1), ("b", 5, 2, n5),
                   ("a", 3, 12, n3), ("a", 3, 12, n3), ("b", 5, 12, n5)]


def test_the_key_cannot_change():
    record = FixedKeyRecord(Record("k", 1, 5))
    assert not hasattr(record, "with_key")
    with pytest.raises(AttributeError):
        record.key = "other"
    assert record.with_value(2) == FixedKeyRecord(Record("k", 2, 5))


def test_no_repartition_after_it_unless_one_was_due_before():
    for rekey, repartitions in ((False, 0), (True, 1)):
        b = StreamsBuilder()
        stream = b.stream("in", S, L)
        if rekey:
            stream = stream.select_key(lambda k, v: v)
        stream.process_values(RunningSumless).group_by_key().count(Materialized("c"))
        assert len(b.build().internal_topics) == repartitions


class RunningSumless(FixedKeyProcessor):
    def process(self, record):
        self.context.forward(record)


class Rekeying(FixedKeyProcessor):
    def process(self, record):
        self.context.forward(Record("other", record.value, record.timestamp))


def test_mistakes_are_named():
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="supplier of FixedKeyProcessor"):
        b.stream("in", S, L).process_values(RunningSumless())
    b = StreamsBuilder()
    b.stream("in", S, L).process_values(Rekeying).to("out", S, L)
    with TopologyTestDriver(b.build()) as driver, pytest.raises(StreamsError) as err:
        driver.create_input_topic("in", S, L).pipe_input("k", 1, 0)
    assert "forwards FixedKeyRecord objects" in str(err.value)
    assert "KSTREAM-PROCESSVALUES-0000000001" in str(err.value).splitlines()[0]
