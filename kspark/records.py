"""Plain record values shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class KeyValue(NamedTuple):
    """A key and a value, as yielded by store iterators and test topics."""

    key: Any
    value: Any


class Change(NamedTuple):
    """A table update: the new value and the value it replaces (``None`` if absent)."""

    new_value: Any
    old_value: Any


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


@dataclass(frozen=True, slots=True, init=False)
class Record:
    """A record flowing through a topology: key, value, timestamp (ms) and headers.

    A record forwarded with ``timestamp=None`` takes the timestamp of the record (or the
    punctuation time) being processed."""

    key: Any
    value: Any
    timestamp: int | None = None
    headers: Headers = ()

    def __init__(
        self, key: Any, value: Any, timestamp: int | None = None, headers: Any = ()
    ) -> None:
        # the slots set directly (a frozen dataclass's own __init__ goes through
        # object.__setattr__ and __post_init__, the same result at twice the cost)
        _set_key(self, key)
        _set_value(self, value)
        _set_timestamp(self, timestamp)
        _set_headers(self, headers if isinstance(headers, tuple) else to_headers(headers))

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Any) -> Record:
        return Record(self.key, self.value, self.timestamp, to_headers(headers))


_set_key = Record.__dict__["key"].__set__
_set_value = Record.__dict__["value"].__set__
_set_timestamp = Record.__dict__["timestamp"].__set__
_set_headers = Record.__dict__["headers"].__set__


def event_time(record: Record) -> int:
    """The timestamp of a record a processor is given: the task has set it (a record forwarded
    without one takes the timestamp of the record or punctuation being processed)."""
    ts = record.timestamp
    if ts is None:
        raise ValueError(f"record without a timestamp: {record!r:.200}")
    return ts


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the record being processed came from; ``None`` inside a punctuation."""

    topic: str
    partition: int
    offset: int
