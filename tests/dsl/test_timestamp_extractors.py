"""Timestamp extractors (``kspark.processor.timestamps``; the oracle's ``timestamp_extractor``
shape checks one against Kafka Streams), in the driver and across micro-batches of the batch
runner."""

from __future__ import annotations

import pytest

from kspark import Materialized, TimeWindows, serdes
from kspark.config import StreamsConfig
from kspark.dsl import StreamsBuilder
from kspark.errors import StreamsError
from kspark.processor.timestamps import UsePartitionTimeOnInvalidTimestamp, ValueField
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.task import SourceBatch, SourceRecord
from kspark.testing import TopologyTestDriver

S, J, L = serdes.String(), serdes.Json(), serdes.Long()


def windowed_counts(extractor, value_serde=J):
    b = StreamsBuilder()
    (b.stream("in", S, value_serde, timestamp_extractor=extractor).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 100))
     .count(Materialized("counts", caching=False))
     .to_stream().to("out", serdes.TimeWindowed(S, 10), L))
    return b.build()


def outputs(driver):
    return [(r.key.key, r.key.window.start, r.value, r.timestamp)
            for r in driver.create_output_topic("out", serdes.TimeWindowed(S, 10), L)
            .read_records_to_list()]


def test_a_field_of_the_value_is_the_records_time():
    with TopologyTestDriver(windowed_counts(ValueField("at"))) as driver:
        pipe = driver.create_input_topic("in", S, J)
        pipe.pipe_input("a", {"at": 25}, 1)
        pipe.pipe_input("a", {"at": 21}, 2)
        pipe.pipe_input("a", {"no": 1}, 3)  # no field: dropped, counted
        pipe.pipe_input("a", {"at": "soon"}, 4)  # not a number: dropped, counted
        assert outputs(driver) == [("a", 20, 1, 25), ("a", 20, 2, 25)]
        assert driver.metrics()["dropped-records-invalid-timestamp"] == 2


def test_partition_time_replaces_an_invalid_timestamp():
    with TopologyTestDriver(windowed_counts(UsePartitionTimeOnInvalidTimestamp(), L)) as driver:
        pipe = driver.create_input_topic("in", S, L)
        pipe.pipe_input("a", 1, -5)  # no partition time yet: dropped
        pipe.pipe_input("a", 1, 12)
        pipe.pipe_input("a", 1, -1)  # takes the partition time, 12
        pipe.pipe_input("a", 1, 31)
        assert outputs(driver) == [("a", 10, 1, 12), ("a", 10, 2, 12), ("a", 30, 1, 31)]


def test_partition_time_lasts_across_batches():
    topology = windowed_counts(UsePartitionTimeOnInvalidTimestamp(), L)
    sub = topology.sub_topologies()[0]
    config = StreamsConfig.of(None, application_id="extractors")
    state = DictTaskState()
    one = (1).to_bytes(8, "big")
    out = []
    for batch in ([("a", 12)], [("a", -1)]):
        records = [SourceRecord("in", 0, i, ts, k.encode(), one) for i, (k, ts) in
                   enumerate(batch)]
        result = run_task_batch(topology, sub, 0, SourceBatch.from_records(records), state,
                                config, wall_clock=lambda: 0)
        out += [o.timestamp for o in result.output]
    assert out == [12, 12]  # the second batch's record took the first batch's partition time


def test_an_extractor_that_fails_names_the_source_and_the_record():
    def broken(record, partition_time):
        return record.value["at"]

    for extractor, message in ((broken, "TypeError"),
                               (lambda r, t: "late", "returned 'late'")):
        with (TopologyTestDriver(windowed_counts(extractor, L)) as driver,
              pytest.raises(StreamsError) as err):
            driver.create_input_topic("in", S, L).pipe_input("a", 1, 5)
        text = str(err.value)
        assert "source 'KSTREAM-SOURCE-0000000000'" in text and message in text
        assert "topic 'in' partition 0 offset 0" in text
