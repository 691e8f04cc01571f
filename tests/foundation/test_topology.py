"""Topology building, validation and describe()."""

from __future__ import annotations

import pytest

from kspark.errors import TopologyError
from kspark.processor import Processor
from kspark.topology import Topology


class Noop(Processor):
    def process(self, record):
        self.context.forward(record)


def test_describe_shows_nodes_edges_and_sub_topologies():
    topo = (
        Topology()
        .add_source("a", "in-a")
        .add_processor("p", Noop, "a")
        .add_sink("to-mid", "mid", "p")
        .add_source("b", "mid")
        .add_sink("to-out", "out", "b")
    )
    text = str(topo.describe())
    assert "Sub-topology: 0" in text and "Sub-topology: 1" in text
    assert "Source: a (topics: [in-a])" in text
    assert "Processor: p (stores: [])\n      --> to-mid\n      <-- a" in text
    assert "Sink: to-out (topic: out)\n      <-- b" in text
    assert [st.source_topics for st in topo.sub_topologies()] == [["in-a"], ["mid"]]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda t: t.add_processor("p", Noop, "missing"), "not in the topology"),
        (lambda t: t.add_source("s", "other"), "already added"),
        (lambda t: t.add_source("s2", "in"), "already read"),
        (lambda t: t.add_processor("p", Noop(), "s"), "not a Processor instance"),
        (lambda t: t.connect_processor_and_state_stores("s", "x"), "not in the topology"),
    ],
)
def test_malformed_topologies_raise_with_names(build, message):
    topo = Topology().add_source("s", "in")
    with pytest.raises(TopologyError, match=message):
        build(topo)
