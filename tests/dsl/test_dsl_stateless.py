"""KStream's stateless operators, merge, to and process."""

from __future__ import annotations

import pytest
from dsl_util import record_from

from kspark import serdes
from kspark.dsl import StreamsBuilder
from kspark.errors import SerializationError, StreamsError, TopologyError
from kspark.processor import Processor
from kspark.records import Record
from kspark.state.builders import Stores
from kspark.testing import TopologyTestDriver

S = serdes.String()


def run(build, inputs, topic_in="in", topic_out="out", key_serde=S, value_serde=S,
        out_value_serde=None):
    """Build with ``build(stream)``, pipe ``(key, value, ts)`` inputs, return output records."""
    builder = StreamsBuilder()
    out_value_serde = out_value_serde or value_serde
    build(builder.stream(topic_in, key_serde, value_serde)).to(topic_out, key_serde,
                                                              out_value_serde)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic(topic_in, key_serde, value_serde)
        for key, value, ts in inputs:
            inp.pipe_input(key, value, ts)
        out = driver.create_output_topic(topic_out, key_serde, out_value_serde)
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def test_filter_and_filter_not():
    data = [("a", "1", 1), ("b", "22", 2), ("c", "333", 3)]
    assert run(lambda s: s.filter(lambda k, v: len(v) >= 2), data) == data[1:]
    assert run(lambda s: s.filter_not(lambda k, v: len(v) >= 2), data) == data[:1]
    assert run(lambda s: s.filter(lambda k, v: k != "b"), data) == [data[0], data[2]]


def test_map_values_keeps_key_and_timestamp():
    out = run(lambda s: s.map_values(str.upper), [("a", "x", 5), (None, "y", 6)])
    assert out == [("a", "X", 5), (None, "Y", 6)]


def test_map_and_select_key():
    out = run(lambda s: s.map(lambda k, v: (v, k)), [("a", "x", 5), ("b", "y", 7)])
    assert out == [("x", "a", 5), ("y", "b", 7)]
    out = run(lambda s: s.select_key(lambda k, v: k + v), [("a", "x", 5)])
    assert out == [("ax", "x", 5)]


def test_flat_map_and_flat_map_values():
    data = [("k", "ab", 3), ("z", "", 4)]
    out = run(lambda s: s.flat_map(lambda k, v: [(c, k) for c in v]), data)
    assert out == [("a", "k", 3), ("b", "k", 3)]
    out = run(lambda s: s.flat_map_values(lambda v: v.split(",")), [("k", "x,y,z", 9)])
    assert out == [("k", "x", 9), ("k", "y", 9), ("k", "z", 9)]


def test_flat_map_must_yield_pairs():
    with pytest.raises(StreamsError, match="flat_map's mapper"):
        run(lambda s: s.flat_map(lambda k, v: [v]), [("k", "abc", 1)])


def test_peek_sees_every_record_and_passes_it_on():
    seen = []
    data = [("a", "1", 1), (None, "2", 2)]
    assert run(lambda s: s.peek(lambda k, v: seen.append((k, v))), data) == data
    assert seen == [("a", "1"), (None, "2")]


def test_null_keys_pass_through_stateless_operators():
    out = run(lambda s: s.filter(lambda k, v: True).map_values(lambda v: v * 2)
              .flat_map_values(lambda v: [v]).peek(lambda k, v: None), [(None, "x", 1)])
    assert out == [(None, "xx", 1)]


def test_headers_are_kept_by_stateless_operators():
    builder = StreamsBuilder()
    builder.stream("in", S, S).map(lambda k, v: (v, k)).map_values(str.upper).to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 1, headers={"h": "1"})
        rec = driver.create_output_topic("out", S, S).read_record()
    assert (rec.key, rec.value, rec.headers) == ("v", "K", (("h", b"1"),))


