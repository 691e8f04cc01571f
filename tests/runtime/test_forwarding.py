"""Forwarding one record at a time: pass-through nodes (``merge``, ``split``'s branches) hand
their records straight to their children, and a sink's records in a row go into one block; the
output is the record path's, in order, whatever the shape."""

from __future__ import annotations

from kspark import StreamsBuilder, serdes
from kspark.config import StreamsConfig
from kspark.processor.api import Processor
from kspark.records import Record
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.serialized import OutputBlock, OutputRecord
from kspark.runtime.task import SourceRecord
from kspark.topology.topology import Topology

S = serdes.String()


def _run(topology, records: list[tuple[str, str, str]]):
    """Run ``(topic, key, value)`` records (timestamps 1, 2, ...) through sub-topology 0."""
    recs = [SourceRecord(t, 0, i, i + 1, S.serialize(k), S.serialize(v))
            for i, (t, k, v) in enumerate(records)]
    sub = topology.sub_topologies()[0]
    return run_task_batch(topology, sub, 0, recs, DictTaskState(),
                          StreamsConfig.of({}, application_id="fwd"))


def _decoded(result) -> list[tuple[str, str, str]]:
    return [(o.topic, S.deserialize(o.key), S.deserialize(o.value)) for o in result.output]


def test_merges_of_merges_and_branches_deliver_in_the_record_paths_order():
    builder = StreamsBuilder()
    a, b, c = (builder.stream(t, S, S) for t in ("a", "b", "c"))
    merged = a.merge(b).merge(c)  # a pass-through below a pass-through
    merged.to("all", S, S)
    merged.map_values(lambda v: v.upper()).to("upper", S, S)
    branches = merged.split(prefix="s-").branch(lambda k, v: k == "x", name="x") \
        .default_branch(name="rest")
    branches["s-x"].to("xs", S, S)
    branches["s-rest"].merge(a).to("rest-and-a", S, S)

    result = _run(builder.build(), [("a", "x", "p"), ("b", "y", "q"), ("c", "x", "r")])
    assert _decoded(result) == [
        ("all", "x", "p"), ("upper", "x", "P"), ("xs", "x", "p"), ("rest-and-a", "x", "p"),
        ("all", "y", "q"), ("upper", "y", "Q"), ("rest-and-a", "y", "q"),
        ("all", "x", "r"), ("upper", "x", "R"), ("xs", "x", "r"),
    ]


class _Alternate(Processor):
    """Forwards each record to ``left`` or ``right`` by its key, some with a header, and twice
    to ``left`` when the value is ``twice``."""

    def process(self, record: Record) -> None:
        child = "left" if record.key.startswith("l") else "right"
        if record.value == "header":
            record = Record(record.key, record.value, record.timestamp, (("h", b"1"),))
        self.context.forward(record, child)
        if record.value == "twice":
            self.context.forward(record, child)


def test_a_sinks_records_in_a_row_share_a_block_and_others_stay_records():
    topology = (Topology()
                .add_source("src", "in", S, S)
                .add_processor("alt", _Alternate, "src")
                .add_sink("left", "l-out", "alt", key_serde=S, value_serde=S)
                .add_sink("right", "r-out", "alt", key_serde=S, value_serde=S,
                          partitioner=lambda k, v: 3 if v == "p3" else None))
    inputs = [("in", "l1", "twice"), ("in", "l2", "v"), ("in", "r1", "v"), ("in", "r2", "p3"),
              ("in", "r3", "v"), ("in", "l3", "header"), ("in", "l4", "v")]
    result = _run(topology, inputs)

    assert _decoded(result) == [
        ("l-out", "l1", "twice"), ("l-out", "l1", "twice"), ("l-out", "l2", "v"),
        ("r-out", "r1", "v"), ("r-out", "r2", "p3"), ("r-out", "r3", "v"),
        ("l-out", "l3", "header"), ("l-out", "l4", "v"),
    ]
    shapes = [(type(p).__name__, len(p) if isinstance(p, OutputBlock) else p.topic)
              for p in result.parts]
    # a record with headers or a partitioner's choice stays a record of its own
    assert shapes == [("OutputBlock", 3), ("OutputBlock", 1), ("OutputRecord", "r-out"),
                      ("OutputBlock", 1), ("OutputRecord", "l-out"), ("OutputBlock", 1)]
    records = [p for p in result.parts if isinstance(p, OutputRecord)]
    assert records[0].partition == 3 and records[1].headers == (("h", b"1"),)
    assert [o.timestamp for o in result.output] == [1, 1, 2, 3, 4, 5, 6, 7]
