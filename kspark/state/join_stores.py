"""The store a left or outer stream-stream join keeps its not-yet-joined records in, with Kafka
Streams' byte layouts (``OuterStreamJoinStoreFactory``: a list-value key-value store).

Its key (:data:`JoinSideKey`) is the record's timestamp, its side and its key's bytes; on a
changelog ``timestamp (int64) ‖ side (1 byte: 1 left, 0 right) ‖ key bytes``, which is also
the order the store keeps and iterates its keys in. Its value is the list of the records'
values of that key, side and timestamp (a ``put`` appends, a ``put`` of ``None`` removes the
key), each item a side byte and the value's bytes (:func:`side_item`); on a changelog Kafka's
list serde of byte arrays (a strategy byte, the count, and each item's length and bytes). The
store holds these bytes, as Kafka Streams' does, and logs them as they are.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Iterator
from typing import Any, Final, NamedTuple

from kspark.records import KeyValue
from kspark.serdes import Pickle, Serde, as_serde
from kspark.state.internals.base import StoreBase
from kspark.state.internals.common import check_name

_LONG_SIDE: Final = struct.Struct(">qB")
_INT: Final = struct.Struct(">i")
_LONG2: Final = struct.Struct(">qq")
#: Kafka's ``ListSerde`` strategy flag for items of variable size
_VARIABLE_SIZE: Final = 1


#: an outer-join store key: ``(timestamp, is_left, key bytes)``, a plain tuple (it orders as
#: Kafka Streams' store orders its keys, and the garbage collector stops tracking it)
JoinSideKey = tuple[int, bool, bytes]


class TimestampedKeyAndJoinSideSerde(Serde):
    """The outer-join store's keys (:data:`JoinSideKey`) as Kafka Streams lays them out (see the
    module); ``key_serde`` serializes the record keys in them."""

    name = "TimestampedKeyAndJoinSide"

    def __init__(self, key_serde: Any = None) -> None:
        self.key_serde: Serde = Pickle() if key_serde is None else as_serde(key_serde)

    def key_of(self, timestamp: int, is_left: bool, key: Any) -> JoinSideKey:
        """The store key of ``key``'s record at ``timestamp`` on one side."""
        return (timestamp, is_left, self.key_bytes(key))

    def key_bytes(self, key: Any) -> bytes:
        """The record key's bytes in the store keys of ``key``."""
        return self.key_serde.serialize(key) or b""

    def record_key(self, store_key: JoinSideKey) -> Any:
        """The record key in ``store_key``."""
        return self.key_serde.deserialize(store_key[2])

    def _serialize(self, value: Any) -> bytes:
        return _LONG_SIDE.pack(value[0], 1 if value[1] else 0) + value[2]

    def _deserialize(self, data: bytes) -> Any:
        if len(data) < _LONG_SIDE.size:
            raise ValueError(f"{len(data)} bytes are too few for a timestamp and a join side")
        timestamp, side = _LONG_SIDE.unpack_from(data)
        return (timestamp, side == 1, bytes(data[_LONG_SIDE.size:]))


def side_item(is_left: bool, data: bytes | None) -> bytes:
    """An outer-join store item: the side byte (1 left, 0 right), then the value's bytes."""
    return (b"\x01" if is_left else b"\x00") + (data or b"")


class LeftOrRightValuesSerde(Serde):
    """The outer-join store's values, tuples of :func:`side_item` bytes, as Kafka Streams lays
    them out (Kafka's list serde of byte arrays, see the module)."""

    name = "LeftOrRightValues"

    def _serialize(self, value: Any) -> bytes:
        parts = [bytes((_VARIABLE_SIZE,)), _INT.pack(len(value))]
        for item in value:
            parts.append(_INT.pack(len(item)))
            parts.append(item)
        return b"".join(parts)

    def _deserialize(self, data: bytes) -> Any:
        if not data or data[0] != _VARIABLE_SIZE:
            raise ValueError("not a list of variable-size items (Kafka's ListSerde)")
        (count,), pos = _INT.unpack_from(data, 1), 5
        items = []
        for _ in range(count):
            (size,) = _INT.unpack_from(data, pos)
            pos += 4
            item = data[pos:pos + size]
            pos += size
            if len(item) != size or size < 1:
                raise ValueError("a list item is cut short")
            items.append(bytes(item))
        return tuple(items)


