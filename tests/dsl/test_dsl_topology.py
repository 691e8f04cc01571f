"""Node naming, repartition topics and sub-topologies of DSL-built topologies."""

from __future__ import annotations

import pytest

from kspark import serdes
from kspark.dsl import Materialized, StreamsBuilder
from kspark.dsl.internals.internal_serde import ChangeSerde, Pickle
from kspark.records import Change
from kspark.testing import TopologyTestDriver
from kspark.topology.topology import SinkNode, SourceNode

S = serdes.String()

WORD_COUNT = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [text])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> counts-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: counts-repartition-filter (stores: [])
      --> counts-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: counts-repartition-sink (topic: counts-repartition)
      <-- counts-repartition-filter

  Sub-topology: 1
    Source: counts-repartition-source (topics: [counts-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts])
      --> KTABLE-TOSTREAM-0000000007
      <-- counts-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: word-counts)
      <-- KTABLE-TOSTREAM-0000000007

"""


def word_count(builder: StreamsBuilder, materialized="counts") -> None:
    (builder.stream("text", S, S)
     .flat_map_values(lambda line: line.lower().split())
     .group_by(lambda key, word: word)
     .count(materialized)
     .to_stream()
     .to("word-counts", S, serdes.Long()))


def test_word_count_describes_like_kafka_streams():
    builder = StreamsBuilder()
    word_count(builder)
    topology = builder.build()
    assert str(topology.describe()) == WORD_COUNT
    assert topology.internal_topics == {"counts-repartition": None}
    st0, st1 = topology.sub_topologies()
    assert "counts-repartition" in st0.sink_topics
    assert st1.source_topics == ["counts-repartition"]
    assert st1.stores == ["counts"] and st0.stores == []


def test_word_count_runs_across_the_repartition_topic():
    builder = StreamsBuilder()
    word_count(builder)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("text", S, S)
        inp.pipe_input("line-1", "a b A", 10)
        inp.pipe_input("line-2", "b", 20)
        out = driver.create_output_topic("word-counts", S, serdes.Long())
        assert out.read_key_values_to_list() == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
        # the repartition topic is internal: not an output of the application
        assert driver.produced_topic_names() == ["word-counts"]
        assert driver.get_key_value_store("counts").get("b") == 2


def test_unnamed_store_names_the_repartition_topic():
    builder = StreamsBuilder()
    table = builder.stream("in").select_key(lambda k, v: v).group_by_key().count()
    topology = builder.build()
    assert table.queryable_store_name is None
    store = "KSTREAM-AGGREGATE-STATE-STORE-0000000002"
    assert list(topology.internal_topics) == [f"{store}-repartition"]
    assert topology.store_builders.keys() == {store}
    assert table.node_name == "KSTREAM-AGGREGATE-0000000003"


def test_group_by_key_on_an_unchanged_key_does_not_repartition():
    builder = StreamsBuilder()
    (builder.stream("in", S, S).filter(lambda k, v: True).map_values(len).peek(print)
     .flat_map_values(lambda v: [v]).group_by_key().count("c"))
    topology = builder.build()
    assert len(topology.sub_topologies()) == 1
    assert topology.internal_topics == {}
    assert "repartition" not in str(topology.describe())


def test_every_key_changing_operator_repartitions_before_aggregation():
    changers = [
        lambda s, other: s.map(lambda k, v: (v, k)),
        lambda s, other: s.select_key(lambda k, v: v),
        lambda s, other: s.flat_map(lambda k, v: [(v, k)]),
        lambda s, other: s.select_key(lambda k, v: v).filter(lambda k, v: True).map_values(str),
        lambda s, other: s.merge(other.map(lambda k, v: (k, v))),
    ]
    for change in changers:
        builder = StreamsBuilder()
        change(builder.stream("in", S, S), builder.stream("other", S, S)).group_by_key().count("c")
        topology = builder.build()
        assert list(topology.internal_topics) == ["c-repartition"]
        sinks = [n for n in topology.nodes.values() if isinstance(n, SinkNode)]
        assert [n.topic for n in sinks] == ["c-repartition"]


def test_group_by_always_repartitions_and_uses_given_serdes():
    builder = StreamsBuilder()
    builder.stream("in", S, S).group_by(lambda k, v: k, key_serde=S, value_serde=S).count("c")
    topology = builder.build()
    assert len(topology.sub_topologies()) == 2
    sink = next(n for n in topology.nodes.values() if isinstance(n, SinkNode))
    source = next(n for n in topology.nodes.values()
                  if isinstance(n, SourceNode) and n.topics == ["c-repartition"])
    assert sink.key_serde == S and sink.value_serde == S
    assert source.key_serde == S and source.value_serde == S


def test_default_repartition_serde_round_trips_python_values():
    builder = StreamsBuilder()
    (builder.stream("in").group_by(lambda k, v: (v["a"], v["b"])).count("c"))
    topology = builder.build()
    sink = next(n for n in topology.nodes.values() if isinstance(n, SinkNode))
    assert isinstance(sink.key_serde, Pickle) and isinstance(sink.value_serde, Pickle)
    with TopologyTestDriver(topology) as driver:
        inp = driver.create_input_topic("in")
        inp.pipe_input("k", {"a": 1, "b": "x"}, 1)
        inp.pipe_input("k", {"a": 1, "b": "x"}, 2)
        store = driver.get_key_value_store("c")
        assert store.get((1, "x")) == 2  # a tuple key survived the repartition topic


def test_null_keys_are_dropped_and_counted_before_the_repartition_topic():
    builder = StreamsBuilder()
    builder.stream("in", S, S).select_key(lambda k, v: None if v == "drop" else v) \
        .group_by_key().count("c").to_stream().to("out", S, serdes.Long())
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input("k", "drop", 1)
        inp.pipe_input("k", "keep", 2)
        metrics = driver.metrics()
        assert metrics["dropped-records-total"] == 1
        assert metrics["dropped-records-null-key"] == 1
        out = driver.create_output_topic("out", S, serdes.Long())
        assert out.read_key_values_to_list() == [("keep", 1)]


@pytest.mark.parametrize("left_join", [False, True])
def test_repartition_keeps_null_keys_only_for_a_join_downstream_that_joins_them(left_join):
    """Kafka Streams 4.3.1 settles each repartition topic's null-key filter when it builds the
    topology (``InternalStreamsBuilder#rewriteRepartitionNodes``): ``repartition()`` drops
    null keys unless a left or outer join anywhere downstream joins them, and then keeps them
    on every path (the written-out stream too). kspark kept them always (found by the
    oracle's ``headers`` shape)."""
    builder = StreamsBuilder()
    stream = builder.stream("in", S, S).repartition()
    stream.to("out", S, S)
    if left_join:
        table = builder.table("t", S, S)
        stream.left_join(table, lambda v, w: f"{v}+{w}").to("joined", S, S)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        inp.pipe_input(None, "n", 1)
        inp.pipe_input("k", "v", 2)
        out = driver.create_output_topic("out", S, S).read_key_values_to_list()
        if left_join:
            assert out == [(None, "n"), ("k", "v")]
            assert driver.create_output_topic("joined", S, S).read_key_values_to_list() == [
                (None, "n+None"), ("k", "v+None")]
        else:
            assert out == [("k", "v")]
            assert driver.metrics()["dropped-records-null-key"] == 1


def test_table_source_naming():
    builder = StreamsBuilder()
    unnamed = builder.table("users", S, S)
    named = builder.table("groups", S, S, materialized=Materialized("groups-store"))
    topology = builder.build()
    assert unnamed.node_name == "KTABLE-SOURCE-0000000002"
    assert unnamed.queryable_store_name is None
    assert named.queryable_store_name == "groups-store"
    # an unnamed table keeps no store until an operator needs one (Kafka Streams' rule); its
    # store's name is generated all the same, so the names after it stay as they are
    assert set(topology.store_builders) == {"groups-store"}
    unnamed.group_by(lambda k, v: (v, k)).count()
    assert "users-STATE-STORE-0000000000" in topology.store_builders
    text = str(topology.describe())
    assert "Source: KSTREAM-SOURCE-0000000001 (topics: [users])" in text
    assert "Processor: KTABLE-SOURCE-0000000002 (stores: [users-STATE-STORE-0000000000])" in text


def test_table_group_by_repartitions_with_change_serde():
    builder = StreamsBuilder()
    table = builder.table("in", S, S)
    table.group_by(lambda k, v: (v, k), key_serde=S, value_serde=S).count("per-value")
    topology = builder.build()
    assert list(topology.internal_topics) == ["per-value-repartition"]
    assert len(topology.sub_topologies()) == 2
    text = str(topology.describe())
    assert "KTABLE-SELECT-0000000003" in text and "KTABLE-AGGREGATE-0000000006" in text
    sink = next(n for n in topology.nodes.values() if isinstance(n, SinkNode))
    assert isinstance(sink.value_serde, ChangeSerde)
    assert sink.value_serde.deserialize(sink.value_serde.serialize(Change("a", None))) == \
        Change("a", None)
    assert sink.value_serde.deserialize(sink.value_serde.serialize(Change("", "b"))) == \
        Change("", "b")
    with TopologyTestDriver(topology) as driver:
        inp = driver.create_input_topic("in", S, S)
        for key, value in [("a", "x"), ("b", "x"), ("a", "y")]:
            inp.pipe_input(key, value, 1)
        assert driver.get_key_value_store("per-value").all() == [("x", 1), ("y", 1)]


def test_to_table_repartitions_only_after_a_key_change():
    builder = StreamsBuilder()
    builder.stream("a", S, S).to_table("plain")
    builder.stream("b", S, S).select_key(lambda k, v: v).to_table("rekeyed")
    topology = builder.build()
    assert list(topology.internal_topics) == ["KSTREAM-TOTABLE-0000000004-repartition"]
    assert len(topology.sub_topologies()) == 3


def test_reduce_names_follow_kafka():
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().reduce(lambda a, b: a + b)
    assert set(builder.build().store_builders) == {"KSTREAM-REDUCE-STATE-STORE-0000000001"}
    assert "KSTREAM-REDUCE-0000000002" in builder.build().nodes


def test_aggregation_stores_default_to_the_serdes_kafka_streams_gives_them():
    """Unless Materialized names serdes: the grouping's key serde, Long for a count, the
    values' serde for a reduce, kspark's pickle (None) for an aggregate of any type."""
    from kspark import SessionWindows, TimeWindows, serdes
    from kspark.dsl import Materialized

    b = StreamsBuilder()
    grouped = b.stream("in", serdes.String(), serdes.Json()).group_by_key(
        serdes.String(), serdes.Json())
    grouped.count(Materialized("kv-count"))
    grouped.reduce(lambda a, v: v, Materialized("kv-reduce"))
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 0)).count(
        Materialized("s-count"))
    grouped.windowed_by(TimeWindows.of_size_and_grace(10, 0)).aggregate(
        list, lambda k, v, agg: [*agg, v], Materialized("w-agg"))
    grouped.count(Materialized("kv-own", key_serde=serdes.Bytes(), value_serde=serdes.Json()))
    stores = b.build().store_builders
    serde_names = {name: (type(s.key_serde).__name__, type(s.value_serde).__name__)
                   for name, s in stores.items()}
    assert serde_names == {
        "kv-count": ("String", "Long"), "kv-reduce": ("String", "Json"),
        "s-count": ("String", "Long"), "w-agg": ("String", "NoneType"),
        "kv-own": ("Bytes", "Json"),
    }
