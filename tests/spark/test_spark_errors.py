"""Bad input and failing user code on Spark (docs/semantics.md §8)."""

from __future__ import annotations

import os

import pytest

from kspark import Processor, Record, Topology, io, serdes
from kspark.spark import StreamsApp

pytestmark = pytest.mark.spark
S = serdes.String()
J = serdes.Json()


class Upper(Processor):
    """Forwards the value's "text" upper-cased; raises on the value {"text": "boom"} unless
    the class attribute ``fixed`` is set."""

    fixed = False

    def init(self, context):
        self.context = context

    def process(self, record):
        if record.value["text"] == "boom" and not type(self).fixed:
            raise RuntimeError("cannot shout boom")
        self.context.forward(Record(record.key, record.value["text"].upper(), record.timestamp))


def _topology(processor=Upper):
    topo = Topology().add_source("src", "in", S, J).add_processor("upper", processor, "src")
    return topo.add_sink("out", "out", "upper", key_serde=S, value_serde=S)


def _raw_source(app_dir, lines):
    """A file topic whose second file holds ``lines`` (raw JSON-lines records)."""
    src = io.memory(S, S, max_files_per_trigger=1)
    src.send_all([("a", '{"text": "one"}', 1)])
    with open(os.path.join(src.path, "in-000000000001.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return src


def _run(spark, app_dir, topo, src, config=None, name="errors"):
    out = io.memory(S, S)
    app = StreamsApp(topo, name, {"in": src, "out": out}, spark=spark, config=config,
                     checkpoint_dir=os.path.join(app_dir, name))
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    return out, app


def test_undecodable_value_stops_the_query_naming_topic_partition_offset(spark, app_dir):
    bad = '{"key": "b", "value": "{not json", "timestamp": 2, "partition": 0}'
    src = _raw_source(app_dir, [bad])
    with pytest.raises(Exception) as err:
        _run(spark, app_dir, _topology(), src)
    text = str(err.value)
    assert "Deserialization error" in text
    assert "topic 'in' partition 0 offset 4294967296" in text  # file 1, line 0
    assert "Json" in text


def test_log_and_continue_skips_counts_and_keeps_going(spark, app_dir):
    bad = '{"key": "b", "value": "{not json", "timestamp": 2, "partition": 0}'
    good = '{"key": "c", "value": "{\\"text\\": \\"three\\"}", "timestamp": 3, "partition": 0}'
    src = _raw_source(app_dir, [bad, good])
    out, app = _run(spark, app_dir, _topology(), src,
                    config={"default.deserialization.exception.handler": "log_and_continue"},
                    name="lac")
    assert [(k, v) for k, v, _ in out.records()] == [("a", "ONE"), ("c", "THREE")]
    assert app.metrics()["dropped-records-total"] == 1
    assert app.metrics()["dropped-records-deserialization-error"] == 1


def test_failing_user_function_stops_with_coordinates_and_a_fixed_restart_resumes(spark, app_dir):
    boom = '{"key": "b", "value": "{\\"text\\": \\"boom\\"}", "timestamp": 2, "partition": 0}'
    src = _raw_source(app_dir, [boom])
    out = io.memory(S, S)
    checkpoint = os.path.join(app_dir, "boom")
    app = StreamsApp(_topology(), "boom", {"in": src, "out": out}, spark=spark,
                     checkpoint_dir=checkpoint)
    app.start()
    with pytest.raises(Exception) as err:
        app.process_all_available()
    app.stop()
    text = str(err.value)
    for part in ("processor 'upper'", "topic 'in'", "partition 0", "offset 4294967296",
                 "key 'b'", "cannot shout boom"):
        assert part in text
    assert [(k, v) for k, v, _ in out.records()] == [("a", "ONE")]  # batch 0 committed

    class FixedUpper(Upper):
        fixed = True

    resumed = io.memory(S, S)
    app = StreamsApp(_topology(FixedUpper), "boom", {"in": src, "out": resumed}, spark=spark,
                     checkpoint_dir=checkpoint)
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    # only the failed batch is processed again: record "a" is not repeated
    assert [(k, v) for k, v, _ in resumed.records()] == [("b", "BOOM")]


def test_a_topic_extractor_naming_an_unknown_topic_stops_the_query_naming_it(spark, app_dir):
    topo = Topology().add_source("src", "in", S, J).add_sink(
        "routed", lambda k, v, ctx: "out" if v["text"] != "two" else "elsewhere", "src",
        key_serde=S, value_serde=J)
    src = io.memory(S, J)
    src.send_all([("a", {"text": "one"}, 1), ("b", {"text": "two"}, 2)])
    with pytest.raises(Exception) as err:
        _run(spark, app_dir, topo, src, name="extractor")
    assert "topic 'elsewhere', which is not one of the app's topics ['in', 'out']" in str(err.value)