class OrderedStore(StoreBase):
    """Values by key, the keys kept in order in one bucket (a join reads its oldest keys after
    most records, so they are read in order without merging buckets). Bucket data: ``{key:
    (value, timestamp)}``, its keys kept sorted beside it (a key removed stays there until the
    keys before it go, or until the removed ones are many; state written when the bucket was a
    ``SortedDict`` loads as it is). A remove logs a tombstone, also when the key held nothing,
    as Kafka Streams' stores log it."""

    def __init__(self, name: str, *, caching: bool = False, logging: bool = True,
                 num_buckets: int = 1) -> None:
        check_name(name)
        if caching:
            raise ValueError(f"store {name!r}: a {self.kind} store has no cache")
        super().__init__(name, caching=False, logging=logging, num_buckets=1)
        #: the keys of the bucket data ``_ordered`` in order, and keys removed from it since
        self._order: list[Any] = []
        self._listed: set[Any] = set()
        self._ordered: dict[Any, Any] | None = None

    def _new_bucket(self) -> dict[Any, Any]:
        return {}

    def _data(self, create: bool = False) -> dict[Any, Any] | None:
        data: dict[Any, Any] | None = self._bucket(0, create=create)
        return data

    def _created(self) -> dict[Any, Any]:
        data: dict[Any, Any] = self._bucket(0, create=True)
        return data

    def _keys_in_order(self, data: dict[Any, Any]) -> list[Any]:
        """The keys of ``data`` in order, with keys removed since among them (sorted when
        ``data`` is not the bucket they were kept for: loaded, restored or new)."""
        if data is not self._ordered:
            self._order = sorted(data)
            self._listed = set(self._order)
            self._ordered = data
        return self._order

    def _added(self, data: dict[Any, Any], key: Any) -> None:
        """Keep ``key``, new in ``data``, among its ordered keys."""
        order = self._keys_in_order(data)
        if key in self._listed:
            return
        if not order or order[-1] < key:
            order.append(key)
        else:
            bisect.insort(order, key)
        self._listed.add(key)

    def _removed(self, data: dict[Any, Any]) -> None:
        """Drop the removed keys at the front of the ordered keys, and all removed keys once
        they outnumber the held ones."""
        if data is not self._ordered:
            return
        order, listed = self._order, self._listed
        if order and order[0] not in data:
            i = 1
            while i < len(order) and order[i] not in data:
                i += 1
            listed.difference_update(order[:i])
            del order[:i]
        if len(order) > 2 * len(data) + 64:
            self._order = [k for k in order if k in data]
            self._listed = set(self._order)

    # -- reads -------------------------------------------------------------------------------
    def get(self, key: Any) -> Any:
        """What ``key`` holds, or ``None``."""
        data = self._data()
        entry = None if data is None else data.get(key)
        return None if entry is None else entry[0]

    def entries(self) -> Iterator[tuple[Any, Any]]:
        """``(key, what it holds)`` in key order, read lazily (do not write while iterating)."""
        data = self._data()
        if data:
            for key in self._keys_in_order(data):
                entry = data.get(key)
                if entry is not None:
                    yield key, entry[0]

    def approximate_num_entries(self) -> int:
        data = self._data()
        return 0 if data is None else len(data)

    def _current(self, store_key: Any) -> Any:
        return self.get(store_key)

    # -- writes ------------------------------------------------------------------------------
    def _write(self, key: Any, held: Any, ts: int) -> None:
        data = self._created()
        entry = data.get(key)
        data[key] = (held, ts)
        if entry is None:
            self._added(data, key)
        self._touch(0)
        self._changed(key, None if entry is None else entry[0], held, ts)

    def remove_all(self, keys: Iterable[Any], timestamp: int | None = None) -> None:
        """Remove each of ``keys`` (in order), logging a tombstone for each."""
        ts = self._timestamp(timestamp)
        data = self._data()
        changes = []
        removed = False
        for key in keys:
            old = None if data is None else data.pop(key, None)
            removed = removed or old is not None
            changes.append((key, None if old is None else old[0], None, ts))
        if removed:
            assert data is not None
            self._removed(data)
            self._touch(0)
        self._changed_all(changes)

    def _remove(self, key: Any, ts: int) -> None:
        data = self._data()
        old = None if data is None else data.pop(key, None)
        if old is not None:
            assert data is not None
            self._removed(data)
            self._touch(0)
        self._changed(key, None if old is None else old[0], None, ts)

    def _restored(self, value: Any) -> Any:
        return value

    def restore(self, changelog: Iterable[tuple[Any, Any, int]]) -> None:
        for key, value, timestamp in changelog:
            data = self._created()
            if value is None:
                data.pop(key, None)
            else:
                data[key] = (self._restored(value), timestamp)
            self._touch(0)
        self._ordered = None  # its keys sorted again when next read


