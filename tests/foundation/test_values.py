"""Windows, serdes and durations: the plain values of layer 1."""

from __future__ import annotations

import json
import pickle
import struct
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import serdes
from kspark.errors import SerializationError
from kspark.windows import SessionWindows, SlidingWindows, TimeWindows, Window, Windowed


def test_durations_accept_int_ms_and_timedelta():
    assert SessionWindows.of_inactivity_gap_and_grace(timedelta(seconds=5), 250) == SessionWindows(
        5000, 250
    )
    assert TimeWindows.of_size_with_no_grace(timedelta(minutes=1)).size_ms == 60_000


@pytest.mark.parametrize(
    "make",
    [
        lambda: SessionWindows.of_inactivity_gap_with_no_grace(-1),
        lambda: SessionWindows.of_inactivity_gap_and_grace(10, -1),
        lambda: TimeWindows.of_size_with_no_grace(0),
        lambda: TimeWindows.of_size_and_grace(10, -5),
        lambda: TimeWindows.of_size_with_no_grace(10).advance_by(0),
        lambda: TimeWindows.of_size_with_no_grace(10).advance_by(11),
        lambda: SlidingWindows.of_time_difference_with_no_grace(0),
        lambda: SlidingWindows.of_time_difference_and_grace(10, -1),
    ],
)
def test_invalid_window_specs_raise_value_error(make):
    with pytest.raises(ValueError):
        make()


@given(size=st.integers(1, 50), advance=st.integers(1, 50), ts=st.integers(0, 500))
def test_time_windows_for_matches_definition(size, advance, ts):
    if advance > size:
        advance = size
    windows = TimeWindows.of_size_with_no_grace(size).advance_by(advance).windows_for(ts)
    expected = [Window(s, s + size) for s in range(0, ts + 1, advance) if ts - size < s <= ts]
    assert windows == expected


def test_window_and_windowed_compare_by_value():
    assert Windowed("k", Window(1, 2)) == Windowed("k", Window(1, 2))
    assert len({Windowed("k", Window(1, 2)), Windowed("k", Window(1, 2))}) == 1
    with pytest.raises(ValueError):
        Window(5, 4)


@pytest.mark.parametrize(
    "serde, value",
    [
        (serdes.String(), "héllo"),
        (serdes.Long(), -(2**63)),
        (serdes.Long(), 42),
        (serdes.Double(), 2.5),
        (serdes.Bytes(), b"\x00\xff"),
        (serdes.Json(), {"a": [1, None]}),
    ],
)
def test_serdes_round_trip_and_none_passes(serde, value):
    assert serde.deserialize(serde.serialize(value)) == value
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None


def test_long_is_kafka_big_endian():
    assert serdes.Long().serialize(1) == b"\x00" * 7 + b"\x01"


def test_windowed_serdes_use_kafka_layout():
    key = Windowed("ab", Window(3, 9))
    data = serdes.SessionWindowed(serdes.String()).serialize(key)
    assert data == b"ab" + struct.pack(">qq", 9, 3)
    assert serdes.SessionWindowed(serdes.String()).deserialize(data) == key
    tw = serdes.TimeWindowed(serdes.String(), 6)
    assert tw.serialize(key) == b"ab" + struct.pack(">q", 3)
    assert tw.deserialize(tw.serialize(key)) == key


def test_serde_errors_name_the_serde():
    with pytest.raises(SerializationError, match="Long"):
        serdes.Long().deserialize(b"abc")
    with pytest.raises(SerializationError, match="Json"):
        serdes.Json().deserialize(b"{not json")
    with pytest.raises(SerializationError, match="String"):
        serdes.String().serialize(5)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSON.filter(lambda v: v is not None))  # None is a null record, not "null"
def test_json_serde_writes_what_json_dumps_writes(value):
    expected = json.dumps(value, separators=(",", ":")).encode()
    assert serdes.Json().serialize(value) == expected
    assert json.dumps(serdes.Json().deserialize(expected), separators=(",", ":")) == \
        expected.decode()


