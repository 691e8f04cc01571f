"""The store a left or outer stream-stream join keeps its not-yet-joined records in, with Kafka
Streams' byte layouts (``OuterStreamJoinStoreFactory``: a list-value key-value store).

Its key is a :class:`TimestampedKeyAndJoinSide`: the record's timestamp, its side and its key;
on a changelog ``timestamp (int64) ‖ side (1 byte: 1 left, 0 right) ‖ key bytes``, which is
also the order the store keeps and iterates its keys in. Its value is the list of the records'
values of that key, side and timestamp (a ``put`` appends, a ``put`` of ``None`` removes the
key); on a changelog Kafka's list serde of byte arrays (a strategy byte, the count, and each
item's length and bytes), each item a side byte and the value's bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from sortedcontainers import SortedDict

from kspark.records import KeyValue
from kspark.serdes import Pickle, Serde, as_serde
from kspark.state.internals.base import StoreBase
from kspark.state.internals.common import check_name

_LONG_SIDE = struct.Struct(">qB")
_INT = struct.Struct(">i")
#: Kafka's ``ListSerde`` strategy flag for items of variable size
_VARIABLE_SIZE = 1


class TimestampedKeyAndJoinSide(NamedTuple):
    """A not-yet-joined record's timestamp, side and key. ``key_bytes`` (the key serialized)
    orders keys as Kafka Streams' store orders them; ``key`` is the key itself."""

    timestamp: int
    is_left: bool
    key_bytes: bytes
    key: Any


class LeftOrRightValue(NamedTuple):
    """A not-yet-joined record's value and side."""

    is_left: bool
    value: Any


class TimestampedKeyAndJoinSideSerde(Serde):
    """The outer-join store's keys as Kafka Streams lays them out (see the module)."""

    name = "TimestampedKeyAndJoinSide"

    def __init__(self, key_serde: Any = None) -> None:
        self.key_serde: Serde = Pickle() if key_serde is None else as_serde(key_serde)

    def key_of(self, timestamp: int, is_left: bool, key: Any) -> TimestampedKeyAndJoinSide:
        """The store key of ``key``'s record at ``timestamp`` on one side."""
        return TimestampedKeyAndJoinSide(timestamp, is_left,
                                         self.key_serde.serialize(key) or b"", key)

    def _serialize(self, value: Any) -> bytes:
        return _LONG_SIDE.pack(value.timestamp, 1 if value.is_left else 0) + value.key_bytes

    def _deserialize(self, data: bytes) -> Any:
        if len(data) < _LONG_SIDE.size:
            raise ValueError(f"{len(data)} bytes are too few for a timestamp and a join side")
        timestamp, side = _LONG_SIDE.unpack_from(data)
        key_bytes = bytes(data[_LONG_SIDE.size:])
        return TimestampedKeyAndJoinSide(timestamp, side == 1, key_bytes,
                                         self.key_serde.deserialize(key_bytes))


class LeftOrRightValuesSerde(Serde):
    """The outer-join store's values (lists of :class:`LeftOrRightValue`) as Kafka Streams lays
    them out (see the module)."""

    name = "LeftOrRightValues"

    def __init__(self, left_serde: Any = None, right_serde: Any = None) -> None:
        self.left_serde: Serde = Pickle() if left_serde is None else as_serde(left_serde)
        self.right_serde: Serde = Pickle() if right_serde is None else as_serde(right_serde)

    def _serialize(self, value: Any) -> bytes:
        parts = [bytes((_VARIABLE_SIZE,)), _INT.pack(len(value))]
        for item in value:
            serde = self.left_serde if item.is_left else self.right_serde
            raw = bytes((1 if item.is_left else 0,)) + (serde.serialize(item.value) or b"")
            parts.append(_INT.pack(len(raw)))
            parts.append(raw)
        return b"".join(parts)

    def _deserialize(self, data: bytes) -> Any:
        if not data or data[0] != _VARIABLE_SIZE:
            raise ValueError("not a list of variable-size items (Kafka's ListSerde)")
        (count,), pos = _INT.unpack_from(data, 1), 5
        items = []
        for _ in range(count):
            (size,) = _INT.unpack_from(data, pos)
            pos += 4
            raw = data[pos:pos + size]
            pos += size
            if len(raw) != size or size < 1:
                raise ValueError("a list item is cut short")
            is_left = raw[0] == 1
            serde = self.left_serde if is_left else self.right_serde
            items.append(LeftOrRightValue(is_left, serde.deserialize(raw[1:])))
        return tuple(items)

    def deserialize_all(self, data: Any) -> list[Any]:
        return [self.deserialize(d) for d in data]


