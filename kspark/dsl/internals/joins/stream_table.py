"""The processor of a stream-table and a stream-global-table join (docs/semantics.md §9.2,
§9.3), as Kafka Streams runs it.

Each stream record looks up the table's current value of its key (a global table: of the key
``key_selector(key, value)`` selects) and forwards ``joiner(value, table_value)`` with the
record's own timestamp; an inner join forwards nothing when the table has no value. A record
with a null value, or whose join key is null, is dropped and counted, except that a left join
forwards ``joiner(value, None)`` for a null join key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kspark.dsl.internals.processors import drop_null
from kspark.dsl.internals.table_views import ValueGetterSupplier
from kspark.processor.api import Processor, ProcessorContext
from kspark.records import Record


class StreamTableJoinProcessor(Processor):
    """Joins each record with a table's value (see the module). ``key_selector`` (global
    tables) maps ``(key, value)`` to the table's key; without one the record's key is it."""

    def __init__(self, getter: ValueGetterSupplier, joiner: Callable[[Any, Any], Any],
                 left: bool, key_selector: Callable[[Any, Any], Any] | None = None) -> None:
        self.getter_supplier = getter
        self.joiner = joiner
        self.left = left
        self.key_selector = key_selector

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.getter = self.getter_supplier.make(context)

    def process(self, record: Record) -> None:
        value = record.value
        selector = self.key_selector
        key = record.key if selector is None else selector(record.key, value)
        if value is None or (key is None and not self.left):
            what = "value" if value is None else "key"
            drop_null(self.context, record, what,
                      f"(join key) in stream-table join {self.context.processor_name!r}")
            return
        found = None if key is None else self.getter.get(key)
        if found is not None:
            self.context.forward(record.with_value(self.joiner(value, found.value)))
        elif self.left:
            self.context.forward(record.with_value(self.joiner(value, None)))
