"""A source's timestamp extractor (:mod:`kspark.processor.timestamps`) applied to one record,
with the time of the record's partition, kept among the task's persisted processor states."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark._duration import whole
from kspark.errors import StreamsError
from kspark.records import ConsumedRecord, Headers
from kspark.topology.nodes import SourceNode

#: the processor state that holds each (topic, partition)'s time: the largest timestamp
#: extracted from it so far
PARTITION_TIMES = "@partition-times"


def extracted_timestamp(
    times: dict[Any, Any], node: SourceNode, topic: str, partition: int, offset: int,
    timestamp: int, key: Any, value: Any, headers: Headers,
    record_dropped: Callable[[str, str], None],
) -> int:
    """The timestamp ``node``'s extractor gives the record (``times``: the partition times);
    -1 for a record it drops (a negative timestamp, counted as ``invalid-timestamp``)."""
    extractor = node.timestamp_extractor
    assert extractor is not None
    where = f"record at topic {topic!r} partition {partition} offset {offset}"
    partition_time = times.get((topic, partition), -1)
    try:
        ts = extractor(ConsumedRecord(topic, partition, offset, timestamp, key, value, headers),
                       partition_time)
    except Exception as exc:
        raise StreamsError(f"the timestamp extractor of source {node.name!r} failed on the "
                           f"{where}: {type(exc).__name__}: {exc}") from exc
    extracted = whole(ts)
    if extracted is None:
        raise StreamsError(f"the timestamp extractor of source {node.name!r} returned "
                           f"{ts!r:.80} for the {where}, not a timestamp in ms")
    ts = extracted
    if ts < 0:
        record_dropped("invalid-timestamp", f"skipped {where}: source {node.name!r} extracted "
                                            f"the negative timestamp {ts}")
        return -1
    if ts > partition_time:
        times[(topic, partition)] = ts
    return ts
