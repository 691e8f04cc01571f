"""Avro records in the Schema Registry's wire format through the main job (Kafka to Spark to
Kafka, a real registry server): the output topic holds what the test driver writes, its typed
results are the Avro record's struct, and a record whose schema id the registry does not know
is skipped and counted under ``log_and_continue``."""

from __future__ import annotations

import os

import pytest
from kafka_util import BASE_MS, create, decoded, produce

from kspark import StreamsBuilder, TopologyTestDriver, io, serdes
from kspark.spark import StreamsApp

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

S = serdes.String()
ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "item", "type": "string"}, {"name": "qty", "type": "int"}]}
TOTAL = {"type": "record", "name": "Total", "namespace": "shop",
         "fields": [{"name": "item", "type": "string"}, {"name": "total", "type": "long"}]}
LOG = {"default.deserialization.exception.handler": "log_and_continue"}


def _topology(url: str, source: str, sink: str):
    builder = StreamsBuilder()
    (builder.stream(source, S, serdes.Avro(url, ORDER))
        .map_values(lambda order: {"item": order["item"], "total": 10 * order["qty"]})
        .to(sink, S, serdes.Avro(url, TOTAL)))
    return builder.build()


def _order(record: tuple) -> tuple:
    key, value, ts = record
    return ts, key, sorted(value.items())


def test_avro_orders_through_the_main_job_equal_the_test_driver(spark, app_dir, bootstrap, topic,
                                                                 schema_registry):
    source, sink = f"{topic}.orders", f"{topic}.totals"
    create(bootstrap, source, 2)
    writer = serdes.Avro(schema_registry, ORDER).for_topic(source)
    orders = [(f"u{i % 7}", {"item": f"item{i % 5}", "qty": i}, BASE_MS + i) for i in range(60)]
    unknown_id = b"\x00" + (876543).to_bytes(4, "big") + b"\x02x\x02"
    records = [(k, writer.serialize(v), ts) for k, v, ts in orders]
    records.insert(30, ("u1", unknown_id, BASE_MS + 30))
    parts = produce(bootstrap, source, records, partitions=2, raw=True)
    app = StreamsApp(_topology(schema_registry, source, sink), f"{topic}-app",
                     {source: io.kafka(bootstrap, source), sink: io.kafka(bootstrap, sink)},
                     spark=spark, config=LOG, checkpoint_dir=os.path.join(app_dir, "ck"))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()

    expected: dict[int, list] = {}  # per partition, as the test driver writes them
    for part in sorted(set(parts)):
        with TopologyTestDriver(_topology(schema_registry, source, sink), config=LOG) as driver:
            pipe = driver.create_input_topic(source, S, serdes.Bytes())
            for (key, value, ts), p in zip(records, parts):
                if p == part:
                    pipe.pipe_input(key, value, ts)
            out = driver.create_output_topic(sink, S, serdes.Avro(schema_registry))
            expected[part] = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    got = sorted(decoded(bootstrap, sink, S, serdes.Avro(schema_registry)), key=_order)
    assert got == sorted((r for rows in expected.values() for r in rows), key=_order)
    assert len(got) == len(orders) and app.metrics()["dropped-records-deserialization-error"] == 1

    frame = app.output(sink)  # typed: the Total record as a struct column
    assert dict(frame.dtypes)["value"] == "struct<item:string,total:bigint>"
    assert sorted(((r.key, r.value.asDict(), r.timestamp_ms) for r in frame.collect()),
                  key=_order) == got
