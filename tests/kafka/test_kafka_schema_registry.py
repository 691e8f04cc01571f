"""Avro, Protobuf and JSON Schema records in the Schema Registry's wire format through the main
job (Kafka to Spark to Kafka, a real registry server): the output topic holds what the test
driver writes, the typed results are the schema's struct with the driver's decoded values, and
a record whose schema id the registry does not know is skipped and counted under
``log_and_continue``."""

from __future__ import annotations

import os

import pytest
from click_proto import Click
from kafka_util import BASE_MS, create, decoded, produce

from kspark import StreamsBuilder, TopologyTestDriver, io, serdes
from kspark.spark import StreamsApp

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

S = serdes.String()
LOG = {"default.deserialization.exception.handler": "log_and_continue"}
AVRO_IN = {"type": "record", "name": "Order", "namespace": "shop",
           "fields": [{"name": "page", "type": "string"}, {"name": "count", "type": "long"}]}
AVRO_OUT = {**AVRO_IN, "name": "Total"}
JSON_IN = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
           "properties": {"page": {"type": "string"}, "count": {"type": "integer"}},
           "required": ["page", "count"]}


def _dict_total(order):
    return {"page": order["page"], "count": 10 * order["count"]}


def _proto_total(click):
    return Click(page=click.page, count=10 * click.count, tags=[click.page])


#: format -> (input serde, output serde, mapper, an input value of i, the typed row of a value)
FORMATS = {
    "avro": (lambda url: serdes.Avro(url, AVRO_IN), lambda url: serdes.Avro(url, AVRO_OUT),
             _dict_total, lambda i: {"page": f"/p{i % 5}", "count": i}, lambda v: v),
    "json-schema": (lambda url: serdes.JsonSchema(url, JSON_IN),
                    lambda url: serdes.JsonSchema(url, JSON_IN), _dict_total,
                    lambda i: {"page": f"/p{i % 5}", "count": i}, lambda v: v),
    "protobuf": (lambda url: serdes.Protobuf(url, Click), lambda url: serdes.Protobuf(url, Click),
                 _proto_total, lambda i: Click(page=f"/p{i % 5}", count=i),
                 lambda v: serdes.Protobuf("unused", Click).plain(v)),
}


def _topology(fmt: str, url: str, source: str, sink: str):
    make_in, make_out, mapper, _, _ = FORMATS[fmt]
    builder = StreamsBuilder()
    builder.stream(source, S, make_in(url)).map_values(mapper).to(sink, S, make_out(url))
    return builder.build()


def _order(record: tuple) -> tuple:
    key, value, ts = record
    return ts, key, repr(value)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_records_through_the_main_job_equal_the_test_driver(spark, app_dir, bootstrap, topic,
                                                            schema_registry, fmt):
    make_in, make_out, _, value_of, typed_row = FORMATS[fmt]
    source, sink = f"{topic}.in", f"{topic}.out"
    create(bootstrap, source, 2)
    writer = make_in(schema_registry).for_topic(source)
    inputs = [(f"u{i % 7}", value_of(i), BASE_MS + i) for i in range(40)]
    records = [(k, writer.serialize(v), ts) for k, v, ts in inputs]
    unknown_id = b"\x00" + (876543).to_bytes(4, "big") + b"\x00\x02x\x02"
    records.insert(20, ("u1", unknown_id, BASE_MS + 20))
    parts = produce(bootstrap, source, records, partitions=2, raw=True)
    app = StreamsApp(_topology(fmt, schema_registry, source, sink), f"{topic}-app",
                     {source: io.kafka(bootstrap, source), sink: io.kafka(bootstrap, sink)},
                     spark=spark, config=LOG, checkpoint_dir=os.path.join(app_dir, "ck"))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()

    reader = make_out(schema_registry)
    expected = []  # per partition, as the test driver writes them
    for part in sorted(set(parts)):
        with TopologyTestDriver(_topology(fmt, schema_registry, source, sink),
                                config=LOG) as driver:
            pipe = driver.create_input_topic(source, S, serdes.Bytes())
            for (key, value, ts), p in zip(records, parts):
                if p == part:
                    pipe.pipe_input(key, value, ts)
            out = driver.create_output_topic(sink, S, reader)
            expected += [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    got = sorted(decoded(bootstrap, sink, S, reader), key=_order)
    assert got == sorted(expected, key=_order) and len(got) == len(inputs)
    assert app.metrics()["dropped-records-deserialization-error"] == 1

    frame = app.output(sink)  # typed: the schema's struct, the driver's values
    assert dict(frame.dtypes)["value"].startswith("struct<page:string,count:bigint")
    rows = sorted(((r.key, r.value.asDict(recursive=True), r.timestamp_ms)
                   for r in frame.collect()), key=_order)
    assert rows == sorted(((k, typed_row(v), ts) for k, v, ts in got), key=_order)
