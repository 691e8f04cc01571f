"""Schema Registry serdes (issue 39) on the test driver: Avro, Protobuf and JSON Schema in the
registry's wire format through confluent-kafka's serializers, subjects by topic, record or
both, a reader schema reading records an older schema wrote, a windowed key whose inner key is
Avro, typed columns from the schema, and errors naming the schema id. The registry here is
confluent-kafka's in-process one (``mock://``), a fake standing in for a server."""

from __future__ import annotations

import json
import pickle
import uuid

import pyarrow as pa
import pytest
from click_proto import Click

from kspark import Materialized, SessionWindows, StreamsBuilder, TopologyTestDriver, serdes
from kspark.errors import KsparkError, SerializationError
from kspark.io.typed import column_for
from kspark.serdes.registry import registry_client

CLICK_V1 = {"type": "record", "name": "Click", "namespace": "demo",
            "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "long"}]}
#: v1 plus a field with a default: a reader of v2 reads what v1 wrote (backward compatible)
CLICK_V2 = {**CLICK_V1, "fields": [*CLICK_V1["fields"],
                                   {"name": "referrer", "type": ["null", "string"],
                                    "default": None}]}
S = serdes.String()


@pytest.fixture
def registry():
    """A fresh in-process registry's URL (a fake: confluent-kafka's mock client)."""
    return f"mock://{uuid.uuid4().hex}"


def _pass_through(value_in, value_out, *, key_in=S, key_out=S):
    builder = StreamsBuilder()
    builder.stream("clicks", key_in, value_in).to("out", key_out, value_out)
    return builder.build()


def _subjects(registry) -> list[str]:
    return sorted(registry_client(registry).get_subjects())


def test_avro_values_cross_the_driver_in_the_wire_format_under_topic_subjects(registry):
    topology = _pass_through(serdes.Avro(registry, CLICK_V1), serdes.Avro(registry, CLICK_V1))
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("clicks", S, serdes.Avro(registry, CLICK_V1)).pipe_input(
            "u1", {"page": "/a", "n": 3}, 10)
        raw = driver.create_output_topic("out", serdes.Bytes(), serdes.Bytes()).read_record()
        assert raw.value[0] == 0  # magic byte, then the schema id the registry gave
        schema_id = int.from_bytes(raw.value[1:5], "big")
        client = registry_client(registry)
        assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "Click"
        assert _subjects(registry) == ["clicks-value", "out-value"]
        assert client.get_latest_version("out-value").schema_id == schema_id
        out = driver.create_output_topic("out", S, serdes.Avro(registry))  # writer's schema
        driver.create_input_topic("clicks", S, serdes.Avro(registry, CLICK_V1)).pipe_input(
            "u2", {"page": "/b", "n": 4}, 11)
        assert out.read_key_value().value == {"page": "/b", "n": 4}


@pytest.mark.parametrize("strategy, subject", [("record", "demo.Click"),
                                               ("topic_record", "out-demo.Click")])
def test_record_name_strategies_name_the_subject_after_the_record(registry, strategy, subject):
    writer = serdes.Avro(registry, CLICK_V1, subject_name_strategy=strategy)
    with TopologyTestDriver(_pass_through(serdes.Json(), writer)) as driver:
        driver.create_input_topic("clicks", S, serdes.Json()).pipe_input(
            "u1", {"page": "/a", "n": 1}, 0)
    assert _subjects(registry) == [subject]


def test_a_reader_schema_reads_what_an_older_schema_wrote(registry):
    old = serdes.Avro(registry, CLICK_V1)
    topology = _pass_through(serdes.Avro(registry, CLICK_V2), serdes.Avro(registry, CLICK_V2))
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("clicks", S, old)
        pipe.pipe_input("u1", {"page": "/a", "n": 1}, 0)
        out = driver.create_output_topic("out", S, serdes.Avro(registry, CLICK_V2))
        assert out.read_key_value().value == {"page": "/a", "n": 1, "referrer": None}
        # the output was written with v2: a reader still on v1 reads its v1 fields
        driver.create_input_topic("clicks", S, serdes.Avro(registry, CLICK_V2)).pipe_input(
            "u2", {"page": "/b", "n": 2, "referrer": "search"}, 1)
        old_reader = driver.create_output_topic("out", S, serdes.Avro(registry, CLICK_V1))
        assert old_reader.read_key_value().value == {"page": "/b", "n": 2}


def test_a_session_windowed_key_with_an_avro_inner_key(registry):
    user = serdes.Avro(registry, "string", is_key=True)
    windowed = serdes.SessionWindowed(serdes.Avro(registry, "string", is_key=True))
    builder = StreamsBuilder()
    (builder.stream("clicks", user, serdes.Json()).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 0))
        .count(Materialized("counts")).to_stream().to("out", windowed, serdes.Long()))
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("clicks", user, serdes.Json())
        for ts, who in ((0, "ann"), (50, "ann"), (60, "bob")):
            pipe.pipe_input(who, {"page": "/"}, ts)
        out = driver.create_output_topic("out", windowed, serdes.Long())
        got = [(r.key.key, r.key.window.start, r.key.window.end, r.value)
               for r in out.read_records_to_list()]
        raw = driver.create_output_topic("out", serdes.Bytes(), serdes.Bytes())
        assert all(r.key[0] == 0 for r in raw.read_records_to_list())
    assert got == [("ann", 0, 0, 1), ("ann", 0, 0, None), ("ann", 0, 50, 2), ("bob", 60, 60, 1)]
    assert _subjects(registry) == ["clicks-key", "out-key"]


