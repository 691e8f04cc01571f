"""Forwarding a list at a time (``Task.forward_all``: a cache flush, the vectorised session
path's emission) gives exactly the output of forwarding record by record, and ``serialize_all``
of each serde equals ``serialize`` of each value, errors included."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kspark import Materialized, StreamsBuilder, serdes
from kspark.config import StreamsConfig
from kspark.errors import SerializationError, StreamsError
from kspark.processor.api import Processor
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.task import SourceRecord
from kspark.windows import Window, Windowed

KEYS = ["a", "b", "c", "d"]


class _Forwarder(Processor):
    """A user processor that forwards every record: no list form."""

    def process(self, record):
        self.context.forward(record)


def chain_topology(breaker: bool, failing: bool = False):
    """count per key (cached) -> to_stream -> [a user processor] -> filter -> peek ->
    map_values -> select_key -> flat_map_values -> map -> flat_map -> topic ``out``; the user
    processor (no list form) makes every record go one at a time."""

    def double(v):
        if failing and v == 3:
            raise ValueError("three")
        return v * 2

    builder = StreamsBuilder()
    stream = (
        builder.stream("in", serdes.String(), serdes.Long())
        .group_by_key()
        .count(Materialized("counts"))
        .to_stream()
    )
    if breaker:
        stream = stream.process(_Forwarder)
    (
        stream.filter(lambda k, v: v % 3 != 1)
        .peek(lambda k, v: None)
        .map_values(double)
        .select_key(lambda k, v: k.upper())
        .flat_map_values(lambda v: [v] * (v % 3))
        .map(lambda k, v: (k + "!", v + 1))
        .flat_map(lambda k, v: [(k, v), (k + "?", -v)])
        .to("out", serdes.String(), serdes.Long())
    )
    return builder.build()


def run(topology, records: list[tuple[str, int]], batch: int) -> list[tuple]:
    config = StreamsConfig.of(None, application_id="forward-all")
    sub = topology.sub_topologies()[0]
    state = DictTaskState()
    out = []
    encoded = [
        SourceRecord("in", 0, i, ts, k.encode(), (1).to_bytes(8, "big"))
        for i, (k, ts) in enumerate(records)
    ]
    for lo in range(0, len(encoded), batch):
        result = run_task_batch(topology, sub, 0, encoded[lo : lo + batch], state, config)
        out.extend((o.topic, o.key, o.value, o.timestamp) for o in result.output)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 50)), max_size=60),
    st.integers(1, 25),
)
def test_flushed_changes_down_a_chain_equal_record_by_record(records, batch):
    topology = chain_topology(breaker=False)
    assert run(topology, records, batch) == run(chain_topology(breaker=True), records, batch)


def test_the_chain_is_found_and_a_breaker_ends_it():
    from kspark.runtime.metrics import Metrics
    from kspark.runtime.task import Task

    def chain_of(topology):
        task = Task(topology, topology.sub_topologies()[0], 0,
                    config=StreamsConfig.of(None, application_id="x"), metrics=Metrics(),
                    wall_clock=lambda: 0)
        task.init()
        count = next(n for n, p in task.processors.items() if hasattr(p, "store_name"))
        return task.sink_chain(count)

    mappers, sink = chain_of(chain_topology(breaker=False))
    assert len(mappers) == 8 and sink.startswith("KSTREAM-SINK")
    assert chain_of(chain_topology(breaker=True)) is None


def test_a_failing_mapper_in_a_flushed_list_names_its_processor():
    records = [("a", 1), ("a", 2), ("a", 3), ("b", 4)]
    with pytest.raises(Exception, match="three") as caught:
        run(chain_topology(breaker=False, failing=True), records, batch=len(records))
    with pytest.raises(Exception, match="three") as by_record:
        run(chain_topology(breaker=True, failing=True), records, batch=len(records))
    assert type(caught.value) is type(by_record.value)


VALUES = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**64),  # too large for Long
    st.booleans(),
    st.text(max_size=3),
)


def outcome(fn, *args):
    try:
        return fn(*args)
    except (SerializationError, StreamsError) as exc:
        return f"{type(exc).__name__}: {exc}"


def each(serde, values):
    return [serde.serialize(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, max_size=12))
def test_long_serialize_all_equals_serialize_of_each(values):
    serde = serdes.Long()
    assert outcome(serde.serialize_all, values) == outcome(each, serde, values)


class _Text(str):
    pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(VALUES, st.just("\ud800"), st.builds(_Text, st.text(max_size=2)),
                          st.binary(max_size=2)), max_size=12))
def test_string_serialize_all_equals_serialize_of_each(values):
    serde = serdes.String()
    assert outcome(serde.serialize_all, values) == outcome(each, serde, values)


WINDOWED = st.one_of(
    st.none(),
    st.integers(0, 5),
    st.builds(
        lambda k, s, d: Windowed(k, Window(s, s + d)),
        st.one_of(st.sampled_from(["u1", "u2"]), st.integers(0, 2), st.booleans(),
                  st.floats(0, 2), st.lists(st.integers(0, 2), max_size=2)),
        st.one_of(st.integers(0, 100), st.integers(2**63 - 8, 2**63 - 1)),  # end may overflow
        st.integers(0, 10),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(WINDOWED, max_size=12))
@example([Windowed(1, Window(0, 1)), Windowed(True, Window(0, 1)), Windowed(1.0, Window(0, 1))])
def test_windowed_serialize_all_equals_serialize_of_each(values):
    for serde in (serdes.SessionWindowed(serdes.Json()), serdes.TimeWindowed(serdes.Json(), 5)):
        assert outcome(serde.serialize_all, values) == outcome(each, serde, values)
