"""The test driver's per-record shortcuts give exactly what the general paths give: each serde's
``serializer()`` / ``deserializer()`` against ``serialize`` / ``deserialize`` (errors included),
the key-value store's ``all()`` against merging its buckets' ranges, the merge of sorted runs
against ``heapq.merge``, and the value types' own constructors against a dataclass's."""

from __future__ import annotations

import collections
import dataclasses
import decimal
import enum
import functools
import heapq
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kspark import serdes
from kspark._json_codec import fast_json_bytes
from kspark.errors import SerializationError
from kspark.records import KeyValue, Record
from kspark.state import InMemoryKeyValueStore
from kspark.state.internals.common import merge_sorted
from kspark.windows import Window, Windowed

PROPS = settings(max_examples=300, deadline=None, derandomize=True, database=None)

JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
)
VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=3),
        st.sets(st.integers(0, 3), max_size=2),  # not JSON: an error both ways
    ),
    max_leaves=8,
)
RAW = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.sampled_from([b"null", b" 1", b"1 ", b"[1,2]", b'{"a":1}x', b"\xff", b"", b"\t{}\n",
                     b'"\\ud800"', b"NaN", b"12345678"]),
    VALUES.map(lambda v: serdes.Json().serialize(v) if _json_ok(v) else b"?"),
    st.builds(bytearray, st.binary(max_size=8)),
)


def _json_ok(value: Any) -> bool:
    try:
        serdes.Json().serialize(value)
    except SerializationError:
        return False
    return True


def outcome(fn: Any, arg: Any) -> Any:
    """The result (NaN made comparable), or the error's type and message."""
    try:
        result = fn(arg)
    except SerializationError as exc:
        return f"SerializationError: {exc}"
    return repr(result) if isinstance(result, float) and math.isnan(result) else result


SERDES = [serdes.String(), serdes.Long(), serdes.Json(), serdes.Double(), serdes.Bytes()]


@PROPS
@given(st.one_of(VALUES, st.text().map(lambda t: t + "\ud800"), st.integers(2**63, 2**64),
                 st.binary(max_size=4)))
@example("\ud800")
@example(True)
def test_each_serializer_equals_serialize(value):
    for serde in SERDES:
        assert outcome(serde.serializer(), value) == outcome(serde.serialize, value), serde


@PROPS
@given(RAW)
def test_each_deserializer_equals_deserialize(data):
    for serde in SERDES:
        fast, general = outcome(serde.deserializer(), data), outcome(serde.deserialize, data)
        assert repr(fast) == repr(general), serde
        assert type(fast) is type(general)



class _Level(enum.IntEnum):
    LOW = 1


#: values where msgspec's encoder and Python's part: floats at the bounds of exponent notation
#: and past them, NaN and the infinities, DEL and non-ASCII text, subclasses of JSON's types,
#: keys that are not str, numpy scalars, types only msgspec writes, values nested past the
#: fast path's depth
WRITE_EDGES = st.one_of(
    st.sampled_from([1e-4, 9.99e-5, 1e16, 9999999999999998.0, -1e16, 5e-324, 1.7976931348623157e308,
                     -0.0, 0.0, math.nan, math.inf, -math.inf]),
    st.floats(min_value=1e-6, max_value=1e-3) | st.floats(min_value=1e15, max_value=1e17),
    st.text(alphabet=st.sampled_from("a\x7f\x00\x1f\"\\/é中\U0001f600"), max_size=4),
    st.sampled_from([_Level.LOW, np.int64(3), np.float64(0.5), np.bool_(True),
                     collections.OrderedDict(a=1), decimal.Decimal("1.5"), b"x", {1, 2},
                     frozenset(), bytearray(b"y")]),
    st.integers(-(2**80), 2**80),
    st.sampled_from(["\x7f", "a\x7fb", "\u00e9", "\ud800", "\x00\n"]),
)


def _nested(depth: int, value: Any) -> Any:
    return functools.reduce(lambda inner, _: [inner], range(depth), value)


WRITE_VALUES = st.recursive(
    WRITE_EDGES | JSON_LEAVES | st.builds(_nested, st.integers(30, 36), JSON_LEAVES),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3), st.booleans(),
                                  st.none(), st.floats(0, 2)), inner, max_size=3),
    ),
    max_leaves=8,
)


def _python_json(value: Any) -> Any:
    """What Python's encoder writes (numpy's scalars as the Python values they hold), or that
    it refuses ``value``."""
    def plain(item: Any) -> Any:
        if isinstance(item, np.generic):
            return item.tolist()
        raise TypeError(type(item).__name__)
    try:
        return json.dumps(value, separators=(",", ":"), default=plain).encode()
    except (TypeError, ValueError, RecursionError):
        return "refused"


