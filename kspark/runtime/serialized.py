"""Serialized records as a task reads and writes them: one object each, or as columns.

A task reads :class:`SourceRecord` objects (the test driver) or a :class:`SourceBatch` of columns
(the Spark stage, without a Python object per record); it writes :class:`OutputRecord` objects
and :class:`OutputBlock` columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from kspark.records import Headers, RecordMetadata


class SourceRecord:
    """A serialized input record and where it came from (a plain class: its ``__init__``
    compiled, as a dataclass's would not be)."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 key: bytes | None, value: bytes | None, headers: Headers = ()) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def _fields(self) -> tuple[Any, ...]:
        return (self.topic, self.partition, self.offset, self.timestamp, self.key, self.value,
                self.headers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SourceRecord):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return ("SourceRecord(topic={!r}, partition={!r}, offset={!r}, timestamp={!r}, "
                "key={!r}, value={!r}, headers={!r})".format(*self._fields()))

    def __reduce__(self) -> tuple[Any, ...]:
        return SourceRecord, self._fields()


class OutputRecord:
    """A serialized record written by a sink (or a changelog / dead-letter record);
    ``partition``: the partition its sink's partitioner chose (``None``: by key)."""

    __slots__ = ("headers", "key", "partition", "timestamp", "topic", "value")

    def __init__(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
                 headers: Headers = (), partition: int | None = None) -> None:
        self.topic = topic
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers
        self.partition = partition

    def _fields(self) -> tuple[Any, ...]:
        return (self.topic, self.key, self.value, self.timestamp, self.headers, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OutputRecord):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return ("OutputRecord(topic={!r}, key={!r}, value={!r}, timestamp={!r}, headers={!r}, "
                "partition={!r})".format(*self._fields()))

    def __reduce__(self) -> tuple[Any, ...]:
        return OutputRecord, self._fields()


@dataclass(slots=True)
class OutputBlock:
    """Serialized records of one sink written at once, as columns (none has headers)."""

    topic: str
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]

    def __len__(self) -> int:
        return len(self.timestamps)

    def records(self) -> list[OutputRecord]:
        topic = self.topic
        return [OutputRecord(topic, k, v, t)
                for k, v, t in zip(self.keys, self.values, self.timestamps)]


#: what a task writes, in order: single records and blocks of records
Output = list["OutputRecord | OutputBlock"]


def output_records(output: Output) -> list[OutputRecord]:
    """Every record of ``output``, blocks opened up."""
    out: list[OutputRecord] = []
    for part in output:
        if isinstance(part, OutputBlock):
            out.extend(part.records())
        else:
            out.append(part)
    return out


def output_count(output: Output) -> int:
    """How many records ``output`` holds."""
    return sum(len(part) if isinstance(part, OutputBlock) else 1 for part in output)


def output_columns(output: Output
                   ) -> tuple[list[str], list[bytes | None], list[bytes | None], list[int]]:
    """Topic, key, value and timestamp of every record of ``output`` (headers left out), as
    columns, without an object per record of a block."""
    topics: list[str] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    stamps: list[int] = []
    for part in output:
        if isinstance(part, OutputBlock):
            topics.extend([part.topic] * len(part))
            keys.extend(part.keys)
            values.extend(part.values)
            stamps.extend(part.timestamps)
        else:
            topics.append(part.topic)
            keys.append(part.key)
            values.append(part.value)
            stamps.append(part.timestamp)
    return topics, keys, values, stamps


def output_headers(output: Output) -> list[Headers] | None:
    """The headers of every record of ``output``, in :func:`output_columns`' order; ``None``
    when no record has any."""
    if not any(isinstance(p, OutputRecord) and p.headers for p in output):
        return None
    out: list[Headers] = []
    for part in output:
        if isinstance(part, OutputBlock):
            out.extend([()] * len(part))
        else:
            out.append(part.headers)
    return out


def output_partitions(output: Output) -> list[int | None] | None:
    """The partition each record of ``output`` was given by its sink's partitioner (``None``:
    by key), in :func:`output_columns`' order; ``None`` when no record was given one."""
    if not any(isinstance(p, OutputRecord) and p.partition is not None for p in output):
        return None
    out: list[int | None] = []
    for part in output:
        if isinstance(part, OutputBlock):
            out.extend([None] * len(part))
        else:
            out.append(part.partition)
    return out