def test_protobuf_messages_round_trip_and_become_typed_columns(registry):
    proto = serdes.Protobuf(registry, Click)
    with TopologyTestDriver(_pass_through(proto, proto)) as driver:
        click = Click(page="/a", count=7, tags=["x", "y"], kind=1)
        click.referrer.host = "example.org"
        driver.create_input_topic("clicks", S, proto).pipe_input("u1", click, 0)
        driver.create_input_topic("clicks", S, proto).pipe_input("u2", Click(page="/b"), 1)
        out = [kv.value for kv in driver.create_output_topic("out", S, proto)
               .read_key_values_to_list()]
    assert out == [click, Click(page="/b")]
    assert _subjects(registry) == ["clicks-value", "out-value"]
    column = column_for(proto).from_values(out, "value")
    assert column.type == pa.struct([
        ("page", pa.string()), ("count", pa.int64()), ("tags", pa.list_(pa.string())),
        ("referrer", pa.struct([("host", pa.string())])), ("kind", pa.string())])
    assert column.to_pylist() == [
        {"page": "/a", "count": 7, "tags": ["x", "y"], "referrer": {"host": "example.org"},
         "kind": "BUY"},
        {"page": "/b", "count": 0, "tags": [], "referrer": None, "kind": "VIEW"}]


def test_json_schema_validates_what_it_writes(registry):
    schema = {"type": "object", "properties": {"page": {"type": "string"},
                                               "n": {"type": "integer"}},
              "required": ["page"]}
    js = serdes.JsonSchema(registry, schema)
    with TopologyTestDriver(_pass_through(js, js)) as driver:
        pipe = driver.create_input_topic("clicks", S, js)
        pipe.pipe_input("u1", {"page": "/a", "n": 2}, 0)
        out = driver.create_output_topic("out", S, serdes.JsonSchema(registry))
        assert out.read_key_value().value == {"page": "/a", "n": 2}
        with pytest.raises(SerializationError, match="JsonSchema serde cannot serialize"):
            pipe.pipe_input("u2", {"n": "two"}, 1)
    assert column_for(js).type == pa.struct([("page", pa.string()), ("n", pa.int64())])


def test_avro_values_become_a_struct_column_of_their_schema(registry):
    column = column_for(serdes.Avro(registry, CLICK_V2))
    assert column.type == pa.struct([("page", pa.string()), ("n", pa.int64()),
                                     ("referrer", pa.string())])
    writer = serdes.Avro(registry, CLICK_V2).for_topic("out")
    data = pa.array([writer.serialize({"page": "/a", "n": 1, "referrer": None}), None])
    assert column.from_bytes(data, "value").to_pylist() == [
        {"page": "/a", "n": 1, "referrer": None}, None]


def test_an_unknown_schema_id_or_foreign_bytes_name_what_and_where(registry):
    topology = _pass_through(serdes.Avro(registry, CLICK_V1), serdes.Avro(registry, CLICK_V1))
    unknown = b"\x00" + (4242).to_bytes(4, "big") + b"\x02a\x02"
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("clicks", S, serdes.Bytes())
        with pytest.raises(KsparkError) as caught:
            pipe.pipe_input("u1", unknown, 0)
    first = str(caught.value).splitlines()[0]
    assert "topic 'clicks' partition 0 offset 0" in first and "schema id 4242" in first
    with pytest.raises(SerializationError, match="not in the Schema Registry's wire format"):
        serdes.Avro(registry, CLICK_V1).deserialize(b'{"page": "/a"}')
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    with TopologyTestDriver(topology, config=config) as driver:
        driver.create_input_topic("clicks", S, serdes.Bytes()).pipe_input("u1", unknown, 0)
        assert driver.metrics()["dropped-records-deserialization-error"] == 1


def test_serdes_travel_by_their_settings(registry):
    avro = serdes.Avro(registry, CLICK_V1, is_key=False).for_topic("clicks")
    copy = pickle.loads(pickle.dumps(avro))
    assert copy == avro and copy.topic == "clicks" and copy != serdes.Avro(registry, CLICK_V1)
    data = avro.serialize({"page": "/a", "n": 1})
    assert copy.deserialize(data) == {"page": "/a", "n": 1}  # a client of its own, same registry
    client_serde = serdes.Avro(registry_client(registry), CLICK_V1)
    with pytest.raises(TypeError, match="give the registry's URL or settings"):
        pickle.dumps(client_serde)
    with pytest.raises(SerializationError, match="no topic to name the subject after"):
        serdes.Avro(registry, CLICK_V1).serialize({"page": "/a", "n": 1})
    with pytest.raises(SerializationError, match="only deserializes"):
        serdes.Avro(registry).for_topic("x").serialize({"page": "/a", "n": 1})