def test_merge_interleaves_in_arrival_order():
    builder = StreamsBuilder()
    a = builder.stream("a", S, S)
    b = builder.stream("b", S, S).map_values(str.upper)
    a.merge(b).to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        ta = driver.create_input_topic("a", S, S)
        tb = driver.create_input_topic("b", S, S)
        ta.pipe_input("1", "x", 1)
        tb.pipe_input("2", "y", 2)
        ta.pipe_input("3", "z", 3)
        out = driver.create_output_topic("out", S, S).read_key_values_to_list()
    assert out == [("1", "x"), ("2", "Y"), ("3", "z")]
    assert "KSTREAM-MERGE-0000000003" in str(builder.build().describe())


def test_merge_needs_a_stream_of_the_same_builder():
    s = StreamsBuilder().stream("a")
    with pytest.raises(ValueError):
        s.merge(StreamsBuilder().stream("b"))


def test_stream_of_several_topics():
    builder = StreamsBuilder()
    builder.stream(["a", "b"], S, S).to("out")
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("b", S, S).pipe_input("k", "from-b", 1)
        driver.create_input_topic("a", S, S).pipe_input("k", "from-a", 2)
        out = driver.create_output_topic("out", S, S).read_values_to_list()
    assert out == ["from-b", "from-a"]


def test_to_uses_given_serdes_then_the_streams_serdes():
    builder = StreamsBuilder()
    s = builder.stream("in", S, serdes.Json())
    s.map_values(len).to("lengths", value_serde=serdes.Long())
    s.to("copy")  # inherits String / Json from the source
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, serdes.Json()).pipe_input("k", [1, 2, 3], 1)
        assert driver.create_output_topic("lengths", S, serdes.Long()).read_value() == 3
        raw = driver.create_output_topic("copy", serdes.Bytes(), serdes.Bytes()).read_record()
    assert (raw.key, raw.value) == (b"k", b"[1,2,3]")


def test_to_with_wrong_serde_fails_naming_the_sink():
    builder = StreamsBuilder()
    builder.stream("in", S, S).to("out", value_serde=serdes.Long())
    with TopologyTestDriver(builder.build()) as driver, pytest.raises(
            StreamsError, match="KSTREAM-SINK-0000000001"):
        driver.create_input_topic("in", S, S).pipe_input("k", "not a long", 1)


class _RunningTotal(Processor):
    def init(self, context):
        super().init(context)
        self.store = context.get_state_store("totals")

    def process(self, record: Record) -> None:
        total = (self.store.get(record.key) or 0) + int(record.value)
        self.store.put(record.key, total)
        self.context.forward(record.with_value(str(total)))


def test_process_connects_stores_and_forwards():
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store("totals"))
    out_stream = builder.stream("in", S, S).process(_RunningTotal, "totals")
    out_stream.to("out", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        for k, v in [("a", "1"), ("b", "5"), ("a", "2")]:
            inp.pipe_input(k, v, 1)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("a", "1"), ("b", "5"), ("a", "3")]
        assert driver.get_key_value_store("totals").get("a") == 3
    assert "KSTREAM-PROCESSOR-0000000001 (stores: [totals])" in str(builder.build().describe())


def test_process_with_unknown_store_is_an_error():
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="nope"):
        builder.stream("in").process(_RunningTotal, "nope")


def test_process_marks_the_key_as_possibly_changed():
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store("totals"))
    builder.stream("in", S, S).process(_RunningTotal, "totals").group_by_key().count()
    assert len(builder.build().sub_topologies()) == 2


def test_recorder_helper_sees_forwarded_records():
    # guards the helper the other DSL tests rely on
    builder = StreamsBuilder()
    s = builder.stream("in", S, S).map_values(str.upper)
    seen = record_from(builder, s.node_name)
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 4)
    assert seen == [("k", "V", 4)]


def test_serialization_error_class_is_public():
    # a value the sink's serde cannot encode is reported, never silently dropped
    builder = StreamsBuilder()
    builder.stream("in", S, S).map_values(lambda v: object()).to("out", value_serde=S)
    with TopologyTestDriver(builder.build()) as driver, pytest.raises(
            (StreamsError, SerializationError)):
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 1)
