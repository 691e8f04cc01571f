"""The processor of a stream-table and a stream-global-table join (docs/semantics.md §9.2,
§9.3), as Kafka Streams runs it.

Each stream record looks up the table's value of its key (a global table: of the key
``key_selector(key, value)`` selects) and forwards ``joiner(value, table_value)`` with the
record's own timestamp; an inner join forwards nothing when the table has no value. A versioned
table is read as of the record's timestamp. A record with a null value, or whose join key is
null, is dropped and counted, except that a left join forwards ``joiner(value, None)`` for a
null join key.

With a grace period (``Joined.grace``, a versioned table only) the records wait in a buffer
(a store of their own, ``<join>-Buffer``, in Kafka Streams' layout) until the join has seen a
record ``grace`` ms after them, and are joined then, in timestamp order (then by serialized
key, then arrival), so that table updates that arrive a little late still count; a record
already that late when it arrives, or with a null key, is joined at once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Final

from kspark.dsl.internals.processors import drop_null
from kspark.dsl.internals.table_views import ValueGetterSupplier
from kspark.processor.api import Processor, ProcessorContext
from kspark.records import Record, event_time
from kspark.serdes import Serde, as_serde
from kspark.state.join_stores import BufferedRecord, buffer_key, buffer_key_parts

#: processor state keys of the grace buffer: its stream time and its last sequence number
BUFFER_TIME: Final = "buffer_time"
BUFFER_SEQ: Final = "buffer_seq"


class StreamTableJoinProcessor(Processor):
    """Joins each record with a table's value (see the module). ``key_selector`` (global
    tables) maps ``(key, value)`` to the table's key; without one the record's key is it.
    ``buffer``: the grace buffer's store, with ``grace_ms`` and ``key_serde`` (its keys'
    order)."""

    def __init__(self, getter: ValueGetterSupplier, joiner: Callable[[Any, Any], Any],
                 left: bool, key_selector: Callable[[Any, Any], Any] | None = None,
                 buffer: str | None = None, grace_ms: int = 0, key_serde: Any = None,
                 internal_topics: Collection[str] = ()) -> None:
        self.getter_supplier = getter
        self.joiner = joiner
        self.left = left
        self.key_selector = key_selector
        self.buffer_name = buffer
        self.grace_ms = grace_ms
        self.key_serde = key_serde
        #: topics the buffer names as Kafka Streams does: ``<application id>-<topic>``
        self.internal_topics = frozenset(internal_topics)

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.getter = self.getter_supplier.make(context)
        self.buffer = None if self.buffer_name is None else context.get_state_store(
            self.buffer_name)
        if self.buffer is not None:
            serde: Serde = as_serde(self.key_serde or context.key_serde())
            self.key_bytes, self.key_of = serde.serialize, serde.deserialize
            self.state = context.processor_state
            self.state.setdefault(BUFFER_TIME, -1)
            self.state.setdefault(BUFFER_SEQ, 0)

    def _join_key(self, record: Record) -> Any:
        selector = self.key_selector
        return record.key if selector is None else selector(record.key, record.value)

    def process(self, record: Record) -> None:
        value = record.value
        key = self._join_key(record)
        if value is None or (key is None and not self.left):
            what = "value" if value is None else "key"
            drop_null(self.context, record, what,
                      f"(join key) in stream-table join {self.context.processor_name!r}")
            return
        state = self.state if self.buffer is not None else None
        ts = event_time(record)
        # too late to wait, or without a key (Kafka Streams 4.3.1 fails on one): joined at once
        if state is None or record.key is None or state[BUFFER_TIME] - self.grace_ms > ts:
            self._join(record, key)
            return
        assert self.buffer is not None
        state[BUFFER_SEQ] = seq = (state[BUFFER_SEQ] + 1) & 0x7FFFFFFF
        meta = self.context.record_metadata()
        topic, partition, offset = ("", -1, -1) if meta is None else (
            meta.topic, meta.partition, meta.offset)
        if topic in self.internal_topics:
            topic = f"{self.context.application_id}-{topic}"
        self.buffer.put(buffer_key(ts, self.key_bytes(record.key) or b"", seq),
                        BufferedRecord(value, ts, record.headers, topic, partition, offset), ts)
        state[BUFFER_TIME] = max(state[BUFFER_TIME], ts)
        self._evict(state[BUFFER_TIME] - self.grace_ms)

    def _evict(self, bound: int) -> None:
        """Join and remove the buffered records with a timestamp up to ``bound``, in order."""
        assert self.buffer is not None
        done = []
        for store_key, buffered in self.buffer.entries():
            ts, key_bytes = buffer_key_parts(store_key)
            if ts > bound:
                break
            done.append(store_key)
            record = Record(self.key_of(key_bytes), buffered.value, ts, buffered.headers)
            self._join(record, self._join_key(record))
        if done:
            self.buffer.remove_all(done)

    def _join(self, record: Record, key: Any) -> None:
        getter = self.getter
        if key is None:
            found = None
        elif getter.versioned:
            found = getter.get_as_of(key, event_time(record))
        else:
            found = getter.get(key)
        if found is not None:
            self.context.forward(record.with_value(self.joiner(record.value, found.value)))
        elif self.left:
            self.context.forward(record.with_value(self.joiner(record.value, None)))
