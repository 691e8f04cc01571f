"""What a foreign-key join sends between its two sides, in Kafka Streams' byte layouts (its
subscription-registration and response topics, and the subscription store's keys and values).

- A *subscription* (left row -> right side, keyed by the foreign key): a hash of the left row's
  value, an instruction, the left row's key and partition. Bytes: ``{hash is null: 1 bit,
  version 1: 7 bits}{instruction: 1 byte}{hash: 16 bytes, if any}{left key}{partition: int32}``.
- A *response* (right side -> left row, keyed by the left key): the hash it answers and the
  right row's value. Bytes: ``{hash is null: 1 bit, version 0: 7 bits}{hash: 16 bytes, if
  any}{right value, if any}``; its left partition routes it, but is not written.
- The subscription store's key: ``{foreign key length: int32}{foreign key}{left key}``, so that
  the subscriptions of a foreign key are one prefix.
- The hash: MurmurHash3 x64 128 (Kafka Streams' ``Murmur3.hash128``, seed 104729) of the left
  value's bytes, written as two big-endian int64.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any, NamedTuple

import mmh3

from kspark.serdes import Pickle, Serde, as_serde

_SEED = 104_729
_HASH = struct.Struct(">qq")
_INT = struct.Struct(">i")
_NULL_HASH = 0x80
SUBSCRIPTION_VERSION = 1
RESPONSE_VERSION = 0


class Instruction(IntEnum):
    """What the right side does with a subscription (Kafka Streams' byte values)."""

    DELETE_KEY_NO_PROPAGATE = 0
    DELETE_KEY_AND_PROPAGATE = 1
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3


def value_hash(data: bytes | None) -> bytes | None:
    """The 16 bytes of Kafka Streams' hash of a serialized value (``None`` for none)."""
    if data is None:
        return None
    return _HASH.pack(*mmh3.hash64(data, _SEED, True, True))


class Subscription(NamedTuple):
    """A left row's subscription to a foreign key (see the module)."""

    hash: bytes | None
    instruction: Instruction
    primary_key: Any
    primary_partition: int | None


class Response(NamedTuple):
    """The right side's answer to a subscription: the right value (``None``: none)."""

    hash: bytes | None
    foreign_value: Any
    primary_partition: int | None = None


def _serde(serde: Any) -> Serde:
    return Pickle() if serde is None else as_serde(serde)


class SubscriptionSerde(Serde):
    """Subscriptions in Kafka Streams' layout; ``key_serde`` serializes the left keys."""

    name = "SubscriptionWrapper"

    def __init__(self, key_serde: Any = None) -> None:
        self.key_serde = _serde(key_serde)

    def _serialize(self, value: Any) -> bytes:
        head = bytes((SUBSCRIPTION_VERSION | (_NULL_HASH if value.hash is None else 0),
                      int(value.instruction)))
        key = self.key_serde.serialize(value.primary_key) or b""
        partition = value.primary_partition if value.primary_partition is not None else 0
        return head + (value.hash or b"") + key + _INT.pack(partition)

    def _deserialize(self, data: bytes) -> Any:
        version, null_hash = data[0] & 0x7F, bool(data[0] & _NULL_HASH)
        instruction = Instruction(data[1])
        pos = 2 if null_hash else 18
        digest = None if null_hash else bytes(data[2:18])
        end = len(data) - (4 if version > 0 else 0)
        partition = _INT.unpack_from(data, end)[0] if version > 0 else None
        return Subscription(digest, instruction, self.key_serde.deserialize(bytes(data[pos:end])),
                            partition)


class ResponseSerde(Serde):
    """Responses in Kafka Streams' layout; ``value_serde`` serializes the right values."""

    name = "SubscriptionResponseWrapper"

    def __init__(self, value_serde: Any = None) -> None:
        self.value_serde = _serde(value_serde)

    def _serialize(self, value: Any) -> bytes:
        data = self.value_serde.serialize(value.foreign_value)
        head = bytes((RESPONSE_VERSION | (_NULL_HASH if value.hash is None else 0),))
        return head + (value.hash or b"") + (data or b"")

    def _deserialize(self, data: bytes) -> Any:
        null_hash = bool(data[0] & _NULL_HASH)
        pos = 1 if null_hash else 17
        digest = None if null_hash else bytes(data[1:17])
        rest = bytes(data[pos:])
        return Response(digest, self.value_serde.deserialize(rest) if rest else None)


def combined_key(foreign_key: bytes, primary_key: bytes) -> bytes:
    """The subscription store's key of a left key's subscription to a foreign key."""
    return _INT.pack(len(foreign_key)) + foreign_key + primary_key


def key_prefix(foreign_key: bytes) -> bytes:
    """The prefix every subscription store key of a foreign key starts with."""
    return _INT.pack(len(foreign_key)) + foreign_key


def split_combined_key(data: bytes) -> tuple[bytes, bytes]:
    """The foreign key and left key bytes of a subscription store key."""
    (length,) = _INT.unpack_from(data)
    return data[4:4 + length], data[4 + length:]
