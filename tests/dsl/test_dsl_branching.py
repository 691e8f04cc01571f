"""``KStream.split`` (branches named as Kafka Streams names them; the oracle's ``branch`` shape
checks them against Kafka Streams itself), ``foreach``, ``print`` and ``KTable.to_stream`` with
a key mapper."""

from __future__ import annotations

import io

import pytest

from kspark import Materialized, serdes
from kspark.dsl import StreamsBuilder
from kspark.errors import StreamsError, TopologyError
from kspark.testing import TopologyTestDriver

S = serdes.String()
L = serdes.Long()


def tagged(branches, builder=None):
    """Write each branch's records to "out" as ``"<branch name>:<value>"``."""
    for name, stream in branches.items():
        stream.map_values(lambda v, name=name: f"{name}:{v}").to("out", S, S)


def run(builder, values, key="k"):
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("in", S, L)
        for i, v in enumerate(values):
            pipe.pipe_input(key if not isinstance(v, tuple) else v[0],
                            v if not isinstance(v, tuple) else v[1], i)
        return driver.create_output_topic("out", S, S).read_values_to_list()


def test_a_record_takes_the_first_branch_whose_predicate_holds():
    b = StreamsBuilder()
    branches = (b.stream("in", S, L).split(prefix="s-")
                .branch(lambda k, v: v % 2 == 0, name="even")
                .branch(lambda k, v: v > 10, name="big")
                .default_branch(name="rest"))
    assert list(branches) == ["s-even", "s-big", "s-rest"]
    tagged(branches)
    assert run(b, [1, 2, 11, 12, 13]) == ["s-rest:1", "s-even:2", "s-big:11", "s-even:12",
                                          "s-big:13"]


def test_unnamed_branches_are_numbered_from_one_and_the_default_is_zero():
    b = StreamsBuilder()
    branches = (b.stream("in", S, L).split()
                .branch(lambda k, v: v == 1).branch(lambda k, v: v == 2).default_branch())
    # the source took index 0, the splitter 1; each branch takes one more, as in Kafka Streams
    assert list(branches) == ["KSTREAM-BRANCH-00000000011", "KSTREAM-BRANCH-00000000012",
                              "KSTREAM-BRANCH-00000000010"]
    tagged(branches)
    nodes = b.build().nodes
    assert "KSTREAM-MAPVALUES-0000000005" in nodes  # after indexes 2, 3 and 4 of the branches


def test_without_a_default_branch_unmatched_records_are_dropped():
    b = StreamsBuilder()
    tagged(b.stream("in", S, L).split(prefix="p").branch(lambda k, v: v > 1, name="x")
           .no_default_branch())
    assert run(b, [1, 2, 0, 3]) == ["px:2", "px:3"]


def test_a_chain_replaces_its_branch_or_leaves_it_out():
    b = StreamsBuilder()
    consumed = []
    branches = (b.stream("in", S, L).split(prefix="c-")
                .branch(lambda k, v: v < 0, name="neg", chain=lambda s: s.map_values(abs))
                .branch(lambda k, v: v == 0, name="zero",
                        chain=lambda s: s.foreach(lambda k, v: consumed.append(v)))
                .default_branch(chain=lambda s: s.filter(lambda k, v: v != 5)))
    assert list(branches) == ["c-neg", "c-0"]
    tagged(branches)
    assert run(b, [-3, 0, 5, 4]) == ["c-neg:3", "c-0:4"]
    assert consumed == [0]


def test_branching_mistakes_are_refused():
    b = StreamsBuilder()
    split = b.stream("in", S, L).split(prefix="d-").branch(lambda k, v: True, name="a")
    with pytest.raises(TopologyError, match="d-a"):
        split.branch(lambda k, v: True, name="a")
    with pytest.raises(TypeError, match="predicate"):
        split.branch("not callable")
    with pytest.raises(ValueError, match="non-empty"):
        split.branch(lambda k, v: True, name="")
    with pytest.raises(TypeError, match="chain of branch 'd-c' must return a KStream"):
        split.branch(lambda k, v: True, name="c", chain=lambda s: 42)
    split.no_default_branch()
    with pytest.raises(ValueError, match="closed"):
        split.branch(lambda k, v: True)
    with pytest.raises(ValueError, match="closed"):
        split.default_branch()


def test_a_predicate_that_raises_names_the_splitter_and_the_record():
    b = StreamsBuilder()
    tagged(b.stream("in", S, L).split(prefix="e-").branch(lambda k, v: 1 / v > 0)
           .no_default_branch())
    with pytest.raises(StreamsError) as err:
        run(b, [1, 0])
    first = str(err.value).splitlines()[0]
    assert "processor 'e-'" in first and "ZeroDivisionError" in first
    assert "topic 'in' partition 0 offset 1 key 'k'" in first


