"""Timestamp extractors (Kafka Streams' ``TimestampExtractor``): what a source gives each record
as its timestamp, ``timestamp_extractor=`` of ``StreamsBuilder.stream`` / ``table`` /
``global_table`` and ``Topology.add_source``.

An extractor is called as ``extractor(record, partition_time)`` with the deserialized
:class:`~kspark.records.ConsumedRecord` and the largest timestamp extracted so far from the
record's partition (-1 before the first), and returns the record's timestamp in ms. A negative
result drops the record, counted as ``invalid-timestamp`` (docs/semantics.md §10.4). Without an
extractor a record keeps the timestamp it was written with.
"""

from __future__ import annotations

import time
from typing import Any

from kspark._duration import whole
from kspark.records import ConsumedRecord

__all__ = ["RecordTimestamp", "UsePartitionTimeOnInvalidTimestamp", "ValueField",
           "WallclockTimestamp"]


class RecordTimestamp:
    """The timestamp the record was written with (what a source does without an extractor)."""

    def __call__(self, record: ConsumedRecord, partition_time: int) -> int:
        return record.timestamp


class UsePartitionTimeOnInvalidTimestamp:
    """The record's own timestamp; the partition time instead when it is negative."""

    def __call__(self, record: ConsumedRecord, partition_time: int) -> int:
        return record.timestamp if record.timestamp >= 0 else partition_time


class WallclockTimestamp:
    """The wall-clock time when the record is processed (the machine's clock, as Kafka
    Streams' ``WallclockTimestampExtractor``; the test driver's mocked clock does not move
    it)."""

    def __call__(self, record: ConsumedRecord, partition_time: int) -> int:
        return int(time.time() * 1000)


class ValueField:
    """The integer field ``name`` of the record's value (a mapping), in ms; a record whose
    value lacks it, or holds no whole number there, gets -1 and is dropped."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, record: ConsumedRecord, partition_time: int) -> int:
        value: Any = record.value
        ts = value.get(self.name) if isinstance(value, dict) else None
        ms = whole(ts)
        return -1 if ms is None else ms

    def __repr__(self) -> str:
        return f"ValueField({self.name!r})"
