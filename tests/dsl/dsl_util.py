"""Helpers shared by the DSL tests."""

from __future__ import annotations

from functools import partial
from typing import Any

from kspark.dsl import KTable, StreamsBuilder
from kspark.dsl.internals.ktable import KTableImpl
from kspark.processor import Processor
from kspark.records import Record


class _Recorder(Processor):
    def __init__(self, out: list[tuple[Any, Any, int]]) -> None:
        self.out = out

    def process(self, record: Record) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def record_from(builder: StreamsBuilder, source: str | KTable) -> list[tuple[Any, Any, int]]:
    """Attach a processor to ``source`` (a node name, or a KTable) that appends each ``(key,
    value, timestamp)`` it receives (for a KTable: ``Change`` values) to the returned list. A
    KTable is asked to send old values, as an operator that reads them would ask."""
    out: list[tuple[Any, Any, int]] = []
    name = builder.new_name("TEST-RECORDER-")
    if isinstance(source, KTableImpl):
        source.view.enable_sending_old_values(True)
        source = source.node_name
    builder.topology.add_processor(name, partial(_Recorder, out), source)
    return out
