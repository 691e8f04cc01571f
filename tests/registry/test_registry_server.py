"""Schema Registry serdes against a real registry server (Apicurio Registry's
Confluent-compatible API, started by the test set-up): each format registers its schema under
the topic's subject and reads back what it wrote, a reader schema reads an older writer's
records, and a schema id the server does not know is named."""

from __future__ import annotations

import threading
import uuid

import pytest
from click_proto import Click

from kspark import StreamsBuilder, TopologyTestDriver, serdes
from kspark.errors import KsparkError
from kspark.serdes.registry import registry_client

S = serdes.String()
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "item", "type": "string"}, {"name": "qty", "type": "int"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "coupon", "type": ["null", "string"],
                                    "default": None}]}
JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "properties": {"item": {"type": "string"}, "qty": {"type": "integer"}}}


def _through(value_in, value_out, topic: str, out: str):
    builder = StreamsBuilder()
    builder.stream(topic, S, value_in).to(out, S, value_out)
    return builder.build()


@pytest.mark.parametrize("make, value", [
    (lambda url: serdes.Avro(url, ORDER_V1), {"item": "pen", "qty": 2}),
    (lambda url: serdes.Protobuf(url, Click), Click(page="/a", count=3, tags=["t"])),
    (lambda url: serdes.JsonSchema(url, JSON_SCHEMA), {"item": "pen", "qty": 2}),
], ids=["avro", "protobuf", "json-schema"])
def test_each_format_registers_under_the_topic_subject_and_reads_back(schema_registry, make,
                                                                       value):
    topic, out = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    serde = make(schema_registry)
    with TopologyTestDriver(_through(serde, serde, topic, out)) as driver:
        driver.create_input_topic(topic, S, serde).pipe_input("k", value, 5)
        record = driver.create_output_topic(out, S, serde).read_record()
        raw = driver.create_output_topic(out, S, serdes.Bytes())
    assert record.value == value
    client = registry_client(schema_registry)
    subjects = set(client.get_subjects())
    assert {f"{topic}-value", f"{out}-value"} <= subjects
    assert client.get_latest_version(f"{out}-value").schema_id >= 1
    assert raw.is_empty()  # read above: the one record


def test_a_reader_schema_reads_an_older_writers_records_from_the_server(schema_registry):
    topic, out = f"orders-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    reader = serdes.Avro(schema_registry, ORDER_V2)
    with TopologyTestDriver(_through(reader, reader, topic, out)) as driver:
        driver.create_input_topic(topic, S, serdes.Avro(schema_registry, ORDER_V1)).pipe_input(
            "k", {"item": "pen", "qty": 2}, 0)
        got = driver.create_output_topic(out, S, serdes.Avro(schema_registry)).read_value()
    assert got == {"item": "pen", "qty": 2, "coupon": None}


def test_a_schema_id_the_server_does_not_know_is_named(schema_registry):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    avro = serdes.Avro(schema_registry, ORDER_V1)
    with TopologyTestDriver(_through(avro, avro, topic, "out")) as driver:
        pipe = driver.create_input_topic(topic, S, serdes.Bytes())
        with pytest.raises(KsparkError) as caught:
            pipe.pipe_input("k", b"\x00" + (987654).to_bytes(4, "big") + b"\x06pen\x04", 0)
    first = str(caught.value).splitlines()[0]
    assert f"topic '{topic}' partition 0 offset 0" in first and "schema id 987654" in first


def test_writers_registering_one_new_subject_at_once_all_succeed(schema_registry):
    """Spark's tasks register a sink's schema side by side; the server may refuse all but one
    of simultaneous first registrations (409), which the serde retries."""
    for _ in range(3):
        topic = f"race-{uuid.uuid4().hex[:8]}"
        writers = [serdes.Avro(schema_registry, ORDER_V1).for_topic(topic) for _ in range(8)]
        start, results, errors = threading.Barrier(len(writers)), [], []

        def write(serde, start=start, results=results, errors=errors) -> None:
            start.wait()
            try:
                results.append(serde.serialize({"item": "pen", "qty": 1}))
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in writers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [] and len(set(results)) == 1  # one schema id for all