class ListValueStore(StoreBase):
    """Lists of values by key, keys kept in order in one bucket (a join looks at its oldest
    keys after most records, so they are read in order without merging buckets).

    ``put(key, value)`` appends ``value`` to ``key``'s list and logs the whole list;
    ``put(key, None)`` removes the key and logs a tombstone, also when it held nothing, as Kafka
    Streams' list-value store does. Bucket data: ``SortedDict(key -> (tuple of values,
    timestamp))``."""

    kind = "list_value"

    def __init__(self, name: str, *, caching: bool = False, logging: bool = True,
                 num_buckets: int = 1) -> None:
        check_name(name)
        if caching:
            raise ValueError(f"store {name!r}: a list-value store has no cache")
        super().__init__(name, caching=False, logging=logging, num_buckets=1)

    def _new_bucket(self) -> SortedDict:
        return SortedDict()

    def _data(self, create: bool = False) -> SortedDict | None:
        data: SortedDict | None = self._bucket(0, create=create)
        return data

    def _created(self) -> SortedDict:
        data: SortedDict = self._bucket(0, create=True)
        return data

    # -- reads -------------------------------------------------------------------------------
    def get(self, key: Any) -> tuple[Any, ...] | None:
        """The values of ``key``, oldest first, or ``None``."""
        data = self._data()
        entry = None if data is None else data.get(key)
        return None if entry is None else entry[0]

    def entries(self) -> Iterator[tuple[Any, tuple[Any, ...]]]:
        """``(key, values)`` in key order, read lazily (do not write while iterating)."""
        data = self._data()
        if data:
            for key, (values, _) in data.items():
                yield key, values

    def all(self) -> list[KeyValue]:
        """``KeyValue(key, value)`` for every value, in key order, each key's oldest first."""
        return [KeyValue(k, v) for k, values in self.entries() for v in values]

    def approximate_num_entries(self) -> int:
        data = self._data()
        return 0 if data is None else len(data)

    def _current(self, store_key: Any) -> Any:
        return self.get(store_key)

    # -- writes ------------------------------------------------------------------------------
    def put(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Append ``value`` to ``key``'s list (``None``: remove the key)."""
        self._check_writable(key)
        ts = self._timestamp(timestamp)
        if value is None:
            self._remove(key, ts)
            return
        data = self._created()
        entry = data.get(key)
        values = (value,) if entry is None else (*entry[0], value)
        data[key] = (values, ts)
        self._touch(0)
        self._changed(key, None if entry is None else entry[0], values, ts)

    def put_if_absent(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """As Kafka Streams' list-value store: write only if ``key`` holds values (``None``
        removes it then); nothing is returned."""
        self._check_writable(key)
        if self.get(key) is not None:
            self.put(key, value, timestamp)

    def remove_all(self, keys: Iterable[Any], timestamp: int | None = None) -> None:
        """Remove each of ``keys`` (in order), logging a tombstone for each."""
        ts = self._timestamp(timestamp)
        for key in keys:
            self._remove(key, ts)

    def _remove(self, key: Any, ts: int) -> None:
        data = self._data()
        old = None if data is None else data.pop(key, None)
        if old is not None:
            self._touch(0)
        self._changed(key, None if old is None else old[0], None, ts)

    def restore(self, changelog: Iterable[tuple[Any, Any, int]]) -> None:
        for key, values, timestamp in changelog:
            data = self._created()
            if values is None:
                data.pop(key, None)
            else:
                data[key] = (tuple(values), timestamp)
            self._touch(0)