#: a column of byte strings as ``(codes, distinct byte strings)``: ``uniques[codes[i]]``, or
#: null where ``codes[i] == -1`` (each distinct byte string once in ``uniques``)
Encoded = tuple[np.ndarray, np.ndarray]


def _codes_of(encoded: Encoded | None, start: int, stop: int) -> Encoded | None:
    """The codes of records ``start`` to ``stop`` of ``encoded``, with all its distinct
    values."""
    return None if encoded is None else (encoded[0][start:stop], encoded[1])


class SourceBatch:
    """Serialized input records of one task in processing order, as columns.

    ``topic`` names the topic of every record when they share one; otherwise ``topics`` holds
    each record's topic. The Spark stage builds one per task and micro-batch without creating a
    Python object per record; :meth:`records` yields :class:`SourceRecord` objects for the
    record-by-record path.
    """

    __slots__ = ("encoded_keys", "encoded_values", "headers", "keys", "offsets", "partitions",
                 "timestamps", "topic", "topics", "values")

    def __init__(
        self,
        timestamps: np.ndarray,
        partitions: np.ndarray,
        offsets: np.ndarray,
        keys: np.ndarray,
        values: np.ndarray,
        topic: str | None,
        topics: list[str] | None = None,
        encoded_keys: Encoded | None = None,
        encoded_values: Encoded | None = None,
        headers: list[Headers] | None = None,
    ) -> None:
        self.timestamps = np.asarray(timestamps, dtype=np.int64)
        self.partitions = np.asarray(partitions, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.keys = keys
        self.values = values
        self.topic = topic
        self.topics = topics
        #: ``keys`` and ``values`` as codes into their distinct byte strings, when the source
        #: gives them so (``codes[i] == -1``: null); saves hashing every byte string again
        self.encoded_keys = encoded_keys
        self.encoded_values = encoded_values
        #: each record's headers (``None``: no record has any)
        self.headers = headers

    @classmethod
    def from_records(cls, records: Iterable[SourceRecord]) -> SourceBatch:
        """Columns of ``records``."""
        recs = list(records)
        topics = [r.topic for r in recs]
        single = topics[0] if topics and all(t == topics[0] for t in topics) else None
        keys = np.empty(len(recs), dtype=object)
        keys[:] = [r.key for r in recs]
        values = np.empty(len(recs), dtype=object)
        values[:] = [r.value for r in recs]
        return cls(
            np.array([r.timestamp for r in recs], dtype=np.int64),
            np.array([r.partition for r in recs], dtype=np.int64),
            np.array([r.offset for r in recs], dtype=np.int64),
            keys,
            values,
            single if single is not None or not recs else None,
            None if single is not None or not recs else topics,
            headers=[r.headers for r in recs] if any(r.headers for r in recs) else None,
        )

    def __len__(self) -> int:
        return len(self.timestamps)

    def slice(self, start: int, stop: int) -> SourceBatch:
        """The records ``start`` to ``stop`` (the encoded keys' and values' distinct byte
        strings shared)."""
        return SourceBatch(
            self.timestamps[start:stop],
            self.partitions[start:stop],
            self.offsets[start:stop],
            self.keys[start:stop],
            self.values[start:stop],
            self.topic,
            None if self.topics is None else self.topics[start:stop],
            _codes_of(self.encoded_keys, start, stop),
            _codes_of(self.encoded_values, start, stop),
            None if self.headers is None else self.headers[start:stop],
        )

    def topic_at(self, i: int) -> str:
        return self.topic if self.topic is not None else self.topics[i]  # type: ignore[index]

    def metadata(self, i: int) -> RecordMetadata:
        return RecordMetadata(self.topic_at(i), int(self.partitions[i]), int(self.offsets[i]))

    def record(self, i: int) -> SourceRecord:
        return SourceRecord(
            self.topic_at(i),
            int(self.partitions[i]),
            int(self.offsets[i]),
            int(self.timestamps[i]),
            self.keys[i],
            self.values[i],
            () if self.headers is None else self.headers[i],
        )

    def records(self) -> Iterator[SourceRecord]:
        topics = [self.topic] * len(self) if self.topic is not None else (self.topics or [])
        yield from map(
            SourceRecord,
            topics,
            self.partitions.tolist(),
            self.offsets.tolist(),
            self.timestamps.tolist(),
            self.keys,
            self.values,
            repeat(()) if self.headers is None else self.headers,
        )
