"""Records as columns (``kspark.record_columns``): the vectorised session emission forwards
columns into its sink chain, and the output equals forwarding the same records one at a time,
whatever operators the chain has and whichever record fails to serialize."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import EmitStrategy, Materialized, SessionWindows, StreamsBuilder, serdes
from kspark.config import StreamsConfig
from kspark.errors import SerializationError, StreamsError
from kspark.record_columns import NewValues, RecordColumns, WindowedKeys
from kspark.records import Change, Record
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.task import SourceBatch, SourceRecord
from kspark.windows import Window, Windowed


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


INNER = st.sampled_from([serdes.String(), serdes.Long(), serdes.Json()])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.text(max_size=3), st.integers(-5, 5)), min_size=1, max_size=6,
             unique_by=lambda k: (type(k), k)),
    st.lists(st.tuples(st.integers(0, 5), st.integers(-(2**61), 2**61), st.integers(0, 2**61)),
             max_size=12),
    INNER,
)
def test_windowed_keys_serialize_as_each_key_does(keys, rows, inner):
    rows = [(c % len(keys), s, s + d) for c, s, d in rows]
    codes, starts, ends = (np.array([r[f] for r in rows], dtype=np.int64) for f in range(3))
    columns = WindowedKeys(keys, codes, starts, ends)
    windowed = [Windowed(keys[c], Window(s, e)) for c, s, e in rows]
    assert list(columns) == windowed
    assert [columns[i] for i in range(len(rows))] == windowed
    for serde in (serdes.SessionWindowed(inner), serdes.TimeWindowed(inner, 10)):
        def each(serde=serde):
            return [serde.serialize(w) for w in windowed]

        assert outcome(serde.serialize_all, columns) == outcome(each)


def outcome(fn, *args):
    try:
        return fn(*args)
    except (SerializationError, StreamsError) as exc:
        return f"{type(exc).__name__}: {exc}"


def test_columns_materialize_the_records_they_stand_for():
    keys = WindowedKeys(["a", "b"], np.array([1, 0]), np.array([5, 7]), np.array([9, 7]))
    columns = RecordColumns(keys, NewValues([3, None]), np.array([9, 7]))
    assert columns.records() == [
        Record(Windowed("b", Window(5, 9)), Change(3, None), 9),
        Record(Windowed("a", Window(7, 7)), Change(None, None), 7),
    ]
    assert columns.values[0:1] == [Change(3, None)] and columns.values[-1] == Change(None, None)
    assert keys[::-1] == list(keys)[::-1] and keys[-2] == Windowed("b", Window(5, 9))
    with pytest.raises(IndexError):
        keys[2]
    assert columns.with_values([1, 2]).records()[1] == Record(Windowed("a", Window(7, 7)), 2, 7)
    with pytest.raises(ValueError, match="different lengths"):
        RecordColumns(keys, [1], np.array([9, 7]))


class FailingString(serdes.String):
    """String, except that key ``"bad"`` cannot be serialized."""

    def _serialize(self, value):
        if value == "bad":
            raise ValueError("no bad keys")
        return super()._serialize(value)


def session_topology(breaker: bool, mapper: bool, key_serde=None, failing: bool = False):
    """session count emitted on window close -> to_stream -> [peek] -> [map_values] -> ``out``;
    ``peek`` (no list path) makes every record go one at a time."""
    builder = StreamsBuilder()
    stream = (
        builder.stream("in", serdes.String(), serdes.Long())
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized("sessions"))
        .to_stream()
    )
    if breaker:
        stream = stream.peek(lambda k, v: None)
    if mapper:
        def times_ten(v):
            if failing and v == 2:
                raise ValueError("two")
            return v * 10

        stream = stream.map_values(times_ten)
    stream.to("out", serdes.SessionWindowed(key_serde or serdes.String()), serdes.Long())
    return builder.build()


def run(topology, records: list[tuple[str, int]], batch: int) -> tuple[list[tuple], int]:
    config = StreamsConfig.of(None, application_id="record-columns")
    sub = topology.sub_topologies()[0]
    state = DictTaskState()
    out, fast = [], 0
    encoded = [
        SourceRecord("in", 0, i, ts, k.encode(), (1).to_bytes(8, "big"))
        for i, (k, ts) in enumerate(records)
    ]
    for lo in range(0, len(encoded), batch):
        result = run_task_batch(topology, sub, 0, SourceBatch.from_records(encoded[lo: lo + batch]),
                                state, config, wall_clock=lambda: 0)
        out.extend((o.topic, o.key, o.value, o.timestamp) for o in result.output)
        fast += result.fast_records
    return out, fast


CLICKS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "bad"]), st.integers(0, 60)),
                  max_size=50)


@settings(max_examples=60, deadline=None)
@given(CLICKS, st.integers(1, 30), st.booleans())
def test_emitted_sessions_as_columns_equal_record_by_record(clicks, batch, mapper):
    got, _ = run(session_topology(False, mapper), clicks, batch)
    expected, _ = run(session_topology(True, mapper), clicks, batch)
    assert got == expected


def test_ordered_clicks_take_the_vectorised_path_and_emit_through_columns():
    clicks = [("a", 0), ("b", 1), ("a", 3), ("c", 20), ("a", 40), ("b", 41)]
    got, fast = run(session_topology(False, False), clicks, len(clicks))
    expected, _ = run(session_topology(True, False), clicks, len(clicks))
    assert fast == len(clicks)
    assert got == expected and len(got) == 3  # a [0, 3], b [1, 1], c [20, 20] closed


def test_a_key_that_fails_to_serialize_fails_as_record_by_record():
    clicks = [("a", 1), ("bad", 2), ("c", 3), ("a", 30)]  # the last closes the others
    failures = []
    for breaker in (False, True):
        with pytest.raises(Exception) as caught:
            run(session_topology(breaker, False, FailingString()), clicks, len(clicks))
        # the peek shifts the generated node names
        failures.append((type(caught.value), re.sub(r"K[A-Z]+-[A-Z]+-\d+", "node",
                                                    str(caught.value))))
    assert failures[0] == failures[1]
    assert "no bad keys" in failures[0][1]


def test_a_failing_mapper_after_the_columns_fails_as_record_by_record():
    clicks = [("a", 1), ("a", 2), ("c", 3), ("a", 30)]  # a [1, 2] counts 2
    failures = []
    for breaker in (False, True):
        with pytest.raises(Exception) as caught:
            run(session_topology(breaker, True, failing=True), clicks, len(clicks))
        failures.append((type(caught.value), str(caught.value)))
    # the failing processor is named, as record by record (the peek shifts the node numbers)
    assert "processor 'KSTREAM-MAPVALUES-" in failures[0][1] and "two" in failures[0][1]
    assert [(t, re.sub(r"K[A-Z]+-[A-Z]+-\d+", "node", m)) for t, m in failures[:1]] == [
        (t, re.sub(r"K[A-Z]+-[A-Z]+-\d+", "node", m)) for t, m in failures[1:]]
