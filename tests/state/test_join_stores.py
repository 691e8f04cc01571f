"""The stores and wire formats of joins: the outer-join list-value store (docs/semantics.md
§9.1) and the foreign-key join's subscriptions and responses (§9.5), in Kafka Streams' byte
layouts (checked against Kafka Streams itself in tests/oracle)."""

from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from kspark import serdes
from kspark.dsl.internals.joins.fk_wire import (
    Instruction,
    Response,
    ResponseSerde,
    Subscription,
    SubscriptionSerde,
    combined_key,
    key_prefix,
    split_combined_key,
    value_hash,
)
from kspark.errors import SerializationError
from kspark.state.builders import StoreBuilder
from kspark.state.internals.base import NullContext
from kspark.state.join_stores import (
    LeftOrRightValuesSerde,
    ListValueStore,
    TimestampedKeyAndJoinSideSerde,
    side_item,
)

S = serdes.String()
KEYS = TimestampedKeyAndJoinSideSerde(S)


def _store() -> ListValueStore:
    store = ListValueStore("outer")
    store.init(NullContext())
    return store


def test_puts_append_and_keys_iterate_by_timestamp_then_right_before_left_then_key_bytes():
    store = _store()
    for ts, left, key, value in [(5, True, "b", "x"), (5, False, "z", "y"), (3, True, "c", "w"),
                                 (5, True, "a", "v"), (5, True, "b", "u")]:
        store.put(KEYS.key_of(ts, left, key), side_item(left, value.encode()), ts)
    assert [(k[0], k[1], KEYS.record_key(k), values) for k, values in store.entries()] == [
        (3, True, "c", (b"\x01w",)), (5, False, "z", (b"\x00y",)), (5, True, "a", (b"\x01v",)),
        (5, True, "b", (b"\x01x", b"\x01u"))]
    changelog = store.context.changelog  # type: ignore[attr-defined]
    assert changelog[-1][1] == (b"\x01x", b"\x01u")
    assert changelog[0][1] == (b"\x01x",)  # logged as it was then


def test_put_if_absent_of_none_removes_only_a_present_key_and_every_remove_is_logged():
    store = _store()
    present, absent = KEYS.key_of(1, True, "a"), KEYS.key_of(2, True, "b")
    store.put(present, side_item(True, b"x"), 1)
    store.put_if_absent(absent, None, 7)
    store.put_if_absent(present, None, 7)
    assert list(store.entries()) == []
    store.remove_all([absent], 8)
    assert [(KEYS.record_key(k), v, ts) for k, v, ts in store.context.changelog] == [  # type: ignore[attr-defined]
        ("a", (b"\x01x",), 1), ("a", None, 7), ("b", None, 8)]


class _Saved:
    """Buckets as a task's durable state keeps them, pickled between batches."""

    def __init__(self) -> None:
        self.blobs: dict[int, bytes] = {}

    def load(self, store: str, bucket: int) -> object | None:
        blob = self.blobs.get(bucket)
        return None if blob is None else pickle.loads(blob)

    def save(self, store: ListValueStore) -> None:
        for bucket, data in store.dirty_buckets().items():
            if data is None:
                self.blobs.pop(bucket, None)
            else:
                self.blobs[bucket] = pickle.dumps(data)
        store.clear_dirty()
        store.unload()


#: one step: put a value (or remove) at a timestamp, remove the oldest n keys as a join's scan
#: does, or end a batch (the store saved, forgotten and loaded again)
_STEPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 30), st.booleans(), st.sampled_from("abc"),
              st.booleans()),
    st.tuples(st.just("oldest"), st.integers(1, 4)),
    st.tuples(st.just("batch")),
), max_size=120)


