"""Values a Python user naturally has, numpy's and pandas' integers and floats, are taken
where a plain ``int`` or ``float`` is (issue 39): by the serdes (the same bytes as the plain
value's), as timestamps and durations, and as keys (the same store bucket)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kspark import (
    Materialized,
    Record,
    SessionWindows,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)
from kspark.errors import SerializationError
from kspark.hashing import stable_hash

INTS = [np.int64(-7), np.int32(42), np.uint16(9), pd.Series([5], dtype="Int64").iloc[0]]
FLOATS = [np.float64(2.5), np.float32(0.5), np.int64(3)]


@pytest.mark.parametrize("value", INTS, ids=repr)
def test_long_serde_writes_a_numpy_integer_as_the_int_it_holds(value):
    assert serdes.Long().serialize(value) == serdes.Long().serialize(int(value))
    assert serdes.Long().serializer()(value) == serdes.Long().serialize(int(value))
    assert serdes.Long().serialize_all([value, 1]) == [serdes.Long().serialize(int(value)),
                                                       serdes.Long().serialize(1)]


@pytest.mark.parametrize("value", [np.float64(2.5), np.bool_(True), True, "1"], ids=repr)
def test_long_serde_still_refuses_what_is_not_a_whole_number(value):
    with pytest.raises(SerializationError, match="Long serde cannot serialize"):
        serdes.Long().serialize(value)


@pytest.mark.parametrize("value", FLOATS, ids=repr)
def test_double_serde_takes_numpy_numbers(value):
    assert serdes.Double().serialize(value) == serdes.Double().serialize(float(value))


def test_json_serde_writes_numpy_scalars_and_arrays_as_plain_json():
    value = {"n": np.int64(3), "x": np.float32(0.5), "ok": np.bool_(True),
             "xs": np.array([1, 2]), "row": pd.Series([1.5, 2.0]).to_numpy()}
    plain = {"n": 3, "x": 0.5, "ok": True, "xs": [1, 2], "row": [1.5, 2.0]}
    json = serdes.Json()
    assert json.serialize(value) == json.serializer()(value) == json.serialize(plain)
    with pytest.raises(SerializationError, match="not JSON serializable"):
        json.serialize({"when": object()})


def test_timestamps_durations_and_keys_take_numpy_integers():
    assert type(Record("k", 1, np.int64(5)).timestamp) is int
    assert Record("k", 1).with_timestamp(np.int32(9)).timestamp == 9
    with pytest.raises(TypeError, match="whole ms"):
        Record("k", 1, 2.5)
    assert SessionWindows.of_inactivity_gap_and_grace(np.int64(50), np.int32(5)) == \
        SessionWindows.of_inactivity_gap_and_grace(50, 5)
    assert stable_hash(np.int64(12345)) == stable_hash(12345)
    assert stable_hash(np.float32(0.5)) == stable_hash(0.5)


def _session_counts(rows) -> list:
    builder = StreamsBuilder()
    (builder.stream("in", serdes.Long(), serdes.Long()).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 0))
        .count(Materialized("counts")).to_stream()
        .to("out", serdes.SessionWindowed(serdes.Long()), serdes.Long()))
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("in", serdes.Long(), serdes.Long())
        for key, value, ts in rows:
            pipe.pipe_input(key, value, ts)
        out = driver.create_output_topic("out", serdes.SessionWindowed(serdes.Long()),
                                         serdes.Long())
        return [(r.key.key, r.key.window.start, r.value, r.timestamp)
                for r in out.read_records_to_list()]


def test_a_pandas_frame_pipes_in_as_its_plain_values_do():
    frame = pd.DataFrame({"user": [1, 2, 1, 1], "n": [10, 20, 30, 40],
                          "ts": [1000, 1050, 1080, 1500]})
    rows = list(zip(*(frame[c].to_numpy() for c in frame.columns)))
    assert all(isinstance(v, np.integer) for row in rows for v in row)
    plain = [tuple(int(v) for v in row) for row in rows]
    assert _session_counts(rows) == _session_counts(plain) != []