#: numbers, strings and literals where JSON decoders part: only Python's takes NaN, Infinity,
#: numbers beyond a float and lone surrogates; integers past 64 bits, subnormal floats
_JSON_TOKENS = st.sampled_from([
    "NaN", "-Infinity", "Infinity", "1e400", "-1e400", "0.1e-400", "2.5E-324", "1E2", "-0",
    "-0.0", "123456789012345678901234567890", "-9223372036854775809", "18446744073709551616",
    "9007199254740993", "0.30000000000000004", '"\\ud800"', '"\\ud83d\\ude00"', '"\\u0000"',
    '"\\/\\b"', '"\u00e9\u4e2d"', "true", "null", "01", "[1,]", "tru",
])


def _json_text(value: object, ensure_ascii: bool, spaced: bool) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii,
                      separators=(", ", ": ") if spaced else (",", ":"))


_JSON_TEXTS = st.recursive(
    _JSON_TOKENS | st.builds(_json_text, _JSON, st.booleans(), st.booleans()),
    lambda inner: st.lists(inner, max_size=4).map(lambda items: f"[{','.join(items)}]")
    | st.lists(st.tuples(st.sampled_from(["a", "b", "é"]), inner), max_size=4).map(
        lambda pairs: "{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}"),
    max_leaves=10,
)


def _decoded(decode, data: bytes) -> tuple:
    try:
        return ("value", repr(decode(data)))
    except Exception:
        return ("error",)


@settings(max_examples=400, deadline=None)
@given(_JSON_TEXTS, st.sampled_from(["", " ", "\n\t", "\r "]), st.sampled_from(["", " \n"]))
def test_json_serde_reads_what_json_loads_reads(text, before, after):
    """The Json serde's fast decoder (msgspec, Python's where msgspec refuses) gives exactly
    what ``json.loads`` gives, types and order included, and fails where it fails."""
    data = (before + text + after).encode()
    assert _decoded(serdes.Json().deserializer(), data) == _decoded(json.loads, data)


def test_json_serde_errors_name_the_value():
    cyclic: list = []
    cyclic.append(cyclic)
    for bad in (cyclic, {1j: 2}, object()):
        with pytest.raises(SerializationError, match="Json serde cannot serialize"):
            serdes.Json().serialize(bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=30), max_size=40), st.integers(1, 50))
def test_kafka_partitions_of_many_keys_equal_each_keys_partition(keys, partitions):
    from kspark.hashing import kafka_partition, kafka_partitions

    assert kafka_partitions(keys, partitions) == [kafka_partition(k, partitions) for k in keys]


def test_murmur2_matches_kafkas_reference_values():
    from kspark.hashing import murmur2

    # values from Kafka's UtilsTest.testMurmur2
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             bytes([ord("a"), ord("b"), ord("c")]): 479470107}
    for data, expected in cases.items():
        assert murmur2(data) == expected


class _Prefixed(serdes.String):
    """A user's serde: a subclass of a built-in one with an attribute of its own."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def _serialize(self, value: object) -> bytes:
        return self.prefix.encode() + super()._serialize(value)


SERDES = [serdes.String(), serdes.Long(), serdes.Double(), serdes.Bytes(), serdes.Json(),
          serdes.Pickle(), serdes.SessionWindowed(serdes.String()),
          serdes.TimeWindowed(serdes.Long(), 10), _Prefixed("p-")]


@pytest.mark.parametrize("serde", SERDES, ids=lambda s: type(s).__name__)
def test_serdes_pickle_with_every_attribute_and_compare_by_them(serde):
    # topologies travel to Spark's workers pickled (cloudpickle), their serdes with them
    from pyspark import cloudpickle

    for copy in (pickle.loads(pickle.dumps(serde)), pickle.loads(cloudpickle.dumps(serde))):
        assert type(copy) is type(serde)
        assert copy == serde
        if isinstance(serde, _Prefixed):
            assert copy.prefix == serde.prefix
    assert _Prefixed("p-").serialize("k") == b"p-k"
    assert pickle.loads(pickle.dumps(_Prefixed("q-"))).serialize("k") == b"q-k"
    assert _Prefixed("p-") != _Prefixed("q-")
    assert serdes.TimeWindowed(serdes.Long(), 10) != serdes.TimeWindowed(serdes.Long(), 11)
    assert serdes.SessionWindowed(serdes.String()) != serdes.SessionWindowed(serdes.Long())