@settings(max_examples=150, deadline=None)
@given(_STEPS, st.booleans())
def test_entries_come_in_key_order_across_puts_removes_and_batches(steps, legacy):
    """The keys kept sorted beside the bucket (removed ones dropped lazily) give exactly the
    held keys in order, after any puts, removes and reloads; a bucket saved as a
    ``SortedDict`` (state of an earlier kspark) reads the same."""
    saved = _Saved()
    store = ListValueStore("outer")
    store.init(NullContext(), saved)
    model: dict[tuple, tuple] = {}
    for step in steps:
        if step[0] == "put":
            _, ts, left, key, remove = step
            store_key = KEYS.key_of(ts, left, key)
            if remove:
                store.put_if_absent(store_key, None, ts)
                model.pop(store_key, None)
            else:
                item = side_item(left, f"{ts}{key}".encode())
                store.put(store_key, item, ts)
                model[store_key] = (*model.get(store_key, ()), item)
        elif step[0] == "oldest":
            oldest = [k for k, _ in store.entries()][:step[1]]
            store.remove_all(oldest, 0)
            for k in oldest:
                del model[k]
        else:
            saved.save(store)
            if legacy and saved.blobs:
                saved.blobs = {b: pickle.dumps(SortedDict(pickle.loads(blob)))
                               for b, blob in saved.blobs.items()}
        assert list(store.entries()) == sorted(model.items())
    assert store.approximate_num_entries() == len(model)


def test_outer_join_store_bytes_are_kafka_streams_layout_and_restore():
    values = LeftOrRightValuesSerde()
    key = KEYS.key_of(10, True, "a")
    assert key == (10, True, b"a") and type(key) is tuple  # untracked by the collector
    assert KEYS.serialize(key) == struct.pack(">qB", 10, 1) + b"a"
    assert KEYS.deserialize(KEYS.serialize(key)) == key
    items = (side_item(True, S.serialize("x")), side_item(False, serdes.Long().serialize(7)))
    data = values.serialize(items)
    assert data == (b"\x01" + struct.pack(">i", 2) + struct.pack(">i", 2) + b"\x01x"
                    + struct.pack(">i", 9) + b"\x00" + struct.pack(">q", 7))
    assert values.deserialize(data) == items
    with pytest.raises(SerializationError, match="cut short"):
        values.deserialize(data[:-1])
    builder = StoreBuilder("outer", "list_value", key_serde=KEYS, value_serde=values)
    store = builder.build()
    store.init(NullContext())
    store.restore([(key, items, 10), (KEYS.key_of(11, False, "b"), (items[1],), 11),
                   (key, None, 12)])
    assert [(KEYS.record_key(k), v) for k, v in store.entries()] == [("b", (items[1],))]
    with pytest.raises(ValueError, match="no cache"):
        ListValueStore("outer", caching=True)


def test_subscriptions_and_responses_round_trip_in_kafka_streams_layout():
    digest = value_hash(b"hello")
    assert digest == struct.pack(">qq", 3512725192710940516, 6227047293690958278)  # Java's
    subscriptions = SubscriptionSerde(S)
    sub = Subscription(digest, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, "k1", 3)
    data = subscriptions.serialize(sub)
    assert data == b"\x01\x02" + digest + b"k1" + struct.pack(">i", 3)
    assert subscriptions.deserialize(data) == sub
    unhashed = Subscription(None, Instruction.DELETE_KEY_AND_PROPAGATE, "k1", 0)
    assert subscriptions.serialize(unhashed)[:2] == b"\x81\x01"
    assert subscriptions.deserialize(subscriptions.serialize(unhashed)) == unhashed
    responses = ResponseSerde(S)
    assert responses.serialize(Response(digest, "v", 3)) == b"\x00" + digest + b"v"
    assert responses.deserialize(b"\x00" + digest + b"v") == Response(digest, "v")
    assert responses.deserialize(b"\x80") == Response(None, None)
    key = combined_key(b"fk", b"pk")
    assert key == struct.pack(">i", 2) + b"fkpk" and key.startswith(key_prefix(b"fk"))
    assert split_combined_key(key) == (b"fk", b"pk")
