"""A serde's bulk decoding (``deserialize_all``, which restores and batch paths use) gives what
decoding each item does: the same values, or, when one item does not decode, the same error
naming it."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from kspark import serdes
from kspark.errors import SerializationError

PICKLED = st.one_of(st.integers(), st.text(max_size=5), st.tuples(st.integers(), st.none())).map(
    lambda v: pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))
ITEMS = st.lists(st.one_of(PICKLED, st.none(), st.binary(max_size=6),
                           PICKLED.map(bytearray)), max_size=8)


def outcome(fn, *args):
    try:
        return fn(*args)
    except SerializationError as exc:
        return f"error: {exc}"


@settings(max_examples=300, deadline=None)
@given(ITEMS, st.sampled_from([serdes.Pickle(), serdes.String(), serdes.Long()]))
def test_deserialize_all_decodes_as_each_item(items, serde):
    def each():
        return [serde.deserialize(d) for d in items]

    assert outcome(serde.deserialize_all, items) == outcome(each)