class ListValueStore(OrderedStore):
    """Lists of values by key (see :class:`OrderedStore`): ``put(key, value)`` appends
    ``value`` to ``key``'s list (a tuple) and logs the whole list; ``put(key, None)`` removes
    the key, as Kafka Streams' list-value store does."""

    kind = "list_value"

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Append ``value`` to ``key``'s list (``None``: remove the key)."""
        self._check_writable(key)
        ts = self._timestamp(timestamp)
        if value is None:
            self._remove(key, ts)
            return
        held = self.get(key)
        self._write(key, (value,) if held is None else (*held, value), ts)

    def put_if_absent(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """As Kafka Streams' list-value store: write only if ``key`` holds values (``None``
        removes it then); nothing is returned."""
        self._check_writable(key)
        if self.get(key) is not None:
            self.put(key, value, timestamp)

    def all(self) -> list[KeyValue]:
        """``KeyValue(key, value)`` for every value, in key order, each key's oldest first."""
        return [KeyValue(k, v) for k, values in self.entries() for v in values]

    def _restored(self, value: Any) -> Any:
        return tuple(value)


class TimeOrderedBuffer(OrderedStore):
    """The records a stream-table join with a grace period holds back (see
    :class:`OrderedStore`), by their time-first key (:func:`buffer_key`)."""

    kind = "time_ordered_buffer"

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Keep ``value`` under ``key`` (``None``: remove it)."""
        self._check_writable(key)
        ts = self._timestamp(timestamp)
        if value is None:
            self._remove(key, ts)
        else:
            self._write(key, value, ts)

    def all(self) -> list[KeyValue]:
        return [KeyValue(k, v) for k, v in self.entries()]


_TIME_FIRST: Final = b"\x00"
_BUFFER_TS: Final = struct.Struct(">q")


def buffer_key(timestamp: int, key_bytes: bytes, seq: int) -> bytes:
    """A buffered record's key, as Kafka Streams' time-ordered buffer lays it out: a 0 byte,
    the timestamp, the key's bytes and a sequence number (so ordered by time, then key)."""
    return _TIME_FIRST + _BUFFER_TS.pack(timestamp) + key_bytes + _INT.pack(seq)


def buffer_key_parts(data: bytes) -> tuple[int, bytes]:
    """The timestamp and the key's bytes of a :func:`buffer_key`."""
    return _BUFFER_TS.unpack_from(data, 1)[0], bytes(data[9:-4])


class BufferedRecord(NamedTuple):
    """A record a grace buffer holds: its value and where it came from (its key is in the
    buffer's key)."""

    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]
    topic: str
    partition: int
    offset: int


class BufferedRecordSerde(Serde):
    """:class:`BufferedRecord` as Kafka Streams' buffer writes its changelog values: the record
    context (timestamp, offset, topic, partition, headers), no prior and no old value, the
    value's bytes, and a buffer time of 0."""

    name = "BufferValue"

    def __init__(self, value_serde: Any = None) -> None:
        self.value_serde: Serde = Pickle() if value_serde is None else as_serde(value_serde)

    def _serialize(self, value: Any) -> bytes:
        topic = value.topic.encode()
        parts = [_LONG2.pack(value.timestamp, value.offset), _INT.pack(len(topic)), topic,
                 _INT.pack(value.partition), _INT.pack(len(value.headers))]
        for name, data in value.headers:
            encoded = name.encode()
            parts += [_INT.pack(len(encoded)), encoded]
            parts += [_INT.pack(-1)] if data is None else [_INT.pack(len(data)), data]
        raw = self.value_serde.serialize(value.value) or b""
        parts += [_INT.pack(-1), _INT.pack(-1), _INT.pack(len(raw)), raw, _BUFFER_TS.pack(0)]
        return b"".join(parts)

    def _deserialize(self, data: bytes) -> Any:
        timestamp, offset = _LONG2.unpack_from(data)
        pos = 16
        (size,) = _INT.unpack_from(data, pos)
        topic = bytes(data[pos + 4:pos + 4 + size]).decode()
        pos += 4 + size
        partition, count = struct.unpack_from(">ii", data, pos)
        pos += 8
        headers = []
        for _ in range(count):
            (size,) = _INT.unpack_from(data, pos)
            name = bytes(data[pos + 4:pos + 4 + size]).decode()
            pos += 4 + size
            (size,) = _INT.unpack_from(data, pos)
            pos += 4
            headers.append((name, None if size < 0 else bytes(data[pos:pos + size])))
            pos += max(size, 0)
        for _ in range(2):  # prior and old value: none
            (size,) = _INT.unpack_from(data, pos)
            pos += 4 + max(size, 0)
        (size,) = _INT.unpack_from(data, pos)
        raw = bytes(data[pos + 4:pos + 4 + size])
        return BufferedRecord(self.value_serde.deserialize(raw), timestamp, tuple(headers),
                              topic, partition, offset)