def test_a_branch_after_a_key_change_repartitions_before_grouping():
    b = StreamsBuilder()
    branches = (b.stream("in", S, L).select_key(lambda k, v: f"g{v % 2}").split(prefix="r-")
                .branch(lambda k, v: v > 0, name="pos").no_default_branch())
    branches["r-pos"].group_by_key().count(Materialized("counts")).to_stream().to("out", S, L)
    topology = b.build()
    assert any(t.endswith("-repartition") for t in topology.internal_topics)
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("in", S, L)
        for i, v in enumerate([1, 2, 3, -1]):
            pipe.pipe_input("k", v, i)
        out = driver.create_output_topic("out", S, L).read_key_values_to_list()
    assert out == [("g1", 1), ("g0", 1), ("g1", 2)]


def test_foreach_and_print_see_every_record():
    b = StreamsBuilder()
    seen = []
    printed = io.StringIO()
    stream = b.stream("in", S, L)
    stream.foreach(lambda k, v: seen.append((k, v)))
    stream.print(file=printed)
    stream.print(label="clicks", mapper=lambda k, v: f"{k}={v}", file=printed)
    topology = b.build()
    assert "KSTREAM-FOREACH-0000000001" in topology.nodes
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("in", S, L)
        pipe.pipe_input("a", 1, 0)
        pipe.pipe_input("b", None, 1)
    assert seen == [("a", 1), ("b", None)]
    assert printed.getvalue().splitlines() == [
        "[KSTREAM-SOURCE-0000000000]: a, 1", "[clicks]: a=1",
        "[KSTREAM-SOURCE-0000000000]: b, None", "[clicks]: b=None",
    ]


def test_to_stream_with_a_mapper_rekeys_the_updates():
    b = StreamsBuilder()
    table = b.table("in", S, L, Materialized("t"))
    table.to_stream(lambda k, v: f"{k}:{v}").to("out", S, L)
    topology = b.build()
    assert [n for n in topology.nodes if "KEY-SELECT" in n] == ["KSTREAM-KEY-SELECT-0000000003"]
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("in", S, L)
        pipe.pipe_input("a", 1, 0)
        pipe.pipe_input("a", None, 1)
        out = driver.create_output_topic("out", S, L).read_key_values_to_list()
    assert out == [("a:1", 1), ("a:None", None)]


def test_a_topic_extractor_chooses_each_records_topic():
    b = StreamsBuilder()
    seen = []

    def route(key, value, context):
        seen.append(context)
        return "big" if value > 10 else "small"

    b.stream("in", S, L).to(route, S, L)
    topology = b.build()
    assert topology.sink_topics() == [] and topology.has_topic_extractors()
    assert "(extractor class: <function" in str(topology.describe())
    with TopologyTestDriver(topology) as driver:
        pipe = driver.create_input_topic("in", S, L)
        pipe.pipe_input("a", 5, 10, headers=[("h", b"1")])
        pipe.pipe_input("b", 50, 11)
        assert driver.create_output_topic("small", S, L).read_key_values_to_list() == [("a", 5)]
        assert driver.create_output_topic("big", S, L).read_key_values_to_list() == [("b", 50)]
    assert [(c.topic, c.partition, c.offset, c.timestamp) for c in seen] == [
        ("in", 0, 0, 10), ("in", 0, 1, 11)]
    assert seen[0].headers == (("h", b"1"),) and seen[1].headers == ()


def test_a_topic_extractor_that_fails_names_the_sink_and_the_record():
    for route, message in ((lambda k, v, c: None, "returned None for key 'k', not a topic"),
                           (lambda k, v, c: 1 / 0, "ZeroDivisionError")):
        b = StreamsBuilder()
        b.stream("in", S, L).map_values(lambda v: v).to(route, S, L)
        with pytest.raises(StreamsError) as err:
            run(b, [1])
        first = str(err.value).splitlines()[0]
        assert "KSTREAM-SINK-0000000002" in first and message in str(err.value)
        assert "topic 'in' partition 0 offset 0" in first


def test_to_passes_its_partitioner_to_the_sink():
    b = StreamsBuilder()
    b.stream("in", S, L).to("out", S, L, partitioner=lambda k, v: v % 3)
    assert b.build().nodes["KSTREAM-SINK-0000000001"].partitioner("a", 5) == 2
