"""The nodes of a topology: sources, processors and sinks."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kspark.processor.api import Processor
from kspark.serdes import Serde

ProcessorSupplier = Callable[[], Processor]


@dataclass
class SourceNode:
    name: str
    topics: list[str]
    key_serde: Serde | None
    value_serde: Serde | None
    pattern: re.Pattern[str] | None = None
    #: ``timestamp_extractor(consumed_record, partition_time)``: each record's timestamp
    #: (:mod:`kspark.processor.timestamps`; ``None``: the timestamp it was written with)
    timestamp_extractor: Callable[[Any, int], int] | None = None


@dataclass
class ProcessorNode:
    name: str
    supplier: ProcessorSupplier
    parents: list[str]
    stores: list[str] = field(default_factory=list)


@dataclass
class SinkNode:
    name: str
    topic: str
    parents: list[str]
    key_serde: Serde | None
    value_serde: Serde | None
    #: ``partitioner(key, value)``: the record's partition (taken modulo the topic's count),
    #: ``None`` for the default (by key)
    partitioner: Callable[[Any, Any], int | None] | None = None
    #: ``topic_extractor(key, value, sink_context)``: each record's topic (``topic`` is then
    #: empty)
    topic_extractor: Callable[[Any, Any, Any], str] | None = None


Node = SourceNode | ProcessorNode | SinkNode
