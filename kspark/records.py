"""Plain record values shared by every layer."""

from __future__ import annotations

import struct
from dataclasses import FrozenInstanceError, dataclass
from typing import Any, Final, NamedTuple

from mypy_extensions import mypyc_attr

from kspark._duration import whole
from kspark.frozen import pure_python_class, reduce_frozen, slot_setters


class KeyValue(NamedTuple):
    """A key and a value, as yielded by store iterators and test topics."""

    key: Any
    value: Any


class Change(NamedTuple):
    """A table update: the new value and the value it replaces (``None`` if absent).
    ``is_latest`` is false for an update of a versioned table older than its latest value
    (operators that follow the latest values skip it)."""

    new_value: Any
    old_value: Any
    is_latest: bool = True


_tuple_new = tuple.__new__


def change(new_value: Any, old_value: Any, is_latest: bool = True) -> Change:
    """``Change(new_value, old_value, is_latest)``, made without the named tuple's Python
    ``__new__`` (per-record paths)."""
    return _tuple_new(Change, (new_value, old_value, is_latest))


class ValueAndTimestamp(NamedTuple):
    """A stored value with the timestamp of the record that last wrote it."""

    value: Any
    timestamp: int


Headers = tuple[tuple[str, bytes | None], ...]


def to_headers(headers: Any) -> Headers:
    """Normalise ``None``, a dict or a sequence of pairs into a tuple of ``(name, bytes)``."""
    if headers is None:
        return ()
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for name, value in items:
        if isinstance(value, str):
            value = value.encode()
        out.append((str(name), value))
    return tuple(out)


_COUNT: Final = struct.Struct(">i")


def encode_headers(headers: Headers) -> bytes:
    """``headers`` as bytes (how they cross Spark between kspark's stages): per header its
    name's UTF-8 length and bytes, then its value's length (-1: ``None``) and bytes."""
    pack = _COUNT.pack
    parts: list[bytes] = []
    for name, value in headers:
        encoded = name.encode()
        parts.append(pack(len(encoded)))
        parts.append(encoded)
        if value is None:
            parts.append(pack(-1))
        else:
            parts.append(pack(len(value)))
            parts.append(bytes(value))
    return b"".join(parts)


def decode_headers(data: bytes) -> Headers:
    """The headers of :func:`encode_headers`' bytes."""
    unpack = _COUNT.unpack_from
    out: list[tuple[str, bytes | None]] = []
    pos = 0
    end = len(data)
    while pos < end:
        size: int = unpack(data, pos)[0]
        name = data[pos + 4:pos + 4 + size].decode()
        pos += 4 + size
        size = unpack(data, pos)[0]
        pos += 4
        if size < 0:
            out.append((name, None))
        else:
            out.append((name, bytes(data[pos:pos + size])))
            pos += size
    return tuple(out)


# compiled: not tracked by the garbage collector (immutable, so no cycle can run through
# one unless a mutable key or value is later made to hold it), one freed instance reused
@mypyc_attr(acyclic=True, free_list_len=1)
class Record:
    """A record flowing through a topology: key, value, timestamp (ms) and headers; immutable,
    equal and hashed by value.

    A record forwarded with ``timestamp=None`` takes the timestamp of the record (or the
    punctuation time) being processed."""

    __slots__ = ("headers", "key", "timestamp", "value")
    key: Any
    value: Any
    timestamp: int | None
    headers: Headers

    def __init__(
        self, key: Any, value: Any, timestamp: Any = None, headers: Any = ()
    ) -> None:
        self.key = key
        self.value = value
        self.timestamp = _timestamp(timestamp)
        self.headers = headers if isinstance(headers, tuple) else to_headers(headers)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self.key == other.key and self.value == other.value
                and self.timestamp == other.timestamp and self.headers == other.headers)

    def __hash__(self) -> int:
        return hash((self.key, self.value, self.timestamp, self.headers))

    def __repr__(self) -> str:
        return (f"Record(key={self.key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp!r}, headers={self.headers!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return Record, (self.key, self.value, self.timestamp, self.headers)

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: Any) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Any) -> Record:
        return Record(self.key, self.value, self.timestamp, to_headers(headers))


if pure_python_class(Record):
    _set_key, _set_value, _set_timestamp, _set_headers = slot_setters(
        Record, "key", "value", "timestamp", "headers")

    def _record_init(self: Record, key: Any, value: Any, timestamp: Any = None,
                     headers: Any = ()) -> None:
        _set_key(self, key)
        _set_value(self, value)
        _set_timestamp(self, _timestamp(timestamp))
        _set_headers(self, headers if isinstance(headers, tuple) else to_headers(headers))

    setattr(Record, "__init__", _record_init)  # noqa: B010


def _timestamp(timestamp: Any) -> int | None:
    """A record's timestamp: ``None`` or whole ms of any integer type, as an ``int``."""
    if timestamp is None or type(timestamp) is int:
        return timestamp
    ms = whole(timestamp)
    if ms is None:
        raise TypeError(f"a record's timestamp must be whole ms, got {timestamp!r:.80}")
    return ms


def event_time(record: Record) -> int:
    """The timestamp of a record a processor is given: the task has set it (a record forwarded
    without one takes the timestamp of the record or punctuation being processed)."""
    ts = record.timestamp
    if ts is None:
        raise ValueError(f"record without a timestamp: {record!r:.200}")
    return ts


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """A source's record as a timestamp extractor sees it (Kafka Streams' ``ConsumerRecord``
    of deserialized key and value): where it was read, the timestamp it was written with, its
    key, value and headers."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: Headers

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink's topic extractor (``KStream.to(topic_extractor)``) knows of the record it
    routes besides its key and value, as Kafka Streams' ``RecordContext``: where the input
    record came from (``None`` for a record forwarded in a punctuation), and the record's
    timestamp and headers."""

    topic: str | None
    partition: int | None
    offset: int | None
    timestamp: int
    headers: Headers

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the record being processed came from; ``None`` inside a punctuation."""

    topic: str
    partition: int
    offset: int

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_frozen(self)
