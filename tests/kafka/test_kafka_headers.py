"""Record headers from a Kafka topic through Spark's stages to Kafka topics, as on the test
driver: kept by a stateless operator, set by a processor, carried across a repartition into an
aggregation, whose results carry the headers of the record that produced them (Kafka Streams'
``KStreamAggregate`` forwards ``record.withValue(...)``)."""

from __future__ import annotations

import os
import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from kafka_util import consume, create

from kspark import Materialized, StreamsBuilder, io, serdes
from kspark.hashing import kafka_partition
from kspark.processor import Processor
from kspark.records import Record
from kspark.spark import StreamsApp
from kspark.testing import TopologyTestDriver

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

S, L = serdes.String(), serdes.Long()
OUTPUTS = {"mapped": (S, S), "counts": (S, L)}


class Stamp(Processor):
    """Adds the header ``seen`` (its value: the record's value) to every record."""

    def process(self, record: Record) -> None:
        self.context.forward(
            record.with_headers((*record.headers, ("seen", record.value.encode()))))


def topology():
    b = StreamsBuilder()
    stream = b.stream("in", S, S)
    stream.map_values(str.upper).process(Stamp).to("mapped", S, S)
    # a re-key: through a repartition topic (one group per input key, so a group's records
    # come from one partition and keep their order)
    (stream.group_by(lambda k, v: k.upper(), S, S)
     .count(Materialized("counts", caching=False)).to_stream().to("counts", S, L))
    return b.build()


def inputs() -> list[tuple[str, str, int, list]]:
    """Records over six keys: most without headers (whole micro-batches too), some with a
    header, a repeated header name, a header without a value. Of yesterday: the broker's
    retention (7 days) deletes older records at its checks."""
    base = int(time.time() * 1000) - 86_400_000
    special = {7: [("trace", b"t-7")], 11: [("dup", b"1"), ("dup", b"2")],
               15: [("empty", None), ("trace", b"")], 23: [("trace", b"t-23")]}
    return [(f"k{i % 6}", f"v{i}", base + i * 10, special.get(i, [])) for i in range(40)]


def driver_outputs(records: list[tuple[str, str, int, list]]) -> dict[str, list]:
    """Each output topic's ``(key, value, timestamp, headers)``, on one driver per input
    partition (the tasks of the re-keyed stage get each group from one partition)."""
    by_partition = defaultdict(list)
    for rec in records:
        by_partition[kafka_partition(rec[0].encode(), 2)].append(rec)
    out: dict[str, list] = {t: [] for t in OUTPUTS}
    for part in by_partition.values():
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("in", S, S)
            for key, value, ts, headers in part:
                pipe.pipe_input(key, value, ts, headers=headers)
            for topic, (ks, vs) in OUTPUTS.items():
                out[topic] += [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in
                               driver.create_output_topic(topic, ks, vs).read_records_to_list()]
    return {t: sorted(rows, key=repr) for t, rows in out.items()}


def kafka_outputs(bootstrap: str, prefix: str) -> dict[str, list]:
    """Each output topic's records on Kafka (read_committed), as :func:`driver_outputs`."""
    return {topic: sorted(((ks.deserialize(m.key()), vs.deserialize(m.value()),
                            m.timestamp()[1], tuple(m.headers() or ()))
                           for m in consume(bootstrap, prefix + topic)), key=repr)
            for topic, (ks, vs) in OUTPUTS.items()}


@pytest.mark.parametrize(("source", "in_stage"),
                         [("kspark", "true"), ("kspark", "false"), ("spark", "false")])
def test_headers_flow_from_kafka_through_the_stages_to_kafka_as_on_the_driver(
        spark, app_dir, bootstrap, topic, source, in_stage):
    """Read by the stages' tasks, by a source stage of kspark's own source, and by Spark's
    Kafka connector."""
    prefix = f"{topic}."
    create(bootstrap, f"{prefix}in", 2)
    records = inputs()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value, ts, headers in records:
        producer.produce(f"{prefix}in", value.encode(), key.encode(),
                         partition=kafka_partition(key.encode(), 2), timestamp=ts,
                         headers=headers or None)
    assert producer.flush(30) == 0
    topics = {"in": io.kafka(bootstrap, f"{prefix}in", max_records_per_trigger=12,
                             source=source)}
    topics.update({t: io.kafka(bootstrap, f"{prefix}{t}") for t in OUTPUTS})
    app = StreamsApp(topology(), f"{prefix}app", topics, spark=spark,
                     config={"spark.kspark.kafka.read.in.stage": in_stage},
                     checkpoint_dir=os.path.join(app_dir, "ck"))
    app.start()
    try:
        app.process_all_available()
        assert app.metrics()["batches"] >= 3
    finally:
        app.stop()
    expected = driver_outputs(records)
    assert kafka_outputs(bootstrap, prefix) == expected
    # the sinks wrote the headers: the stateless path's, the processor's, and the counts of
    # the records that had some (with a repeated name and a null value kept as they were)
    mapped = {value: headers for _, value, _, headers in expected["mapped"]}
    assert mapped["V11"] == (("dup", b"1"), ("dup", b"2"), ("seen", b"V11"))
    assert mapped["V15"] == (("empty", None), ("trace", b""), ("seen", b"V15"))
    assert mapped["V0"] == (("seen", b"V0"),)
    counts = {(key, count): headers for key, count, _, headers in expected["counts"]}
    assert counts[("K5", 2)] == (("dup", b"1"), ("dup", b"2"))  # record 11: k5's second
    assert counts[("K5", 4)] == (("trace", b"t-23"),)
    assert counts[("K3", 3)] == (("empty", None), ("trace", b""))
    assert counts[("K1", 2)] == (("trace", b"t-7"),) and counts[("K1", 3)] == ()
