"""The stores and wire formats of joins: the outer-join list-value store (docs/semantics.md
§9.1) and the foreign-key join's subscriptions and responses (§9.5), in Kafka Streams' byte
layouts (checked against Kafka Streams itself in tests/oracle)."""

from __future__ import annotations

import struct

import pytest

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