@PROPS
@given(WRITE_VALUES.filter(lambda v: v is not None))
@example(_nested(34, 1.5))
@example({"a": 1, "b": [1.5, "x"], "c": None, "d": True})
def test_the_json_serde_writes_exactly_what_python_writes(value):
    """The Json serde writes with msgspec where that gives Python's bytes and with Python's
    encoder elsewhere: every value written as ``json.dumps`` writes it, refused where it is."""
    expected = _python_json(value)
    json_serde = serdes.Json()
    for write in (json_serde.serialize, json_serde.serializer()):
        try:
            got = write(value)
        except SerializationError:
            got = "refused"
        assert got == expected


def test_the_json_serde_takes_msgspec_for_plain_values_only():
    """The fast path is taken (so the property test above checks it) for plain values, and
    declined where msgspec would write otherwise."""
    assert fast_json_bytes({"id": 1, "ad": "ad-1", "xs": [0.5, None, True], "t": (1, "a")}) == \
        b'{"id":1,"ad":"ad-1","xs":[0.5,null,true],"t":[1,"a"]}'
    for declined in ({"a": 1e16}, {"a": "\x7f"}, {"a": "é"}, {1: 2}, {"a": math.nan},
                     collections.OrderedDict(a=1), [_Level.LOW], {"a": {1, 2}},
                     _nested(40, 1), "\ud800"):
        assert fast_json_bytes(declined) is None, declined

def test_a_subclass_or_a_serde_of_its_own_gets_its_own_methods():
    class Upper(serdes.String):
        def _deserialize(self, data):
            return data.decode().upper()

    assert serdes.deserializer_of(Upper())(b"ab") == "AB"

    class Plain:  # not a Serde: used through its own methods
        def serialize(self, value):
            return b"x"

        def deserialize(self, data):
            return "y"

    assert serdes.serializer_of(Plain())(1) == b"x"
    assert serdes.deserializer_of(Plain())(b"") == "y"


# -- the key-value store's all() and the merge of sorted runs ----------------------------------
def _merged_ranges(store: InMemoryKeyValueStore, reverse: bool) -> list[KeyValue]:
    """What the store gave before: each bucket's range, merged with heapq.merge."""
    runs = [[(k, data[k]) for k in data.irange(None, None, reverse=reverse)]
            for _, data in store._all_buckets() if data]
    merged = heapq.merge(*runs, key=lambda item: item[0], reverse=reverse)
    return [KeyValue(k, entry[0]) for k, entry in merged]


@PROPS
@given(st.lists(st.tuples(st.one_of(st.integers(0, 40), st.floats(0, 40).map(float),
                                    st.integers(0, 40).map(float)),
                          st.one_of(st.none(), st.integers(0, 9))), max_size=40),
       st.sampled_from([1, 3, 16]))
def test_key_value_all_equals_merging_the_buckets(ops, buckets):
    store = InMemoryKeyValueStore("s", num_buckets=buckets)
    for key, value in ops:
        store.put(key, value, 1)
    assert store.all() == _merged_ranges(store, False)
    assert store.reverse_all() == _merged_ranges(store, True)
    assert store.all() == store.range(None, None)
    assert all(type(kv) is KeyValue for kv in store.all())


def test_key_value_all_of_keys_that_do_not_compare_fails_naming_the_store():
    store = InMemoryKeyValueStore("mixed", num_buckets=16)
    for key in ["a", 1, "b", 2, "c", 3]:
        store.put(key, 1, 1)
    if len([d for _, d in store._all_buckets() if d]) > 1:
        with pytest.raises(TypeError, match="store 'mixed'"):
            store.all()


@PROPS
@given(st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers()), max_size=5), max_size=5),
       st.booleans())
def test_merging_sorted_runs_equals_heapq_merge(runs, reverse):
    runs = [sorted(run, key=lambda item: item[0], reverse=reverse) for run in runs]
    expected = list(heapq.merge(*runs, key=lambda item: item[0], reverse=reverse))
    got = merge_sorted("s", runs, lambda item: item[0], lambda item: item, reverse=reverse,
                       presorted=True)
    assert got == expected


# -- value types built without the dataclass's own __init__ ------------------------------------
def test_records_and_windows_behave_as_frozen_dataclasses():
    record = Record("k", 1, headers={"h": "v"})
    assert record == Record(key="k", value=1, timestamp=None, headers=(("h", b"v"),))
    assert Record("k", 1).headers == ()
    assert record.with_value(2) == Record("k", 2, headers={"h": "v"})
    assert hash(Record("k", 1, 5)) == hash(Record("k", 1, 5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.key = "other"  # type: ignore[misc]
    assert Windowed("k", Window(1, 2)) == Windowed(key="k", window=Window(start=1, end=2))
    assert Window(1, 2) < Window(1, 3)
    with pytest.raises(ValueError, match="before its start"):
        Window(5, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Window(1, 2).start = 0  # type: ignore[misc]
