"""Helpers shared by the DSL tests."""

from __future__ import annotations

from functools import partial
from typing import Any

from kspark.dsl import StreamsBuilder
from kspark.processor import Processor
from kspark.records import Record


class _Recorder(Processor):
    def __init__(self, out: list[tuple[Any, Any, int]]) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def record_from(builder: StreamsBuilder, node_name: str) -> list[tuple[Any, Any, int]]:
    """Attach a processor to ``node_name`` that appends each ``(key, value, timestamp)`` it
    receives (for a KTable: ``Change`` values) to the returned list."""
    out: list[tuple[Any, Any, int]] = []
    name = builder.new_name("TEST-RECORDER-")
    builder.topology.add_processor(name, partial(_Recorder, out), node_name)
    return out
